"""The device memory that GPU instances get (``ModelInstance.device_memory``):
``tritonpy_sdk.DeviceMemory`` on the server's per-GPU pools.

A batch of device-resident inputs is gathered into a buffer of the GPU's pool
(``--cuda-memory-pool-byte-size``); when the pool is spent (or disabled with 0
bytes) the buffer is a plain ``cudaMalloc``, freed when it goes, and counted in
``fallbacks``. Either way the memory returns when the gathered array and every
framework tensor made from it are gone: when the request's execution is over.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tritonpy_sdk import DeviceArray, TritonError

from .cuda import CudaError, Runtime
from .device_pool import DeviceBuffer, DevicePool


class PooledDeviceMemory:
    """Device arrays from ``pools`` (by GPU), plain allocations of ``runtime``
    past them, and device-to-device copies; thread-safe."""

    def __init__(self, runtime: Runtime, pools: Mapping[int, DevicePool]) -> None:
        self._runtime = runtime
        self._pools = pools
        self._lock = threading.Lock()
        #: Buffers allocated outside a pool because it could not give one.
        self.fallbacks = 0

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        dt = np.dtype(dtype)
        dims = tuple(int(d) for d in shape)
        nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
        if nbytes == 0:
            return DeviceArray(0, dims, dt, device_id=device_id, to_host=lambda: np.empty(dims, dt))
        pool = self._pools.get(device_id)
        buffer = pool.allocate(nbytes) if pool is not None else None
        if buffer is None:
            buffer = self._plain(device_id, nbytes)
        runtime = self._runtime

        def to_host() -> np.ndarray[Any, Any]:
            out = np.empty(dims, dt)
            runtime.copy_to_host(device_id, out.ctypes.data, buffer.address, nbytes)
            return out

        return DeviceArray(buffer.address, dims, dt, device_id=device_id, owner=buffer, to_host=to_host)

    def _plain(self, device_id: int, nbytes: int) -> DeviceBuffer:
        try:
            address = self._runtime.malloc(device_id, nbytes)
        except CudaError as exc:
            message = f"failed to allocate {nbytes} bytes on GPU {device_id}: {exc}"
            raise TritonError.internal(message) from None
        with self._lock:
            self.fallbacks += 1
        buffer = DeviceBuffer(address, nbytes, device_id)
        weakref.finalize(buffer, self._runtime.free, device_id, address)
        return buffer

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        try:
            self._runtime.copy_on_device(device_id, dst, src, nbytes)
        except CudaError as exc:
            raise TritonError.internal(f"failed to copy on GPU {device_id}: {exc}") from None
