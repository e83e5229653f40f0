"""KServe v2 inference requests and responses over HTTP, JSON and binary.

The binary tensor data extension: ``Inference-Header-Content-Length`` gives the
size of the JSON header; the binary data of inputs with a ``binary_data_size``
parameter follows it, in input order. Inputs are numpy views of the request
body (no copy); binary outputs are written from the output arrays' memory.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    Tensor,
    TritonError,
)

from ..codec import (
    ByteSizeMismatch,
    InputSizes,
    already_exists,
    array_from_buffer,
    array_from_json,
    array_to_buffer,
    array_to_json,
    request_prefix,
)
from ..memory.shared import REGION, SHARED_MEMORY_KEYS, OutputSlot, SystemSharedMemory
from ..model_version import parse_version
from ..runtime.spec import IOSpec
from . import json_body

HEADER_LENGTH = "inference-header-content-length"


def binary_json_size(content_type: str, mime: str) -> str | None:
    """The JSON part's size that ``content_type`` announces after ``mime`` (SageMaker's and
    Vertex AI's way to frame binary data), as written; None when it has no ``mime``;
    INVALID_ARG in Triton's words when ``mime`` is not at its start."""
    at = content_type.find(mime)
    if at < 0:
        return None
    if at > 0:
        raise TritonError.invalid_arg(
            f"expect MIME type for binary data starts with '{mime}', got: {content_type}"
        )
    return content_type[len(mime) :]


_ONE_OF = (
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    "'shared_memory_region' in 'parameters'."
)


#: Triton's answer to a request parameter whose key starts with ``triton_`` (over HTTP).
_RESERVED_KEYS = (
    "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
)


def _bad(message: str) -> TritonError:
    return TritonError.invalid_arg(message)


# The words of Triton's JSON reader (TritonJson) when a field is missing or of the
# wrong type, after "Unable to parse '<field>': " (Triton answers 500; a client's
# mistake is a 400 here).
_NOT_ARRAY = "attempt to access JSON non-array as array"
_NOT_STRING = "attempt to access JSON non-string as string"
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_NOT_BOOL = "attempt to access JSON non-boolean as boolean"
_ABSENT = object()


def _member(obj: Any, key: str, kind: type, wrong: str) -> Any:
    """``obj[key]`` when it is a ``kind``, else INVALID_ARG in Triton's words (``wrong``
    for a value of another type); a value that is not an object has no members."""
    value = obj.get(key, _ABSENT) if isinstance(obj, dict) else _ABSENT
    if value is _ABSENT:
        raise _bad(f"Unable to parse '{key}': attempt to access non-existing object member '{key}'")
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _bad(f"Unable to parse '{key}': {wrong}")
    return value


def _request_parameters(doc: dict[str, Any]) -> dict[str, ParameterValue]:
    """The request's ``parameters`` (Triton's words when it is not an object, null too)."""
    params = doc.get("parameters", _ABSENT)
    if params is _ABSENT:
        return {}
    if not isinstance(params, dict):
        raise _bad("failed to get request params.: attempt to get members for non-object")
    return _typed_parameters(params)


def _io_parameters(entry: Any) -> dict[str, Any]:
    """An input's or output's ``parameters``; as Triton, one that is not an object is
    read as none (Triton only looks up keys in it)."""
    params = entry.get("parameters") if isinstance(entry, dict) else None
    return params if isinstance(params, dict) else {}


def _typed_parameters(params: dict[str, Any]) -> dict[str, ParameterValue]:
    """``params`` when every value is a bool, int, float or str, else Triton's refusal
    (floats are accepted as well: Triton takes them as doubles)."""
    for key, value in params.items():
        if not isinstance(value, bool | int | float | str):
            raise _bad(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
    return params


def _content(entry: Any, params: dict[str, Any]) -> None:
    """Triton's first check of an input: exactly one of its three ways to carry data."""
    has_data = isinstance(entry, dict) and "data" in entry
    has_binary = "binary_data_size" in params
    has_region = REGION in params
    if has_data + has_binary + has_region != 1:
        fields = [
            f
            for f, on in (
                ("'data'", has_data),
                ("'binary_data_size'", has_binary),
                (f"'{REGION}'", has_region),
            )
            if on
        ]
        raise _bad(f"{_ONE_OF} But " + ("set " + " ".join(fields) if fields else "no field is set"))


def _shape(entry: dict[str, Any]) -> list[int]:
    shape: list[int] = _member(entry, "shape", list, _NOT_ARRAY)
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise _bad(f"Unable to parse 'shape': {_NOT_UINT}")
    return shape


def _datatype(entry: dict[str, Any], name: str) -> DataType:
    dt = _member(entry, "datatype", str, _NOT_STRING)
    try:
        return DataType.from_protocol(dt)
    except ValueError:
        raise _bad(f"invalid datatype for input {name}: '{dt}'") from None


#: Where one output goes: binary (True) or JSON (False) in the body, or into a
#: shared-memory region (then the body carries its metadata only).
Placement = bool | OutputSlot


def decode_request(
    model: str,
    version: str,
    header: bytes | memoryview,
    binary: memoryview,
    memory: SystemSharedMemory | None = None,
) -> tuple[InferenceRequest, bool, dict[str, Placement]]:
    """The request in ``header`` (JSON) + ``binary``.

    Returns the core request, whether outputs default to binary
    (``binary_data_output``), and each requested output's placement: its
    ``binary_data``, or its slot in a shared-memory region of ``memory``.
    """
    text = bytes(header)
    plan = _PLANS.get(text)
    if plan is not None and plan.binary_size == len(binary):
        return plan.request(model, version, binary)
    doc = json_body.loads(text)
    # In Triton's order: the id, the parameters, the inputs, the outputs.
    request_id = doc.get("id", "") if isinstance(doc, dict) else ""
    if not isinstance(request_id, str):
        raise _bad(f"Unable to parse 'id': {_NOT_STRING}")
    params = dict(_request_parameters(doc)) if isinstance(doc, dict) else {}
    for key in params:
        if key.startswith("triton_"):  # Triton's words and status (all such keys, over HTTP)
            raise _bad(_RESERVED_KEYS)
    binary_output = _flag(params.pop("binary_data_output", False), "binary_data_output")
    inputs_doc = _member(doc, "inputs", list, _NOT_ARRAY)
    inputs: dict[str, Tensor] = {}
    #: Inputs whose data is not the size their shape needs (checked last, as Triton does).
    mismatched: list[ByteSizeMismatch] = []
    offset = 0
    for entry in inputs_doc:
        in_params = _io_parameters(entry)
        _content(entry, in_params)
        name = _member(entry, "name", str, _NOT_STRING)
        datatype = _datatype(entry, name)
        shape = _shape(entry)
        if name in inputs:
            raise already_exists(request_id, "input", name)
        if REGION in in_params:
            inputs[name] = _shared(memory).input_tensor(name, datatype, shape, in_params, mismatched)
            continue
        if "binary_data_size" in in_params:
            size = in_params["binary_data_size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise _bad(f"Unable to parse 'binary_data_size': {_NOT_UINT}")
            if offset + size > len(binary):
                raise _bad(
                    f"unexpected size for input '{name}', expecting {offset + size - len(binary)} "
                    f"additional bytes for model '{model}'"
                )
            array = array_from_buffer(name, datatype, shape, binary[offset : offset + size], mismatched)
            offset += size
        else:
            data = _member(entry, "data", list, _NOT_ARRAY)
            array = array_from_json(name, datatype, shape, data, mismatched)
        inputs[name] = Tensor(name, array, datatype)
    if offset != len(binary):
        raise _bad(
            f"unexpected additional input data for model '{model}': "
            f"{len(binary) - offset} bytes of binary data that no input claims"
        )
    outputs: list[RequestedOutput] = []
    binary_flags: dict[str, Placement] = {}
    outputs_doc = _member(doc, "outputs", list, _NOT_ARRAY) if "outputs" in doc else []
    for entry in outputs_doc:
        name = _member(entry, "name", str, _NOT_STRING)
        if any(o.name == name for o in outputs):
            raise already_exists(request_id, "output", name)
        out_params = dict(_typed_parameters(_io_parameters(entry)))
        device: int | None = None
        if out_params and REGION in out_params:
            slot = _shared(memory).output_slot(name, out_params)
            binary_flags[name] = slot
            device = slot.device_id  # a CUDA region's GPU: the backend may produce it there
            for key in (*SHARED_MEMORY_KEYS, "binary_data"):
                out_params.pop(key, None)
        elif "binary_data" in out_params:
            binary_flags[name] = _flag(out_params.pop("binary_data"), "binary_data")
        outputs.append(RequestedOutput(name, out_params, device))
    request = InferenceRequest(
        model_name=model,
        model_version=parse_version(version),
        inputs=inputs,
        requested_outputs=outputs,
        id=request_id,
        parameters=params,
    )
    if mismatched:
        raise InputSizes(request, mismatched)
    if len(text) <= _PLAN_MAX_BYTES and _Plan.fits(inputs_doc, binary_flags):
        if len(_PLANS) >= _PLAN_COUNT:
            _PLANS.clear()
        _PLANS[text] = _Plan(request, binary_output, binary_flags, len(binary))
    return request, binary_output, binary_flags


#: Requests decoded so far, by their JSON header: a client sends the same header
#: again and again (perf_analyzer, a client with fixed shapes), and its next
#: request is then only its binary data (``_Plan``). Bounded: cleared when full.
_PLANS: dict[bytes, _Plan] = {}
_PLAN_COUNT = 256
_PLAN_MAX_BYTES = 4096


class _Plan:
    """What a JSON header decoded to, for the next request with the same header and
    as much binary data: the same request with that data. Only for headers whose
    decoding cannot depend on anything else: every input binary and of a fixed-size
    type (its size then checked by the shape alone), no shared-memory region."""

    __slots__ = ("binary_output", "binary_size", "flags", "id", "inputs", "outputs", "params")

    def __init__(
        self, request: InferenceRequest, binary_output: bool, flags: dict[str, Placement], binary_size: int
    ) -> None:
        self.binary_size = binary_size
        self.binary_output = binary_output
        # Copies: the first request's own may change once it is out of here.
        self.flags = dict(flags)
        self.id = request.id
        self.params = dict(request.parameters)
        self.outputs = [(o.name, dict(o.parameters)) for o in request.requested_outputs]
        inputs = []
        offset = 0
        for name, tensor in request.inputs.items():
            array = tensor.data
            inputs.append((name, tensor.datatype, array.dtype, array.size, array.shape, offset))
            offset += array.nbytes
        self.inputs = inputs

    @staticmethod
    def fits(inputs_doc: list[Any], flags: dict[str, Placement]) -> bool:
        for entry in inputs_doc:
            params = entry.get("parameters")
            if not isinstance(params, dict) or REGION in params or "binary_data_size" not in params:
                return False
            if entry["datatype"] == "BYTES":
                return False
        return all(isinstance(flag, bool) for flag in flags.values())

    def request(
        self, model: str, version: str, binary: memoryview
    ) -> tuple[InferenceRequest, bool, dict[str, Placement]]:
        # Loops, not comprehensions: no function call each (Python 3.11).
        frombuffer = np.frombuffer
        inputs = {}
        for name, datatype, dtype, count, shape, offset in self.inputs:
            inputs[name] = Tensor(name, frombuffer(binary, dtype, count, offset).reshape(shape), datatype)
        outputs = []
        for name, params in self.outputs:
            outputs.append(RequestedOutput(name, dict(params)))
        request = InferenceRequest(
            model_name=model,
            model_version=parse_version(version),
            inputs=inputs,
            requested_outputs=outputs,
            id=self.id,
            parameters=dict(self.params),
        )
        return request, self.binary_output, dict(self.flags)


def _shared(memory: SystemSharedMemory | None) -> SystemSharedMemory:
    if memory is None:
        raise _bad("shared memory regions are not available here: send the tensor's data in the request")
    return memory


def _flag(value: ParameterValue, key: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(f"Unable to parse '{key}': {_NOT_BOOL}")
    return value


def decode_raw(model: str, version: str, spec: IOSpec, body: memoryview) -> InferenceRequest:
    """A body that is the raw data of a single-input model's only input (Triton's rules).

    The data type comes from the config. The shape is the config's dims, with a
    batch dimension of 1 when the model batches, and its one variable dim (if
    any) taken from the body's size. A BYTES input must have dims ``[1]``: the
    whole body is its one element.
    """
    # A raw request has no JSON, so no id: Triton's "<id_unknown>" prefix on its checks.
    prefix = request_prefix(None)
    if len(spec.inputs) != 1:
        raise _bad(
            f"{prefix}Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(spec.inputs)} inputs in '{model}' model configuration"
        )
    (ispec,) = spec.inputs.values()
    shape = ([1] if spec.batching else []) + list(ispec.dims)
    variable = [i for i, d in enumerate(shape) if d == -1]
    if len(variable) > 1:
        raise _bad(
            f"{prefix}The shape of the raw input '{ispec.name}' can not be deduced because there are "
            "more than one variable-sized dimension"
        )
    if ispec.datatype is DataType.BYTES:
        if variable or math.prod(shape) != 1:
            raise _bad(
                f"{prefix}For BYTE datatype raw input '{ispec.name}', the model must have input shape [1]"
            )
        array = np.empty(shape, dtype=np.object_)
        array.reshape(-1)[0] = bytes(body)
    else:
        if variable:
            known = math.prod(d for d in shape if d != -1)
            shape[variable[0]] = len(body) // (known * ispec.datatype.itemsize) if known else 0
        try:
            array = array_from_buffer(ispec.name, ispec.datatype, shape, body)
        except ByteSizeMismatch as exc:
            # Triton's words: its raw request's one input is named 'raw_input' until it is
            # matched to the model's (a raw request has no id).
            raise _bad(
                f"{request_prefix('')}input byte size mismatch for input 'raw_input' for model "
                f"'{model}'. Expected {exc.expected}, got {exc.given}"
            ) from None
    tensor = Tensor(ispec.name, array, ispec.datatype)
    return InferenceRequest(
        model_name=model, model_version=parse_version(version), inputs={ispec.name: tensor}
    )


Body = list[bytes | memoryview]
"""A response body as its parts in order: the JSON, then each binary output's bytes."""


def encode_response(
    response: InferenceResponse, binary_output: bool, binary_flags: dict[str, Placement]
) -> tuple[Body, int | None]:
    """The response body's parts, and the JSON header length when binary data follows.

    Binary outputs are views of the output arrays' memory (no copy here); the
    transport writes them after the JSON. Outputs placed in shared memory are
    copied there and listed without data, as Triton does. When every binary
    output is empty there is no binary section: plain JSON, no header length
    (Triton 2.51 answers so, ``binary_data_size: 0`` kept on each output).
    """
    entries: list[bytes] = []
    parts: Body = [b""]
    for name, tensor in response.outputs.items():
        placement = binary_flags.get(name, binary_output)
        if placement is True:
            data = tensor.data
            buf = array_to_buffer(data, tensor.datatype)
            entries.append(_binary_entry(name, tensor.datatype, data.shape, len(buf)))
            if len(buf):
                parts.append(buf)
            continue
        entry: dict[str, Any] = {
            "name": name,
            "datatype": tensor.datatype.value,
            "shape": list(tensor.shape),
        }
        if isinstance(placement, OutputSlot):
            placement.write_tensor(tensor)
        else:
            entry["data"] = array_to_json(tensor.data, tensor.datatype, name)
        entries.append(_dumps(entry))
    # Triton's key order: id first. Joined from its parts: the same bytes as one
    # ``json.dumps`` of the whole document with these separators.
    head = [b'{"id":', _dumps(response.id), b","] if response.id else [b"{"]
    head.append(_name_and_version(response.model_name, response.model_version))
    if response.parameters:
        head += (b',"parameters":', _dumps(response.parameters))
    head += (b',"outputs":[', b",".join(entries), b"]}")
    header = b"".join(head)
    parts[0] = header
    return parts, (len(header) if len(parts) > 1 else None)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=True).encode()


#: JSON fragments of responses, by what they are made of (bounded: cleared when full).
_FRAGMENTS: dict[Any, bytes] = {}
_FRAGMENT_COUNT = 1024


def _remember(key: Any, fragment: bytes) -> bytes:
    if len(_FRAGMENTS) >= _FRAGMENT_COUNT:
        _FRAGMENTS.clear()
    _FRAGMENTS[key] = fragment
    return fragment


def _binary_entry(name: str, datatype: DataType, shape: tuple[int, ...], size: int) -> bytes:
    """The JSON of a binary output: the same for every response of a model with these shapes."""
    # The data type by its member's ``id`` (members live as long as their class): hashing
    # an ``Enum`` member, or reading its ``value``, runs Python code.
    key = (name, id(datatype), shape, size)
    fragment = _FRAGMENTS.get(key)
    if fragment is None:
        entry = {
            "name": name,
            "datatype": datatype.value,
            "shape": list(shape),
            "parameters": {"binary_data_size": size},
        }
        fragment = _remember(key, _dumps(entry))
    return fragment


def _name_and_version(model: str, version: int) -> bytes:
    key = (model, version)
    fragment = _FRAGMENTS.get(key)
    if fragment is None:
        fragment = _remember(
            key, b'"model_name":%s,"model_version":%s' % (_dumps(model), _dumps(str(version)))
        )
    return fragment
