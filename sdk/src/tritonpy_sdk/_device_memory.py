"""Device memory that the core lends a backend, and batching on the device.

``DeviceMemory`` is what the core sets as ``ModelInstance.device_memory`` on a
GPU instance when it has a CUDA runtime: buffers from the GPU's memory pool
(``--cuda-memory-pool-byte-size``; a plain device allocation when the pool is
spent) and device-to-device copies. ``gather_tensor`` uses it to batch
device-resident inputs without a trip through host memory.

The way back: ``scatter_device_outputs`` hands each request its rows of a
batched output that lies on a GPU, in place, when the request's consumer wants
it there (``InferenceRequest.output_device``), and ``wanted_on_device`` says how
many requests of a batch do.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ._batching import Allocator, gather_inputs
from ._datatype import DataType
from ._device_array import DeviceArray
from ._errors import TritonError
from ._inference import InferenceRequest, InferenceResponse
from ._tensor import Tensor


def cuda_runtime_module() -> Any:
    """cuda-python's CUDA runtime module (``cuda.bindings.runtime``; ``cuda.cudart``
    before 12.6), for the core and backends that call CUDA themselves; None when
    cuda-python is not installed."""
    for name in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


class DeviceMemory(Protocol):
    """Buffers and copies in the memory of one server's GPUs (thread-safe)."""

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        """A new, uninitialised array on GPU ``device_id``; its memory is given back
        when the array (and every framework tensor made from it) is gone."""
        ...

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst``, both device memory of GPU
        ``device_id``; done when this returns."""
        ...


def gather_tensor(
    requests: Sequence[InferenceRequest],
    name: str,
    *,
    device_memory: DeviceMemory | None = None,
    allocator: Allocator | None = None,
) -> Tensor:
    """Input ``name`` of all ``requests`` as one tensor batched on axis 0, kept on
    the device when it can be.

    A single request's tensor is returned as it is (device-resident or not).
    When every request's tensor lies on the same GPU and ``device_memory`` is
    given (pass ``instance.device_memory``), they are copied once, device to
    device, into a buffer of it; otherwise the batch is gathered in host memory
    exactly as ``gather_inputs`` does (``allocator`` as there).
    """
    if not requests:
        raise TritonError.internal("gather_tensor called with no requests")
    try:
        tensors = [r.inputs[name] for r in requests]
    except KeyError:
        raise TritonError.invalid_arg(f"input '{name}' is missing from a request in the batch") from None
    first = tensors[0]
    if len(tensors) == 1:
        return first
    arrays = [t.device for t in tensors if t.device is not None and t.is_device]
    if device_memory is None or len(arrays) != len(tensors):
        return Tensor(name, gather_inputs(requests, name, allocator=allocator), first.datatype)
    head = arrays[0]
    if any(a.device_id != head.device_id for a in arrays):
        return Tensor(name, gather_inputs(requests, name, allocator=allocator), first.datatype)
    return Tensor.on_device(name, gather_device(name, arrays, device_memory), first.datatype)


def gather_device(name: str, arrays: Sequence[DeviceArray], memory: DeviceMemory) -> DeviceArray:
    """``arrays`` (C-contiguous, one GPU) concatenated on axis 0 into a buffer of ``memory``."""
    parts = arrays
    head = parts[0]
    tail = head.shape[1:]
    rows = 0
    for a in parts:
        if not a.shape or a.shape[1:] != tail or a.dtype != head.dtype:
            raise TritonError.internal(
                f"cannot batch input '{name}': shapes {list(head.shape)} and {list(a.shape)} "
                f"(or dtypes {head.dtype}, {a.dtype}) differ beyond the batch dimension"
            )
        rows += a.shape[0]
    out = memory.allocate(head.device_id, (rows, *tail), head.dtype)
    offset = 0
    for a in parts:
        if a.nbytes:
            memory.copy(head.device_id, out.address + offset, a.address, a.nbytes)
        offset += a.nbytes
    assert offset == out.nbytes, "the gathered buffer holds every row"
    return out


def wanted_on_device(requests: Sequence[InferenceRequest], name: str, device_id: int) -> int:
    """How many of ``requests`` want output ``name`` on GPU ``device_id``
    (``InferenceRequest.output_device``): 0, the batch's output goes to the host as
    always; ``len(requests)``, it may stay on the device for all of them; between,
    the batch is mixed."""
    return sum(1 for request in requests if request.output_device(name) == device_id)


def scatter_device(array: DeviceArray, sizes: Sequence[int]) -> list[DeviceArray]:
    """Split a batched device array along axis 0 into arrays of ``sizes`` rows each,
    in place (``DeviceArray.rows``)."""
    if len(sizes) == 1:
        return [array]
    expected = sum(sizes)
    if not array.shape or array.shape[0] != expected:
        raise TritonError.internal(
            f"batched output has shape {list(array.shape)}; expected first dimension {expected}"
        )
    parts: list[DeviceArray] = []
    start = 0
    for n in sizes:
        parts.append(array.rows(start, n))
        start += n
    return parts


def scatter_device_outputs(
    requests: Sequence[InferenceRequest],
    responses: Sequence[InferenceResponse],
    arrays: Mapping[str, DeviceArray],
    datatypes: Mapping[str, DataType],
) -> int:
    """Give each request whose consumer wants output ``name`` on the GPU where
    ``arrays[name]`` (the batch's output) lies its rows of it, in place, as a
    device tensor in its response (``responses`` in the order of ``requests``, as
    ``scatter_responses`` made them); other requests keep what their responses
    hold (their host rows, for a mixed batch). The arrays must be ready to read
    on any stream (synchronise the one that wrote them first): the core copies
    them on its own. Returns how many device tensors were handed out."""
    given = 0
    sizes = [r.batch_size for r in requests]
    for name, array in arrays.items():
        parts = scatter_device(array, sizes)
        datatype = datatypes[name]
        for request, response, part in zip(requests, responses, parts):
            if request.output_device(name) == array.device_id:
                response.outputs[name] = Tensor.on_device(name, part, datatype)
                given += 1
    return given
