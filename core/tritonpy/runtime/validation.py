"""Check an inference request against its model's config, once, for every front end.

``validate_request`` runs before a request is queued. It checks input names,
data types, shapes and batch size, sets ``request.batch_size``, and applies
input ``reshape`` so backends see tensors in the model's own shape. Messages
follow Triton's wording.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from tritonpy_sdk import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    ParameterValue,
    Tensor,
    TritonError,
)

from ..codec import ByteSizeMismatch, InputSizes, request_prefix
from ..inputs import NUMERIC
from ..memory.shared import SHARED_MEMORY_KEYS
from .spec import IOSpec, TensorSpec

#: Request parameters of Triton's sequence extension; the core consumes them.
SEQUENCE_KEYS = ("sequence_id", "sequence_start", "sequence_end")


def take_reserved_parameters(request: InferenceRequest) -> None:
    """Move Triton's reserved parameters (HTTP, gRPC, in-process) into the request's
    fields, as Triton's front ends do: ``sequence_id`` / ``sequence_start`` /
    ``sequence_end`` into ``correlation_id`` and ``flags``, ``priority`` into
    ``priority``, ``timeout`` (µs) into ``timeout_us``; backends never see them
    as parameters (a Python model reads ``request.timeout()``). Requests built
    in process or by BLS may set the fields directly instead."""
    params = request.parameters
    for key in ("priority", "timeout"):
        if key in params:
            value = params.pop(key)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
                # Triton's words; Triton answers 500 here, a client's mistake is a 400.
                raise TritonError.invalid_arg(
                    f"Unable to parse '{key}': "
                    "attempt to access JSON non-unsigned-integer as unsigned-integer"
                )
            if key == "priority":
                request.priority = value
            else:
                request.timeout_us = value
    if "sequence_id" in params:
        value = params.pop("sequence_id")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | str)
            or (isinstance(value, int) and not 0 <= value < 2**64)
        ):
            # Triton's prefix (no request id); Triton answers 500 here, a client's mistake is a 400.
            raise TritonError.invalid_arg(
                "Unable to parse 'sequence_id': it must be an unsigned 64-bit integer or a string, "
                f"got {json.dumps(value)}"
            )
        request.correlation_id = value
    for key, flag in (("sequence_start", SEQUENCE_START), ("sequence_end", SEQUENCE_END)):
        if key in params:
            value = params.pop(key)
            if not isinstance(value, bool):
                raise TritonError.invalid_arg(
                    f"Unable to parse '{key}': attempt to access JSON non-boolean as boolean"
                )
            request.flags = request.flags | flag if value else request.flags & ~flag


def _fmt(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def direct_batch_size(spec: IOSpec, inputs: dict[str, Any]) -> int:
    """The batch size of a request of these ``inputs`` when each is a plain numeric
    numpy array that fits ``spec`` as it is (``validate_request`` would take it and
    change nothing: no ``reshape``); else 0, and ``validate_request`` decides (and
    words any refusal)."""
    specs = spec.inputs
    if (len(inputs) != len(specs) and not spec.required_inputs.issubset(inputs)) or spec.shape_tensors:
        return 0
    batching = spec.batching
    batch = 0 if batching else 1
    for name, value in inputs.items():
        if type(value) is not np.ndarray:
            return 0
        ispec = specs.get(name)
        if ispec is None or ispec.reshape is not None or NUMERIC.get(value.dtype) is not ispec.datatype:
            return 0
        shape: tuple[int, ...] = value.shape
        if batching:
            if not shape:
                return 0
            if batch == 0:
                batch = shape[0]
            elif shape[0] != batch:
                return 0
            shape = shape[1:]
        if shape != ispec.dims and not _dims_fit(ispec.dims, shape):
            return 0
    if batching and not 1 <= batch <= spec.max_batch_size:
        return 0
    return batch


def validate_request(
    spec: IOSpec, request: InferenceRequest, sizes: Mapping[str, ByteSizeMismatch] | None = None
) -> None:
    """Raise ``TritonError`` (INVALID_ARG) unless ``request`` fits ``spec``.

    The checks come in Triton 2.51's order, with its words, so that a request with
    several faults gets the error Triton gives: the requested outputs' names; the
    number of inputs; the inputs' names; then, for a batching model, each input's
    batch dimension and the batch size; then each input's data type, shape and byte
    size. Inputs are visited last given first, the order in which Triton's map of them
    usually comes back. Like Triton, the messages about a count, a batch, a data type,
    a shape or a size start with the request id; those about an unknown name do not.
    ``sizes``: inputs whose data did not fit their shapes (``size_error``).
    """
    model = spec.name
    inputs = request.inputs
    specs = spec.inputs
    for out in request.requested_outputs:
        if out.name not in spec.outputs:
            raise TritonError.invalid_arg(f"unexpected inference output '{out.name}' for model '{model}'")
        if out.parameters:  # Triton refuses a bad one as it parses the request: first
            _check_output_parameters(out.name, out.parameters)
    given = len(inputs)
    if given > len(specs) or given < len(spec.required_inputs):
        raise _count_error(spec, request)
    if not spec.input_names.issuperset(inputs):  # one set check when every name is known
        for name in reversed(inputs):
            if name not in specs:
                raise TritonError.invalid_arg(f"unexpected inference input '{name}' for model '{model}'")
    if given < len(specs) and not spec.required_inputs.issubset(inputs):
        # Optional inputs given in place of required ones: Triton runs the model without
        # them; refused here, in the words of the count check.
        raise _count_error(spec, request)
    batching = spec.batching
    shape_tensors = spec.shape_tensors
    batch = 0
    # The first data type, shape or size at fault, reported once the batch is known to be
    # right (Triton checks every input's batch dimension first); one pass over the inputs.
    fault: str | None = None
    reshaped: list[str] = []
    for name, tensor in reversed(inputs.items()):
        ispec = specs[name]
        device = tensor.device  # a device-resident input is not copied to be checked
        shape = device.shape if device is not None else tensor.data.shape
        if batching and not (shape_tensors and name in shape_tensors):  # a shape tensor has no batch dim
            if not shape:
                raise TritonError.invalid_arg(
                    f"{_prefix(request)}input '{name}' has no shape but model requires batch dimension "
                    f"for '{model}'"
                )
            if batch == 0:
                batch = shape[0]
            elif shape[0] != batch:
                raise TritonError.invalid_arg(
                    f"{_prefix(request)}input '{name}' batch size does not match other inputs for '{model}'"
                )
            dims = shape[1:]
        else:
            dims = shape
        if fault is None:
            if tensor.datatype is not ispec.datatype:
                fault = (
                    f"{_prefix(request)}inference input '{name}' data-type is '{tensor.datatype.value}', "
                    f"but model '{model}' expects '{ispec.datatype.value}'"
                )
            elif dims != ispec.dims and not _dims_fit(ispec.dims, dims):  # equal: it fits
                fault = _prefix(request) + shape_mismatch(model, ispec, shape, batching)
            elif sizes is not None and name in sizes:
                fault = sizes[name].fault(model, _prefix(request))
        if ispec.reshape is not None:
            reshaped.append(name)
    if batching:
        if batch > spec.max_batch_size:
            raise TritonError.invalid_arg(
                f"{_prefix(request)}inference request batch-size must be <= {spec.max_batch_size} "
                f"for '{model}'"
            )
        if batch < 1:  # Triton lets it through to a byte-size mismatch
            raise TritonError.invalid_arg(
                f"{_prefix(request)}inference request batch-size must be >= 1 for '{model}'"
            )
        request.batch_size = batch
    else:
        request.batch_size = 1
    if fault is not None:
        raise TritonError.invalid_arg(fault)
    if reshaped:  # only once the whole request is valid: it changes the request
        _apply_reshape(spec, request, reshaped)


def size_error(spec: IOSpec, error: InputSizes) -> TritonError:
    """Triton's error for a request some of whose inputs brought data of the wrong size:
    what it finds first, checking the request (its stand-ins) against the model's
    config and each input's byte size in its turn."""
    try:
        validate_request(spec, error.request, {m.name: m for m in error.mismatches})
    except TritonError as exc:
        return exc
    return error  # not reached: a mismatched input is always reported


def _prefix(request: InferenceRequest) -> str:
    return request_prefix(request.id)


def _quoted(names: Iterable[str], empty: str) -> str:
    """Names as Triton lists them: ``['a','b']``; ``empty`` when there are none."""
    inner = ",".join(f"'{n}'" for n in names)
    return f"[{inner}]" if inner else empty


def _count_error(spec: IOSpec, request: InferenceRequest) -> TritonError:
    """Triton's error for a request with too few or too many inputs: the given ones
    last first, the missing ones in the config's order."""
    total = len(spec.inputs)
    required = len(spec.required_inputs)
    inputs = request.inputs
    expected = f"{total} inputs" if required == total else f"number of inputs between {required} and {total}"
    missing = [n for n, t in spec.inputs.items() if not t.optional and n not in inputs]
    return TritonError.invalid_arg(
        f"{_prefix(request)}expected {expected} but got {len(inputs)} inputs for model '{spec.name}'. "
        f"Got input(s) {_quoted(reversed(inputs), '[]')}, but missing required input(s) "
        # With none missing Triton's list is a lone ']' (it drops the last character of
        # "[" for the missing comma): the same text here.
        f"{_quoted(missing, ']')}. Please provide all required input(s)."
    )


def shape_mismatch(model: str, ispec: TensorSpec, shape: tuple[int, ...], batching: bool) -> str:
    """Triton's words for an input of ``shape`` that does not fit ``ispec`` (without
    the request id)."""
    return (
        f"unexpected shape for input '{ispec.name}' for model '{model}'. "
        f"Expected {_fmt(ispec.full_shape(batching))}, got {_fmt(shape)}. "
        + (_BATCH_NOTE if batching else "")
    )


#: Output parameters of the classification extension (``class_count`` is tritonpy's alias).
CLASS_COUNT_KEYS = ("classification", "class_count")


def refuse_shared_memory(kind: str, name: str, parameters: Mapping[str, object]) -> None:
    """INVALID_ARG when an input or output of a request built in process asks for
    a shared-memory region: the HTTP and gRPC front ends resolve those parameters
    (and remove them) before a request gets here, and ignoring one would answer
    with data the client never looks at."""
    key = next((k for k in SHARED_MEMORY_KEYS if k in parameters), None)
    if key is not None:
        region = parameters.get("shared_memory_region", "")
        raise TritonError.invalid_arg(
            f"{kind} '{name}' asks for shared memory ('{key}'"
            + (f", region '{region}'" if region else "")
            + "), which only the HTTP and gRPC front ends serve: in process, pass the arrays"
        )


def _check_output_parameters(name: str, parameters: Mapping[str, ParameterValue]) -> None:
    refuse_shared_memory("output", name, parameters)
    for key in CLASS_COUNT_KEYS:
        if key not in parameters:
            continue
        value = parameters[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
            # Triton's prefix (no request id); Triton answers 500 here, a client's mistake is a 400.
            raise TritonError.invalid_arg(
                f"Unable to set '{key}' of output '{name}': it must be a non-negative integer "
                f"(the number of classes to return), got {json.dumps(value)}"
            )


_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to "
    "be prepended to each input shape. If you want to specify the full shape including the batch "
    "dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size."
)


def _dims_fit(expected: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether ``dims`` fit the config's ``expected`` dims (-1: any size)."""
    return len(dims) == len(expected) and all(e == -1 or e == d for e, d in zip(expected, dims))


def _apply_reshape(spec: IOSpec, request: InferenceRequest, names: list[str]) -> None:
    """Give the inputs ``names`` (those with a ``reshape``) the model's own shape."""
    for name in names:
        tensor = request.inputs[name]
        target = spec.inputs[name].reshape
        assert target is not None
        device = tensor.device
        have = device.shape if device is not None else tensor.data.shape
        batched = spec.batching and name not in spec.shape_tensors
        dims = have[1:] if batched else have
        new = fill_variable_dims(target, spec.inputs[name].dims, dims)
        shape = (have[0], *new) if batched else new
        if device is not None:  # device-resident: the same memory under the new shape
            request.inputs[name] = Tensor.on_device(name, device.reshape(shape), tensor.datatype)
        else:
            request.inputs[name] = Tensor(name, tensor.data.reshape(shape), tensor.datatype)


def fill_variable_dims(
    target: tuple[int, ...], declared: tuple[int, ...], actual: tuple[int, ...]
) -> tuple[int, ...]:
    """``target`` with its -1 dims taken, in order, from ``actual``'s variable dims."""
    if -1 not in target:
        return target
    variable = [a for d, a in zip(declared, actual) if d == -1]
    it = iter(variable)
    return tuple(next(it, -1) if t == -1 else t for t in target)
