"""The few CUDA runtime calls that GPU tensors crossing between server and stub need.

Through cuda-python (``cuda.bindings.runtime``; ``cuda.cudart`` before 12.6),
loaded lazily and at most once per process: the stub imports it only when a GPU
tensor first crosses, never for its own plumbing, and without torch. Without a
CUDA driver, a GPU or cuda-python, ``load()`` answers None and every tensor
crosses as host data, as before.

Every call restores the calling thread's current device afterwards: the stub
makes these calls on the thread that runs ``model.py``, whose torch code relies
on that device.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("tritonpy.backend.python")

#: Bytes in a ``cudaIpcMemHandle_t`` (``CUDA_IPC_HANDLE_SIZE``).
IPC_HANDLE_SIZE = 64


class CudaError(RuntimeError):
    """A CUDA runtime call failed; the message is the runtime's."""


def _driver_gpus() -> int:
    """GPUs the driver reports (0 without a driver): asked before cuda-python is imported."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except (OSError, AttributeError):
        return 0
    return int(count.value)


class Cuda:
    """cuda-python's runtime, for device buffers, IPC handles and copies."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt

    def _check(self, result: Any) -> Any:
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            _, text = self._rt.cudaGetErrorString(err)
            raise CudaError(text.decode() if isinstance(text, bytes) else str(text))
        return values[0] if len(values) == 1 else None

    @contextmanager
    def _on(self, device: int) -> Iterator[None]:
        current = int(self._check(self._rt.cudaGetDevice()))
        if current != device:
            self._check(self._rt.cudaSetDevice(device))
        try:
            yield
        finally:
            if current != device:
                self._rt.cudaSetDevice(current)

    def malloc(self, device: int, nbytes: int) -> int:
        with self._on(device):
            return int(self._check(self._rt.cudaMalloc(nbytes)))

    def free(self, device: int, address: int) -> None:
        with self._on(device):
            self._check(self._rt.cudaFree(address))

    def ipc_handle(self, device: int, address: int) -> bytes:
        """The IPC handle of the allocation that starts at ``address`` (a ``malloc``)."""
        with self._on(device):
            handle = self._check(self._rt.cudaIpcGetMemHandle(address))
        return ctypes.string_at(handle.getPtr(), IPC_HANDLE_SIZE)

    def ipc_open(self, device: int, handle: bytes) -> int:
        if len(handle) != IPC_HANDLE_SIZE:
            raise CudaError(f"a cudaIpcMemHandle_t is {IPC_HANDLE_SIZE} bytes, got {len(handle)}")
        ipc = self._rt.cudaIpcMemHandle_t()
        ctypes.memmove(ipc.getPtr(), handle, IPC_HANDLE_SIZE)
        with self._on(device):
            flags = self._rt.cudaIpcMemLazyEnablePeerAccess
            return int(self._check(self._rt.cudaIpcOpenMemHandle(ipc, flags)))

    def ipc_close(self, device: int, address: int) -> None:
        with self._on(device):
            self._check(self._rt.cudaIpcCloseMemHandle(address))

    def copy(self, device: int, dst: int, src: int, nbytes: int, wait_device: bool = True) -> None:
        """Device to device, finished when this returns: with ``wait_device``, first
        everything queued on the device (a model's kernels, on any stream: the stub's
        outputs), then the copy itself (a device-to-device ``cudaMemcpy`` does not
        wait for its end on its own): the legacy default stream it ran on is waited
        for, not the whole device (the server's other models keep their streams)."""
        with self._on(device):
            if wait_device:
                self._check(self._rt.cudaDeviceSynchronize())
            kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
            self._check(self._rt.cudaMemcpy(dst, src, nbytes, kind))
            self._check(self._rt.cudaStreamSynchronize(0))

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        with self._on(device):
            kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
            self._check(self._rt.cudaMemcpy(dst, src, nbytes, kind))


@functools.cache
def load() -> Cuda | None:
    """The CUDA runtime when there is a GPU and cuda-python; else None (probed once)."""
    if _driver_gpus() == 0:
        return None
    for name in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            rt = importlib.import_module(name)
            break
        except ImportError:
            continue
    else:
        log.debug("cuda-python is not installed: GPU tensors cross as host data")
        return None
    try:
        err, count = rt.cudaGetDeviceCount()
    except Exception as exc:  # a broken install means "no CUDA"
        log.debug("cuda-python cannot reach the driver: %s", exc)
        return None
    if int(err) != 0 or not count:
        return None
    return Cuda(rt)
