"""One request's answer, as Triton's identity backend gives it.

Each requested ``OUTPUT<i>`` is the request's ``INPUT<i>``: same data type,
shape and bytes. The input's array is handed back as the output, not copied
(the core encodes it for the wire, copies it into the client's output
region, or into the response cache). An optional ``INPUT<i>`` left out answers zeros
of its config's type and shape (-1 read as 1), behind the request's batch
dimension when the model batches; a required one left out fails that request
(UNSUPPORTED, ``failed to get input 'INPUT<i>'``), not the others of the batch.
Every answer carries identity.cc's example response parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    Metric,
    ParameterValue,
    Tensor,
    TritonError,
)

from ._config import INPUT_PREFIX, OUTPUT_PREFIX, OptionalInput, Settings

#: The response parameters identity.cc sets on every response it answers with outputs.
RESPONSE_PARAMETERS: dict[str, ParameterValue] = {
    "param0": "an example string parameter",
    "param1": 42,
    "param2": False,
    "param3": 123.123,
}


def wanted_outputs(request: InferenceRequest, settings: Settings) -> list[str]:
    """The outputs ``request`` asks for (every output when it names none), in name order:
    Triton's core keeps them in a ``std::set``, and an error stops at the first failing one."""
    if not request.requested_outputs:
        return sorted(settings.outputs)
    return sorted({o.name for o in request.requested_outputs})


def zeros(optional: OptionalInput, batch: int | None) -> np.ndarray[Any, Any]:
    """What an output of a left-out optional input holds: zeros (BYTES: empty elements)."""
    shape = optional.shape if batch is None else (batch, *optional.shape)
    if optional.datatype is DataType.BYTES:
        return np.full(shape, b"", dtype=np.object_)
    return np.zeros(shape, optional.datatype.numpy_dtype)


def batch_dim(request: InferenceRequest) -> int:
    """The request's batch size as identity.cc reads it: the first dim of its first input."""
    for tensor in request.inputs.values():
        shape = tensor.shape
        return int(shape[0]) if shape else 1
    prefix = f"[request id: {request.id}] " if request.id else ""
    raise TritonError.invalid_arg(f"{prefix}out of bounds index 0: request has 0 inputs")


def answer(
    request: InferenceRequest,
    settings: Settings,
    batching: bool,
    metric: Metric | None,
) -> InferenceResponse:
    """The response to one request; an error response for a request that cannot be answered."""
    try:
        outputs: dict[str, Tensor] = {}
        batch: int | None = None
        if batching and settings.optional:
            batch = batch_dim(request)
        for name in wanted_outputs(request, settings):
            index = name[len(OUTPUT_PREFIX) :]
            input_name = INPUT_PREFIX + index
            tensor = request.inputs.get(input_name)
            if tensor is None:
                optional = settings.optional.get(index)
                if optional is None:
                    raise TritonError.unsupported(f"failed to get input '{input_name}'")
                outputs[name] = Tensor(name, zeros(optional, batch), optional.datatype)
                continue
            if metric is not None:
                metric.increment(tensor.size)
            outputs[name] = Tensor(name, tensor.data, tensor.datatype)
    except TritonError as exc:
        return InferenceResponse.from_error(exc)
    return InferenceResponse(outputs, parameters=dict(RESPONSE_PARAMETERS))
