"""Turn what a backend returned into what the client gets.

Drops outputs the client did not request, undoes output ``reshape``, and
applies the classification extension (``class_count``). Runs on the
instance's worker thread right after ``execute``.
"""

from __future__ import annotations

import numpy as np
from tritonpy_sdk import DataType, InferenceRequest, InferenceResponse, Tensor, TritonError

from .spec import IOSpec
from .validation import fill_variable_dims


def finish_response(
    spec: IOSpec,
    labels: dict[str, list[str]],
    request: InferenceRequest,
    response: InferenceResponse,
) -> InferenceResponse:
    """Shape ``response`` for the client of ``request`` (in place; returned)."""
    response.model_name = spec.name
    response.model_version = spec.version
    response.id = request.id
    if response.error is not None:
        response.outputs = {}
        return response
    produced = response.outputs
    wanted = request.requested_outputs or None
    if wanted is None and not spec.reshaped_outputs:
        return response  # every output as produced: nothing to drop, undo or classify
    outputs: dict[str, Tensor] = {}
    names = [o.name for o in wanted] if wanted is not None else produced  # not changed below
    for name in names:
        tensor = produced.get(name)
        if tensor is None:
            continue
        ospec = spec.outputs.get(name)
        if ospec is not None and ospec.reshape is not None:
            tensor = _undo_reshape(spec, ospec.dims, ospec.reshape, tensor)
        outputs[name] = tensor
    if wanted is not None:
        for out in wanted:
            # Checked to be a non-negative int when the request was validated.
            k = out.parameters.get("classification", out.parameters.get("class_count"))
            if k and out.name in outputs:
                assert isinstance(k, int)
                outputs[out.name] = classify(outputs[out.name], k, labels.get(out.name), spec.batching)
    response.outputs = outputs
    return response


def reshaped(tensor: Tensor, shape: tuple[int, ...], name: str) -> Tensor:
    """``tensor`` as ``name`` with ``shape``: a view of its elements where they lie (a
    device tensor stays on its device); ValueError when they do not fit ``shape``."""
    if tensor.device is not None and tensor.is_device:
        return Tensor.on_device(name, tensor.device.reshape(shape), tensor.datatype)
    return Tensor(name, tensor.data.reshape(shape), tensor.datatype)


def _undo_reshape(spec: IOSpec, dims: tuple[int, ...], reshape: tuple[int, ...], tensor: Tensor) -> Tensor:
    held = tensor.shape  # a device tensor's without copying it
    actual = held[1:] if spec.batching else held
    target = fill_variable_dims(dims, reshape, actual)
    shape = (held[0], *target) if spec.batching else target
    try:
        return reshaped(tensor, shape, tensor.name)
    except ValueError:
        raise TritonError.internal(
            f"output '{tensor.name}' of shape {list(held)} cannot be reshaped to "
            f"{list(shape)} as its config's dims say"
        ) from None


#: The output types Triton classifies (others: "class result not available ...").
CLASSIFIABLE = frozenset(
    {
        DataType.UINT8,
        DataType.UINT16,
        DataType.UINT32,
        DataType.UINT64,
        DataType.INT8,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.FP32,
        DataType.FP64,
    }
)
#: Most elements one batch entry may classify (Triton's guard since 26.02).
MAX_CLASSIFIED = 1_000_000


def classify(tensor: Tensor, k: int, labels: list[str] | None, batching: bool) -> Tensor:
    """Triton's classification extension: the top ``k`` of each batch entry's elements.

    Each batch entry of a batching model (``batching``), or the whole tensor of a
    model that does not batch, is ranked as one flat run of elements, as Triton does:
    a ``[B, ...]`` output becomes ``[B, k]``, a non-batching one ``[k]``, with ``k``
    at most the entry's element count. Each element is ``"<value>:<index>"`` or
    ``"<value>:<index>:<label>"`` as BYTES, the value written as C++'s
    ``std::to_string`` writes it (``0.500000``; integers without a fraction).
    """
    if tensor.datatype not in CLASSIFIABLE:
        raise TritonError.invalid_arg(
            f"class result not available for output due to unsupported type '{tensor.datatype.value}'"
        )
    if k < 1:
        raise TritonError.invalid_arg(f"class_count must be positive, got {k}")
    data = tensor.data
    per_entry = batching and data.ndim > 0
    rows = data.reshape(data.shape[0], -1) if per_entry else data.reshape(1, -1)
    if rows.shape[1] > MAX_CLASSIFIED:
        raise TritonError.invalid_arg("classification output tensor too large")
    k = min(k, rows.shape[1])
    order = np.argsort(-rows.astype(np.float64), axis=-1, kind="stable")[:, :k]
    values = np.take_along_axis(rows, order, axis=-1).reshape(-1).tolist()
    as_float = tensor.datatype in (DataType.FP32, DataType.FP64)
    out = np.empty(len(values), dtype=np.object_)
    for i, (v, idx) in enumerate(zip(values, order.reshape(-1).tolist())):
        text = f"{v:f}:{idx}" if as_float else f"{v}:{idx}"
        if labels is not None and idx < len(labels):
            text += f":{labels[idx]}"
        out[i] = text.encode("utf-8")
    shape = (rows.shape[0], k) if per_entry else (k,)
    return Tensor(tensor.name, out.reshape(shape), DataType.BYTES)
