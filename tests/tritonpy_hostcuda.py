"""Host-memory stand-ins for the CUDA runtime and for a backend's device memory, for the
tests of the memory bookkeeping that must run where there is no GPU (pools, CUDA regions,
a backend's device buffers)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonpy.memory.cuda import IPC_HANDLE_SIZE, CudaError
from tritonpy.memory.pool import host_allocator
from tritonpy_sdk import DeviceArray


class HostRuntime:
    """The ``Runtime`` protocol on host memory: "device memory" is ctypes buffers,
    and an IPC handle is 64 bytes naming one that ``export`` made."""

    def __init__(self, device_count: int = 1) -> None:
        self.device_count = device_count
        self._host = host_allocator()
        self.exported: dict[bytes, ctypes.Array[ctypes.c_char]] = {}
        self.opened: dict[int, int] = {}  # address -> device
        self.closed: list[int] = []
        self.fail_copies = False
        self.device_copies = 0
        self.malloc_count = 0
        self.free_count = 0

    def export(self, nbytes: int) -> tuple[bytes, ctypes.Array[ctypes.c_char]]:
        handle = len(self.exported).to_bytes(4, "little") + b"\x01" * (IPC_HANDLE_SIZE - 4)
        self.exported[handle] = ctypes.create_string_buffer(nbytes)
        return handle, self.exported[handle]

    def host_alloc(self, nbytes: int) -> int:
        return self._host.alloc(nbytes)

    def free_host(self, address: int) -> None:
        self._host.free(address)

    def malloc(self, device: int, nbytes: int) -> int:
        self.malloc_count += 1
        return self._host.alloc(nbytes)

    def free(self, device: int, address: int) -> None:
        self.free_count += 1
        self._host.free(address)

    def ipc_open(self, device: int, handle: bytes) -> int:
        if handle not in self.exported:
            raise CudaError("invalid argument")
        address = ctypes.addressof(self.exported[handle])
        self.opened[address] = device
        return address

    def ipc_close(self, device: int, address: int) -> None:
        assert self.opened.pop(address) == device
        self.closed.append(address)

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self._check_copy()
        ctypes.memmove(dst, src, nbytes)

    def copy_to_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self._check_copy()
        ctypes.memmove(dst, src, nbytes)

    def copy_on_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self._check_copy()
        self.device_copies += 1
        ctypes.memmove(dst, src, nbytes)

    def _check_copy(self) -> None:
        if self.fail_copies:
            raise CudaError("an illegal memory access was encountered")


class HostDeviceMemory:
    """``tritonpy_sdk.DeviceMemory`` on ctypes buffers; ``fail`` refuses every allocation."""

    def __init__(self) -> None:
        self.fail = False
        self.allocated: list[int] = []

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        if self.fail:
            raise MemoryError("the pool is exhausted")
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        buffer = ctypes.create_string_buffer(nbytes)
        self.allocated.append(nbytes)

        def to_host() -> np.ndarray[Any, Any]:
            return np.frombuffer(bytes(buffer), np.uint8).copy()

        return DeviceArray(
            ctypes.addressof(buffer), shape, dtype, device_id=device_id, owner=buffer, to_host=to_host
        )

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)
