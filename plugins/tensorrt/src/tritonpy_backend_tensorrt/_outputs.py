"""Outputs whose shape depends on the data (TensorRT's ``IOutputAllocator``).

An output such as a ``NonZero`` result has no shape until the engine has run:
``get_tensor_shape`` still holds a -1 once every input shape is set. As
Triton's TensorRT backend does, such an output gets an output allocator
instead of a buffer bound in advance: TensorRT asks it for memory of the size
it needs (``reallocate_output_async``) and tells it the shape
(``notify_shape``) before ``execute_async_v3`` returns. The memory comes from
the instance's device memory (the core's pool on its GPU), a new buffer for
each execution: the buffer leaves with the output (to the host copy, or to
the consumer that takes it on the GPU), so nothing is reused while read.

TensorRT calls these methods from C++, where an exception cannot pass: each
catches everything, keeps the first error for ``take`` to raise, and answers null
memory, which makes TensorRT fail the execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonpy_sdk import DeviceArray, DeviceMemory, TritonError


@dataclass(eq=False)
class _Buffer:
    """The memory given for one output: ``buffer`` holds at least ``size`` bytes from
    ``address`` (aligned as TensorRT asked)."""

    buffer: DeviceArray
    address: int
    size: int


class OutputBuffers:
    """The allocations and shapes TensorRT reported for one instance's data-dependent
    outputs, execution by execution; the ``tensorrt.IOutputAllocator`` of ``allocator``
    passes TensorRT's calls here."""

    def __init__(self, memory: DeviceMemory, device: int) -> None:
        self.memory = memory
        self.device = device
        self.buffers: dict[str, _Buffer] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.errors: dict[str, str] = {}

    def reallocate(self, name: str, size: int, alignment: int) -> int:
        """The address of ``size`` bytes for output ``name`` aligned to ``alignment``
        (0, so that TensorRT fails the execution, when none can be had)."""
        try:
            alignment = max(int(alignment), 1)
            size = max(int(size), 1)
            current = self.buffers.get(name)
            if current is not None and current.size >= size:
                return current.address
            buffer = self.memory.allocate(self.device, (size + alignment - 1,), np.uint8)
            address = -(-buffer.address // alignment) * alignment
            self.buffers[name] = _Buffer(buffer, address, size)
            return address
        except BaseException as exc:  # never into TensorRT's C++ caller
            self.errors.setdefault(name, f"failed to allocate {size} bytes on GPU {self.device}: {exc}")
            return 0

    def notify(self, name: str, shape: Any) -> None:
        try:
            self.shapes[name] = tuple(int(d) for d in shape)
        except BaseException as exc:
            self.errors.setdefault(name, f"unreadable shape from TensorRT: {exc}")

    def take(self, name: str, dtype: Any, where: str) -> DeviceArray:
        """Output ``name`` of the execution just enqueued, as a device array of its
        reported shape that owns its buffer (which this object forgets)."""
        error = self.errors.pop(name, None)
        given = self.buffers.pop(name, None)
        shape = self.shapes.pop(name, None)
        if error is not None:
            raise TritonError.internal(f"output '{name}' of {where}: {error}")
        if given is None or shape is None or any(d < 0 for d in shape):
            raise TritonError.internal(
                f"TensorRT gave no memory or no shape for the data-dependent output '{name}' of {where}"
            )
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes > given.size:
            raise TritonError.internal(
                f"TensorRT wrote {nbytes} bytes of output '{name}' of {where} into {given.size}"
            )
        buffer, offset = given.buffer, given.address - given.buffer.address

        def to_host() -> np.ndarray[Any, Any]:
            raw = buffer.to_host()
            array: np.ndarray[Any, Any] = raw[offset : offset + nbytes].view(dt).reshape(shape)
            return array

        return DeviceArray(given.address, shape, dt, device_id=self.device, owner=buffer, to_host=to_host)

    def clear(self) -> None:
        """Forget what a failed execution left."""
        self.buffers.clear()
        self.shapes.clear()
        self.errors.clear()


def allocator(trt: Any, buffers: OutputBuffers) -> Any:
    """A ``tensorrt.IOutputAllocator`` passing TensorRT's calls to ``buffers``."""

    class OutputAllocator(trt.IOutputAllocator):  # type: ignore[misc]  # TensorRT's pybind11 base class
        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            return buffers.reallocate(tensor_name, size, alignment)

        def reallocate_output_async(
            self, tensor_name: str, memory: int, size: int, alignment: int, stream: int
        ) -> int:
            return buffers.reallocate(tensor_name, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            buffers.notify(tensor_name, shape)

    return OutputAllocator()
