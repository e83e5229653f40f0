"""A pool of pinned host buffers, for batches gathered on their way to a GPU.

Copies from pinned memory to a device run at full PCIe speed and can be
asynchronous; pageable memory is staged by the driver first. ``cudaHostAlloc``
is slow (it locks pages), so buffers are pooled by size class and reused: an
array handed out returns its buffer to the pool when it is garbage collected.
The CUDA runtime is reached with ctypes (``libcudart.so.12``, from the driver's
toolkit or the ``nvidia-cuda-runtime-cu12`` wheel); without it there is no pool
and callers fall back to ordinary memory.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib
import logging
import os
import threading
import weakref
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


@functools.cache
def cuda_runtime() -> ctypes.CDLL | None:
    """libcudart, if it can be loaded and sees a device; else None."""
    candidates = ["libcudart.so.12", "libcudart.so"]
    try:  # the nvidia-cuda-runtime-cu12 wheel's copy
        runtime = importlib.import_module("nvidia.cuda_runtime")
        for root in runtime.__path__:
            candidates += glob.glob(os.path.join(root, "lib", "libcudart.so*"))
    except ImportError:
        pass
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0:
            return lib
    return None


class PinnedPool:
    """Pinned buffers by power-of-two size class; thread-safe.

    ``allocate(shape, dtype)`` has the signature ``tritonpy_sdk.gather_inputs``
    expects of an allocator.
    """

    def __init__(self, lib: ctypes.CDLL, max_bytes: int = 256 << 20) -> None:
        self._lib = lib
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        self._held = 0
        self.max_bytes = max_bytes  # like --pinned-memory-pool-byte-size

    @classmethod
    def create(cls) -> PinnedPool | None:
        lib = cuda_runtime()
        return cls(lib) if lib is not None else None

    def _take(self, size_class: int) -> int | None:
        with self._lock:
            free = self._free.get(size_class)
            if free:
                return free.pop()
            if self._held + size_class > self.max_bytes:
                return None
            self._held += size_class
        ptr = ctypes.c_void_p()
        if self._lib.cudaHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(size_class), 0) != 0 or not ptr.value:
            with self._lock:
                self._held -= size_class
            return None
        return int(ptr.value)

    def _give_back(self, size_class: int, address: int) -> None:
        with self._lock:
            self._free.setdefault(size_class, []).append(address)

    def allocate(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
        """An array in pinned memory (ordinary memory when the pool is exhausted)."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if dt.hasobject or nbytes == 0:
            return np.empty(shape, dt)
        size_class = 1 << max(12, (nbytes - 1).bit_length())
        address = self._take(size_class)
        if address is None:
            return np.empty(shape, dt)
        buffer = (ctypes.c_byte * nbytes).from_address(address)
        array = np.frombuffer(buffer, dtype=dt, count=nbytes // dt.itemsize).reshape(shape)
        weakref.finalize(buffer, self._give_back, size_class, address)
        return array

    def close(self) -> None:
        with self._lock:
            for addresses in self._free.values():
                for address in addresses:
                    self._lib.cudaFreeHost(ctypes.c_void_p(address))
            self._free.clear()
