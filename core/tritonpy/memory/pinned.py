"""Pinned (page-locked) host arrays, for batches gathered on their way to a GPU.

Copies from pinned memory to a device run at full PCIe speed and can be
asynchronous; pageable memory is staged by the driver first. Buffers come from a
``Pool`` of ``cudaHostAlloc`` memory of ``--pinned-memory-pool-byte-size``
bytes (Triton's default, 256 MiB); an array handed out returns its buffer to the
pool when it is garbage collected. When the pool is exhausted, or there is no
CUDA runtime, arrays are ordinary pageable memory.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from .cuda import Runtime, load_runtime
from .pool import Allocator, Pool

#: Triton's ``--pinned-memory-pool-byte-size`` default.
DEFAULT_PINNED_POOL_BYTES = 256 << 20


class PinnedPool:
    """Arrays in pooled pinned memory; thread-safe.

    ``allocate(shape, dtype)`` has the signature ``tritonpy_sdk.gather_inputs``
    expects of an allocator. ``enabled`` is false without a CUDA runtime (or with
    a pool of 0 bytes): then every array is pageable and the pool only reports
    its configured size, as Triton's metrics do on a host without a GPU.
    """

    def __init__(self, allocator: Allocator | None, total_bytes: int = DEFAULT_PINNED_POOL_BYTES) -> None:
        self.pool = Pool(allocator or Allocator(_no_alloc, _no_free), total_bytes)
        self.enabled = allocator is not None and total_bytes > 0

    @classmethod
    def on(cls, runtime: Runtime | None, total_bytes: int = DEFAULT_PINNED_POOL_BYTES) -> PinnedPool:
        """A pool of ``cudaHostAlloc`` memory from ``runtime`` (pageable when None)."""
        if runtime is None:
            return cls(None, total_bytes)
        return cls(Allocator(runtime.host_alloc, runtime.free_host), total_bytes)

    @classmethod
    def create(cls, total_bytes: int = DEFAULT_PINNED_POOL_BYTES) -> PinnedPool | None:
        """A pool on this host's CUDA runtime; None without one."""
        runtime = load_runtime()
        return cls.on(runtime, total_bytes) if runtime is not None else None

    @property
    def total_bytes(self) -> int:
        return self.pool.total_bytes

    @property
    def used_bytes(self) -> int:
        return self.pool.used_bytes

    def allocate(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
        """An array in pinned memory (pageable when the pool cannot give one)."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if not self.enabled or dt.hasobject or nbytes == 0:
            return np.empty(shape, dt)
        taken = self.pool.take(nbytes)
        if taken is None:
            return np.empty(shape, dt)
        address, size = taken
        buffer = (ctypes.c_byte * nbytes).from_address(address)
        array = np.frombuffer(buffer, dtype=dt, count=nbytes // dt.itemsize).reshape(shape)
        weakref.finalize(buffer, self.pool.give_back, address, size)
        return array

    def close(self) -> None:
        self.pool.close()


def _no_alloc(nbytes: int) -> int:
    return 0


def _no_free(address: int) -> None:
    pass
