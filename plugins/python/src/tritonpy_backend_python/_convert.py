"""SDK objects ↔ the stub's wire descriptors, and ↔ ``pb_utils`` objects (in-process mode)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils._api import GpuTensor
from triton_python_backend_utils._convert import preferred_memory
from triton_python_backend_utils._cuda import CudaError
from triton_python_backend_utils._dtypes import NAMES
from triton_python_backend_utils._wire import Link, RequestDesc, ResponseDesc, TensorDesc, _numpy_dtype
from tritonpy_sdk import (
    DataType,
    DeviceArray,
    DeviceMemory,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    Tensor,
    TritonError,
)

_CODES = list(ErrorCode)  # index = pb_utils.TritonError code
_NUMBERS = {code: number for number, code in enumerate(_CODES)}

log = logging.getLogger("tritonpy.backend.python")


def error_to_pair(error: TritonError) -> tuple[str, int]:
    return error.message, _NUMBERS[error.code]


def error_from_pair(message: str, code: int) -> TritonError:
    return TritonError(message, _CODES[code] if 0 <= code < len(_CODES) else ErrorCode.INTERNAL)


#: Where a model's frames start in an error text (Triton's format: ``Type: msg\n\nAt:\n  frames``).
FRAMES = "\n\nAt:\n"


def execute_error(
    instance: str, text: str, kind: Any = TritonError.internal, frames: bool = True
) -> TritonError:
    """A failed execute of ``instance``, worded as Triton's Python backend words it,
    and logged at error level whole, as Triton logs it (a decoupled model's failure
    after its requests were answered reaches no client, only this log).

    With ``frames`` false (``--backend-config=python,error-frames=false``) the
    client gets ``Type: message`` only.
    """
    prefix = f"Failed to process the request(s) for model '{instance}', message: "
    log.error("%s%s", prefix, text)
    error: TritonError = kind(prefix + _without_frames(text, frames))
    return error


def _without_frames(text: str, frames: bool) -> str:
    """``text`` (a model's exception, Triton's format) whole, or ``Type: message`` only."""
    return text if frames or FRAMES not in text else text.split(FRAMES, 1)[0]


def strip_frames(instance: str, text: str, what: str, frames: bool) -> str:
    """``text`` (a model's exception, Triton's format) as a client may see it: whole,
    or with ``frames`` false ``Type: message`` only, the frames then logged here so
    the operator still has them."""
    shown = _without_frames(text, frames)
    if shown is not text:
        log.warning("%s of '%s' failed: %s", what, instance, text)
    return shown


def _requested(request: InferenceRequest, all_outputs: list[str]) -> list[str]:
    """The outputs a request asked for; all of the config's when it named none (as Triton)."""
    return [o.name for o in request.requested_outputs] or all_outputs


# -- wire (stub processes) ---------------------------------------------------------------------


#: A data type's protocol name by the member's ``id`` (reading ``.value`` of an
#: ``Enum`` member runs Python code; a dict keyed by ``id`` answers in C), and the
#: member by its name (``DataType(name)`` runs ``EnumMeta.__call__``).
_NAME_OF = {id(d): d.value for d in DataType}
_BY_NAME = {d.value: d for d in DataType}


def _datatype(name: str) -> DataType:
    """``DataType(name)``, looked up (an unknown name still raises as ``DataType`` does)."""
    return _BY_NAME.get(name) or DataType(name)


def request_to_wire(link: Link, request: InferenceRequest, token: int, all_outputs: list[str]) -> RequestDesc:
    put = link.put
    return (
        token,
        request.id,
        request.correlation_id,
        request.flags,
        request.timeout_us,
        request.parameters,
        [
            put(name, _NAME_OF[id(t.datatype)], t.data) if t.device is None else _device_tensor(link, name, t)
            for name, t in request.inputs.items()
        ],
        _requested(request, all_outputs),
        request.trace_context,
    )


def _device_tensor(link: Link, name: str, tensor: Tensor) -> TensorDesc:
    """A tensor with a ``DeviceArray`` for the stub (an input; a BLS response's output
    asked for on the GPU): through CUDA IPC when it lies on a GPU and the link has it
    (the core hands device inputs only to instances that take them), else as host data."""
    array = tensor.device
    datatype = _NAME_OF[id(tensor.datatype)]
    device = link.device
    if device is not None and array is not None and tensor.is_device:
        desc = device.put(name, datatype, array.device_id, array.address, array.shape, array.nbytes)
        if desc is not None:
            return desc
    return link.put(name, datatype, tensor.data)


def tensor_from_wire(link: Link, desc: TensorDesc, memory: DeviceMemory | None) -> Tensor:
    """A tensor the stub sent. One on the GPU (``"g"``) is copied out of the stub's
    device arena at once, into ``memory`` (the instance's device memory) or, without
    it, to the host; its block goes back to the stub with the next message."""
    name, datatype, shape, where, place, nbytes = desc
    if where != "g":
        return Tensor(name, link.get(desc), _datatype(datatype))
    device = link.device
    if device is None:  # the server offered no CUDA IPC: the stub never sends this
        raise TritonError.internal(f"tensor '{name}' came from the stub on the GPU without CUDA IPC")
    dtype = _numpy_dtype(datatype)
    try:
        if memory is not None:
            array = memory.allocate(place[0], shape, dtype)
            if nbytes:
                device.cuda.copy(place[0], array.address, device.address(place), nbytes, wait_device=False)
            return Tensor.on_device(name, array, _datatype(datatype))
        host = np.empty(shape, dtype)
        device.to_host(place, nbytes, host.ctypes.data)
        return Tensor(name, host, _datatype(datatype))
    except CudaError as exc:
        raise TritonError.internal(f"cannot copy tensor '{name}' from the stub's GPU memory: {exc}") from None
    finally:
        device.release(place)


def response_from_wire(
    link: Link, desc: ResponseDesc, memory: DeviceMemory | None = None
) -> InferenceResponse:
    outputs, error, parameters = desc
    if error is not None:
        return InferenceResponse(error=error_from_pair(*error), parameters=parameters)
    get = link.get
    by_name = _BY_NAME
    return InferenceResponse(
        {
            d[0]: Tensor(d[0], get(d), by_name.get(d[1]) or DataType(d[1]))  # ``_datatype``, inlined
            if d[3] != "g"
            else tensor_from_wire(link, d, memory)
            for d in outputs
        },
        parameters=parameters,
    )


def response_to_wire(link: Link, response: InferenceResponse, to_host: bool = False) -> ResponseDesc:
    """A BLS response for the stub: an output on a GPU crosses through CUDA IPC, as an
    input does, unless its request preferred host memory (``to_host``)."""
    if response.error is not None:
        return ([], error_to_pair(response.error), response.parameters)
    outputs = [
        link.put(name, t.datatype.value, t.data)
        if t.device is None or to_host
        else _device_tensor(link, name, t)
        for name, t in response.outputs.items()
    ]
    return (outputs, None, response.parameters)


def bls_output_device(preferred: Any) -> int | None:
    """The GPU a BLS request's ``PreferredMemory`` (as (memory type, device id), or None)
    asks its outputs on; None for none asked, or host memory."""
    if preferred is None or int(preferred[0]) != pb_utils.TRITONSERVER_MEMORY_GPU:
        return None
    return int(preferred[1])


def bls_wants_host(preferred: Any) -> bool:
    """Whether a BLS request's ``PreferredMemory`` asks for host memory (its GPU outputs
    are then copied there); without one, outputs stay where the model put them."""
    return preferred is not None and int(preferred[0]) != pb_utils.TRITONSERVER_MEMORY_GPU


def bls_outputs(names: Collection[str], device: int | None) -> list[RequestedOutput]:
    """A BLS request's requested outputs, each wanted on GPU ``device`` (None: the host)."""
    return [RequestedOutput(n, device_id=device) for n in names]


#: The output names of a model (name, version), for a BLS request that names none.
OutputsOf = Callable[[str, int], Collection[str]]


def bls_request_from_wire(
    link: Link,
    desc: dict[str, Any],
    memory: DeviceMemory | None = None,
    outputs_of: OutputsOf | None = None,
) -> InferenceRequest:
    """A stub's BLS request. One whose ``PreferredMemory`` asks for a GPU names its outputs
    (``outputs_of`` the model, when it named none) as wanted there, if this link can carry
    GPU tensors; else its outputs come as host data."""
    device = bls_output_device(desc.get("pm")) if link.device is not None else None
    names = desc["r"]
    if not names and device is not None and outputs_of is not None:
        names = outputs_of(desc["m"], int(desc["v"]))
    return InferenceRequest(
        model_name=desc["m"],
        model_version=int(desc["v"]),
        inputs={d[0]: tensor_from_wire(link, d, memory) for d in desc["i"]},
        requested_outputs=bls_outputs(names, device),
        id=desc["id"],
        parameters=desc["p"],
        correlation_id=desc["cid"],
        flags=desc["f"],
        timeout_us=desc["to"],
        trace_context=desc.get("tc") or "",
    )


# -- pb_utils (in-process mode) ------------------------------------------------------------------


#: pb_utils type code → data type, and back.
_DATATYPES = {code: DataType(name) for code, name in NAMES.items()}
_PB_CODES = {datatype: code for code, datatype in _DATATYPES.items()}
#: The same by the member's ``id``: hashing an ``Enum`` member runs Python code (about
#: 150 ns); its ``id`` is stable (members live as long as their class) and hashes in C.
_PB_CODE_OF = {id(datatype): code for datatype, code in _PB_CODES.items()}


_checked_pb_tensor = pb_utils.Tensor._checked


def tensor_to_pb(tensor: Tensor) -> pb_utils.Tensor:
    device = tensor.device
    if device is not None and tensor.is_device:  # a GPU tensor, handed over in place
        return GpuTensor(tensor.name, device, _PB_CODES[tensor.datatype])
    return pb_utils.Tensor(tensor.name, tensor.data, _PB_CODES[tensor.datatype])


def tensor_from_pb(tensor: pb_utils.Tensor) -> Tensor:
    if isinstance(tensor, GpuTensor):  # stays on the GPU: the core copies it where it must go
        device = tensor._device
        if not isinstance(device, DeviceArray):  # a model's own (torch) tensor: wrapped, no copy
            device = DeviceArray.from_dlpack(device)
        return Tensor.on_device(tensor._name, device, _DATATYPES[tensor._code])
    return Tensor(tensor.name(), tensor._array, _DATATYPES[tensor._code])


def response_from_pb(
    response: pb_utils.InferenceResponse, wanted: Collection[str] | None = None
) -> InferenceResponse:
    """A model's response for the core; with ``wanted``, only those outputs (as Triton)."""
    # pb_utils' own fields, read directly: its constructor checked them (a list of
    # pb_utils Tensors, a pb_utils TritonError or None), and each accessor returns
    # the field as it is.
    error = response._error
    params = response._parameters
    if error is not None:
        return InferenceResponse(error=error_from_pair(error.message(), error.code()), parameters=params)
    outputs = {}
    for t in response._outputs:
        name = t._name
        if wanted is None or name in wanted:
            if type(t) is pb_utils.Tensor:
                outputs[name] = Tensor(name, t._array, _DATATYPES[t._code])  # tensor_from_pb, inlined
            else:
                outputs[name] = tensor_from_pb(t)
    return InferenceResponse(outputs, parameters=params)


def response_to_pb(response: InferenceResponse, to_host: bool = False) -> pb_utils.InferenceResponse:
    """``response`` for an in-process model: GPU outputs as they are, or copied to host
    memory (``to_host``: its BLS request preferred that)."""
    if response.error is not None:
        message, code = error_to_pair(response.error)
        return pb_utils.InferenceResponse._received(
            [], pb_utils.TritonError(message, code), dict(response.parameters)
        )
    if to_host:
        outputs = [pb_utils.Tensor(t.name, t.data, _PB_CODES[t.datatype]) for t in response.outputs.values()]
    else:
        outputs = [tensor_to_pb(t) for t in response.outputs.values()]
    return pb_utils.InferenceResponse._received(outputs, None, dict(response.parameters))


class _Received:
    """The core's request behind a ``pb_utils`` request ``execute`` receives in-process.

    Its cancellation flag: ``is_set()`` reads the core request's state, which
    ``cancel()`` sets before it runs any callback (so no callback per request).
    And the maker of its response sender, called on the model's first
    ``get_response_sender()`` (most models never ask): it wraps the core request's
    ``response_sender`` as the model's ``pb_utils`` sender, and reads the request's
    output names when it sends (the model's list, as it stands then).
    """

    __slots__ = ("request",)

    def __init__(self, request: InferenceRequest) -> None:
        self.request = request

    def is_set(self) -> bool:
        return self.request.is_cancelled()

    def set(self) -> None:  # the flag is the request's: setting it cancels the request
        self.request.cancel()

    def __call__(self, pb_request: pb_utils.InferenceRequest) -> pb_utils.InferenceResponseSender | None:
        sender = self.request.response_sender
        if sender is None:
            return None
        wanted = pb_request.requested_output_names()

        def send(response: pb_utils.InferenceResponse | None, flags: int) -> None:
            assert sender is not None
            sender.send(None if response is None else response_from_pb(response, wanted), flags)

        return pb_utils.InferenceResponseSender(send, pb_request, sender.decoupled)


def request_to_pb(request: InferenceRequest, all_outputs: list[str]) -> pb_utils.InferenceRequest:
    """``request`` as the model receives it in-process (its sender and cancellation
    read from ``request`` when the model asks)."""
    received = _Received(request)
    requested = request.requested_outputs
    inputs = []
    for t in request.inputs.values():  # a loop, not a comprehension: no frame of its own
        if t.device is None:
            # The core's host tensors hold numpy arrays of their data type.
            inputs.append(_checked_pb_tensor(t.name, t.data, _PB_CODE_OF[id(t.datatype)]))
        else:
            inputs.append(tensor_to_pb(t))  # a GPU input, for an instance that takes them
    pb_request = pb_utils.InferenceRequest._received(
        request.model_name,
        request.model_version,
        inputs,
        # _requested(request, all_outputs), a list the model may change as its own:
        [o.name for o in requested] if requested else list(all_outputs),
        request.id,
        request.correlation_id,
        request.flags,
        request.timeout_us,
        request.parameters,
        received,
        received,
    )
    if request.trace_context:  # traced: request.trace() hands it on to BLS requests
        pb_request._trace = pb_utils.InferenceTrace(request.trace_context)
    return pb_request


def bls_request_from_pb(
    request: pb_utils.InferenceRequest, outputs_of: OutputsOf | None = None
) -> InferenceRequest:
    """An in-process model's BLS request (``PreferredMemory`` as ``bls_request_from_wire``
    reads it: a GPU tensor output is handed to the model as it is)."""
    device = bls_output_device(preferred_memory(request))
    names = request.requested_output_names()
    if not names and device is not None and outputs_of is not None:
        names = list(outputs_of(request.model_name(), request.model_version()))
    return InferenceRequest(
        model_name=request.model_name(),
        model_version=request.model_version(),
        inputs={t.name(): tensor_from_pb(t) for t in request.inputs()},
        requested_outputs=bls_outputs(names, device),
        id=request.request_id(),
        parameters=dict(request._parameters),
        correlation_id=request.correlation_id(),
        flags=request.flags(),
        timeout_us=request.timeout(),
        trace_context=request.trace()._context or "",
    )
