"""The CUDA runtime, reached through cuda-python (``pip install tritonpy[cuda]``).

Optional and lazy: nothing here is imported until a server starts, and only when
the driver reports a GPU (``devices.gpu_count``, which needs no Python package).
Without cuda-python, or without a driver or GPU, ``load_runtime`` answers None
and the server keeps everything in host memory.

``Runtime`` is the few calls the memory code needs, as a protocol, so the pool
and region bookkeeping above it can be exercised with host memory where there is
no GPU (the tests do).
"""

from __future__ import annotations

import ctypes
import functools
import logging
from typing import Any, Protocol

from tritonpy_sdk import cuda_runtime_module

from ..devices import gpu_count

log = logging.getLogger(__name__)

#: Bytes in a ``cudaIpcMemHandle_t`` (``CUDA_IPC_HANDLE_SIZE``).
IPC_HANDLE_SIZE = 64


class CudaError(RuntimeError):
    """A CUDA runtime call failed; the message is the runtime's."""


class Runtime(Protocol):
    """What the memory code asks of a CUDA runtime. Addresses are integers."""

    device_count: int

    def host_alloc(self, nbytes: int) -> int: ...
    def free_host(self, address: int) -> None: ...
    def malloc(self, device: int, nbytes: int) -> int: ...
    def free(self, device: int, address: int) -> None: ...
    def ipc_open(self, device: int, handle: bytes) -> int: ...
    def ipc_close(self, device: int, address: int) -> None: ...
    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None: ...
    def copy_to_device(self, device: int, dst: int, src: int, nbytes: int) -> None: ...
    def copy_on_device(self, device: int, dst: int, src: int, nbytes: int) -> None: ...


class CudaRuntime:
    """``Runtime`` on cuda-python's ``cudart`` bindings."""

    def __init__(self, rt: Any, device_count: int) -> None:
        self._rt = rt
        self.device_count = device_count

    def _check(self, result: Any) -> Any:
        """The value of a cuda-python call ``(err, *values)``, or CudaError."""
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            _, text = self._rt.cudaGetErrorString(err)
            raise CudaError(text.decode() if isinstance(text, bytes) else str(text))
        return values[0] if len(values) == 1 else None

    def _on(self, device: int) -> None:
        self._check(self._rt.cudaSetDevice(device))

    def host_alloc(self, nbytes: int) -> int:
        return int(self._check(self._rt.cudaHostAlloc(nbytes, self._rt.cudaHostAllocPortable)))

    def free_host(self, address: int) -> None:
        self._check(self._rt.cudaFreeHost(address))

    def malloc(self, device: int, nbytes: int) -> int:
        self._on(device)
        return int(self._check(self._rt.cudaMalloc(nbytes)))

    def free(self, device: int, address: int) -> None:
        self._on(device)
        self._check(self._rt.cudaFree(address))

    def ipc_open(self, device: int, handle: bytes) -> int:
        if len(handle) != IPC_HANDLE_SIZE:
            raise CudaError(f"a cudaIpcMemHandle_t is {IPC_HANDLE_SIZE} bytes, got {len(handle)}")
        self._on(device)
        ipc = self._rt.cudaIpcMemHandle_t()
        ctypes.memmove(ipc.getPtr(), handle, IPC_HANDLE_SIZE)
        return int(self._check(self._rt.cudaIpcOpenMemHandle(ipc, self._rt.cudaIpcMemLazyEnablePeerAccess)))

    def ipc_close(self, device: int, address: int) -> None:
        self._on(device)
        self._check(self._rt.cudaIpcCloseMemHandle(address))

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self._on(device)
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(self._rt.cudaMemcpy(dst, src, nbytes, kind))

    def copy_to_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        """Host to device, done when this returns (see ``_copied``)."""
        self._on(device)
        kind = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._check(self._rt.cudaMemcpy(dst, src, nbytes, kind))
        self._copied()

    def copy_on_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        """Device to device (``src`` may be another GPU's memory: unified addressing), done
        when this returns (see ``_copied``)."""
        self._on(device)
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        self._check(self._rt.cudaMemcpy(dst, src, nbytes, kind))
        self._copied()

    def _copied(self) -> None:
        """Wait for the copy just queued on the legacy default stream. ``cudaMemcpy`` into
        device memory may return before the data is there (device to device it does not wait
        at all; from pageable host memory it returns once the driver has staged the source),
        and what reads it next may be another process (a client's CUDA shared-memory region)
        or another stream, which nothing orders after this one."""
        self._check(self._rt.cudaStreamSynchronize(0))


@functools.cache
def load_runtime() -> CudaRuntime | None:
    """The CUDA runtime when cuda-python is installed and sees a GPU; else None.

    Probed once per process (the answer cannot change while it runs). The driver
    is asked first, so a host without one never imports cuda-python.
    """
    if gpu_count() == 0:
        log.debug("no CUDA driver or GPU: host memory only")
        return None
    rt = cuda_runtime_module()
    if rt is None:
        log.debug("cuda-python is not installed (pip install tritonpy[cuda]): host memory only")
        return None
    try:
        err, count = rt.cudaGetDeviceCount()
    except Exception as exc:  # a broken install: any failure means "no CUDA"
        log.debug("cuda-python cannot reach the driver: %s", exc)
        return None
    if int(err) != 0 or not count:
        log.debug("cuda-python sees no GPU (%s)", err)
        return None
    return CudaRuntime(rt, int(count))
