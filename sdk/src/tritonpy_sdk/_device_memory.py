"""Device memory that the core lends a backend, and batching on the device.

``DeviceMemory`` is what the core sets as ``ModelInstance.device_memory`` on a
GPU instance when it has a CUDA runtime: buffers from the GPU's memory pool
(``--cuda-memory-pool-byte-size``; a plain device allocation when the pool is
spent) and device-to-device copies. ``gather_tensor`` uses it to batch
device-resident inputs without a trip through host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ._batching import Allocator, gather_inputs
from ._device_array import DeviceArray
from ._errors import TritonError
from ._inference import InferenceRequest
from ._tensor import Tensor


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
