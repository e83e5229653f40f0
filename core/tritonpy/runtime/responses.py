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
                outputs[out.name] = classify(outputs[out.name], k, labels.get(out.name))
    response.outputs = outputs
    return response


def _undo_reshape(spec: IOSpec, dims: tuple[int, ...], reshape: tuple[int, ...], tensor: Tensor) -> Tensor:
    held = tensor.shape  # a device tensor's without copying it
    actual = held[1:] if spec.batching else held
    target = fill_variable_dims(dims, reshape, actual)
    shape = (held[0], *target) if spec.batching else target
    try:
        if tensor.device is not None and tensor.is_device:  # stays where it lies
            return Tensor.on_device(tensor.name, tensor.device.reshape(shape), tensor.datatype)
        return Tensor(tensor.name, tensor.data.reshape(shape), tensor.datatype)
    except ValueError:
        raise TritonError.internal(
            f"output '{tensor.name}' of shape {list(held)} cannot be reshaped to "
            f"{list(shape)} as its config's dims say"
        ) from None


def classify(tensor: Tensor, k: int, labels: list[str] | None) -> Tensor:
    """Triton's classification extension: the top ``k`` classes along the last axis.

    Each element is ``"<value>:<index>"`` or ``"<value>:<index>:<label>"`` as
    BYTES; a ``[B, C]`` output becomes ``[B, k]``.
    """
    if tensor.datatype is DataType.BYTES:
        raise TritonError.invalid_arg(
            f"class result not available for output '{tensor.name}' due to unsupported type "
            f"'{tensor.datatype.value}'"
        )
    if k < 1:
        raise TritonError.invalid_arg(f"class_count must be positive, got {k}")
    data = tensor.data
    if data.ndim == 0:
        data = data.reshape(1)
    k = min(k, data.shape[-1])
    order = np.argsort(-data.astype(np.float64), axis=-1, kind="stable")[..., :k]
    flat_vals = np.take_along_axis(data, order, axis=-1).reshape(-1)
    flat_idx = order.reshape(-1)
    out = np.empty(flat_idx.shape, dtype=np.object_)
    for i, (v, idx) in enumerate(zip(flat_vals.tolist(), flat_idx.tolist())):
        text = f"{float(v):f}:{idx}"
        if labels is not None and idx < len(labels):
            text += f":{labels[idx]}"
        out[i] = text.encode("utf-8")
    shape: tuple[int, ...] = (*data.shape[:-1], k)
    return Tensor(tensor.name, out.reshape(shape), DataType.BYTES)
