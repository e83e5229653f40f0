"""Per-GPU pools of device memory (Triton's ``--cuda-memory-pool-byte-size``).

A ``DevicePool`` hands out ``DeviceBuffer``s of ``cudaMalloc`` memory of one GPU
within its budget (Triton's default, 64 MiB per GPU); a buffer returns to the
pool when it is garbage collected. ``allocate`` answers None when the budget is
spent: the caller then uses host memory (pageable), as Triton falls back.
"""

from __future__ import annotations

import functools
import weakref

from .cuda import Runtime
from .pool import Allocator, Pool

#: Triton's ``--cuda-memory-pool-byte-size`` default, for every GPU.
DEFAULT_CUDA_POOL_BYTES = 64 << 20


class DeviceBuffer:
    """``nbytes`` of device memory at ``address`` on GPU ``device``; back to its
    pool when garbage collected."""

    __slots__ = ("__weakref__", "address", "device", "nbytes")

    def __init__(self, address: int, nbytes: int, device: int) -> None:
        self.address = address
        self.nbytes = nbytes
        self.device = device

    def __repr__(self) -> str:
        return f"DeviceBuffer(address={self.address:#x}, nbytes={self.nbytes}, device={self.device})"


class DevicePool:
    """Device buffers of one GPU from a ``Pool``; thread-safe."""

    def __init__(self, allocator: Allocator, device: int, total_bytes: int = DEFAULT_CUDA_POOL_BYTES) -> None:
        self.device = device
        self.pool = Pool(allocator, total_bytes)

    @classmethod
    def on(cls, runtime: Runtime, device: int, total_bytes: int = DEFAULT_CUDA_POOL_BYTES) -> DevicePool:
        allocator = Allocator(
            functools.partial(runtime.malloc, device), functools.partial(runtime.free, device)
        )
        return cls(allocator, device, total_bytes)

    def allocate(self, nbytes: int) -> DeviceBuffer | None:
        """A buffer of at least ``nbytes`` bytes, or None (use host memory)."""
        if nbytes <= 0:
            return None
        taken = self.pool.take(nbytes)
        if taken is None:
            return None
        address, size = taken
        buffer = DeviceBuffer(address, nbytes, self.device)
        weakref.finalize(buffer, self.pool.give_back, address, size)
        return buffer

    def close(self) -> None:
        self.pool.close()
