"""pb_utils objects ↔ wire descriptors (used by the stub)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ._api import (
    GpuTensor,
    InferenceRequest,
    InferenceResponse,
    InferenceResponseSender,
    InferenceTrace,
    Tensor,
    TritonError,
    TritonModelException,
)
from ._device import DeviceLink
from ._dtypes import CODES, NAMES
from ._gpu_memory import GpuView, gpu_source
from ._wire import Link, RequestDesc, ResponseDesc, TensorDesc, _numpy_dtype


def tensor_to_wire(link: Link, tensor: Tensor) -> Any:
    datatype = NAMES.get(tensor.triton_dtype())
    if datatype is None:
        raise TritonModelException(f"tensor '{tensor.name()}' has no valid data type")
    if tensor.is_cpu():
        array = tensor._array  # not as_numpy(): it refuses BF16
    else:
        # A GPU tensor crosses through CUDA IPC when the link has it; else as host data.
        device = link.device
        if device is not None:
            desc = gpu_tensor_to_wire(device, tensor.name(), datatype, tensor)
            if desc is not None:
                return desc
        array = tensor.to_host()  # type: ignore[attr-defined]
    return link.put(tensor.name(), datatype, array)


def tensor_from_wire(link: Link, desc: Any) -> Tensor:
    if desc[3] == "g":
        return gpu_tensor_from_wire(link, desc)
    return Tensor._checked(desc[0], link.get(desc), CODES[desc[1]])


def gpu_tensor_to_wire(device: DeviceLink, name: str, datatype: str, tensor: Any) -> TensorDesc | None:
    """A GPU tensor (``GpuTensor``: a torch CUDA tensor, or a GPU input passed on)
    copied into the link's device arena; None when it cannot go that way."""
    source = gpu_source(tensor._device)
    if source is None:
        return None  # e.g. a tensor that is not C-contiguous: by host
    device_id, address, shape, nbytes = source
    return device.put(name, datatype, device_id, address, shape, nbytes)


def gpu_tensor_from_wire(link: Link, desc: Any) -> Tensor:
    """The ``pb_utils.Tensor`` (``is_cpu()`` false) over a GPU tensor the server sent:
    a view of its device arena, handed back when the model's last use of it is gone."""
    name, datatype, shape, _, place, nbytes = desc
    device = link.device
    if device is None:
        raise TritonModelException(f"tensor '{name}' is on the GPU, and this stub has no CUDA IPC")
    dtype = _numpy_dtype(datatype)

    def to_host() -> np.ndarray[Any, Any]:
        out = np.empty(shape, dtype)
        device.to_host(place, nbytes, out.ctypes.data)
        return out

    view = GpuView(device.address(place), shape, dtype, place[0], device.holder(place), to_host)
    return GpuTensor(name, view, CODES[datatype])


def response_to_wire(
    link: Link, response: InferenceResponse, wanted: Collection[str] | None = None
) -> ResponseDesc:
    """``response`` for the server; with ``wanted``, only those outputs (the request's
    requested outputs: Triton drops the others, before they cost a copy here)."""
    error = response.error()
    if error is not None:
        return ([], (error.message(), error.code()), response._parameters)
    outputs = [
        tensor_to_wire(link, t) for t in response.output_tensors() if wanted is None or t.name() in wanted
    ]
    return (outputs, None, response._parameters)


def response_from_wire(link: Link, desc: ResponseDesc) -> InferenceResponse:
    outputs, error, parameters = desc
    if error is not None:
        message, code = error
        return InferenceResponse._received([], TritonError(message, code), parameters)
    return InferenceResponse._received([tensor_from_wire(link, t) for t in outputs], None, parameters)


def bls_request_to_wire(link: Link, request: InferenceRequest) -> dict[str, Any]:
    return {
        "m": request.model_name(),
        "v": request.model_version(),
        "i": [tensor_to_wire(link, t) for t in request.inputs()],
        "r": request.requested_output_names(),
        "id": request.request_id(),
        "cid": request.correlation_id(),
        "f": request.flags(),
        "to": request.timeout(),
        "p": request._parameters,
        "tc": request.trace()._context or "",
        "pm": preferred_memory(request),
    }


def preferred_memory(request: InferenceRequest) -> tuple[int, int] | None:
    """A BLS request's ``PreferredMemory`` as (memory type, device id); None: not given."""
    preferred = request._preferred_memory
    if preferred is None:
        return None
    return (int(preferred.preferred_memory_type), int(preferred.preferred_device_id))


def request_from_wire(
    link: Link,
    desc: RequestDesc,
    model_name: str,
    version: int,
    make_sender: Callable[[InferenceRequest], InferenceResponseSender | None] | None = None,
) -> InferenceRequest:
    """A request ``execute`` receives; ``make_sender(request)`` makes its response sender
    when the model first asks for one (most never do)."""
    token, rid, correlation_id, flags, timeout, parameters, inputs, outputs, traced = desc
    request = InferenceRequest._received(
        model_name,
        version,
        [tensor_from_wire(link, t) for t in inputs],
        outputs,  # unpickled for this request: its own list
        rid,
        correlation_id,
        flags,
        timeout,
        parameters,
        None,
        make_sender,
    )
    request._token = token
    if traced:  # traced: request.trace() hands it on to BLS requests
        request._trace = InferenceTrace(traced)
    return request
