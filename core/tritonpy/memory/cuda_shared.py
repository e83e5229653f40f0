"""CUDA shared-memory regions: device memory another process exported with
``cudaIpcGetMemHandle`` (as ``tritonclient.utils.cuda_shared_memory`` does).

Registration opens the handle on its GPU once (``cudaIpcOpenMemHandle``). An
input of a fixed-size type read from a region is a ``DeviceArray`` over the
region's memory, no copy: an instance that accepts device inputs on that GPU
uses it in place, any other gets it copied to host memory once (BYTES are always
copied and parsed as usual). An output is copied into the region: device to
device when the backend's result is on the region's GPU, else host to device.
Lifetime is that of system shared memory: unregistering forgets the name at
once, and the handle is closed (``cudaIpcCloseMemHandle``) when the last slice
of it that a running request (or a device view of it) holds is gone.
"""

from __future__ import annotations

import gc
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import DeviceArray, TritonError

from .cuda import CudaError, Runtime
from .region import check_bounds

log = logging.getLogger(__name__)

#: What Triton 2.51 answers when a CUDA region cannot be registered (no GPU, a
#: bad handle or device): an invalid-argument error (HTTP 400) in these words.
REGISTER_FAILED = "failed to register shared memory region: invalid args"


class IpcMapping:
    """An opened IPC handle; closed when the last reference to it goes."""

    __slots__ = ("__weakref__", "address", "device")

    def __init__(self, runtime: Runtime, device: int, handle: bytes) -> None:
        self.device = device
        self.address = runtime.ipc_open(device, handle)
        weakref.finalize(self, _close, runtime, device, self.address)


def _close(runtime: Runtime, device: int, address: int) -> None:
    try:
        runtime.ipc_close(device, address)
    except Exception as exc:  # a finalizer must not raise; the driver reclaims it at exit
        log.warning("could not close a CUDA IPC handle on GPU %d: %s", device, exc)


@dataclass(slots=True)
class DeviceSpan:
    """``nbytes`` of a region's device memory at ``address``; holds the mapping open."""

    mapping: IpcMapping = field(repr=False)
    address: int
    nbytes: int

    def __len__(self) -> int:
        return self.nbytes

    def to_host(self, runtime: Runtime) -> bytearray:
        """The span's bytes, copied to host memory."""
        out = bytearray(self.nbytes)
        if self.nbytes:
            try:
                runtime.copy_to_host(self.mapping.device, _address_of(out), self.address, self.nbytes)
            except CudaError as exc:
                raise TritonError.internal(f"failed to copy from CUDA shared memory: {exc}") from None
        return out

    def device_array(self, runtime: Runtime, shape: list[int], dtype: np.dtype[Any]) -> DeviceArray:
        """The span as an array of ``shape`` and ``dtype`` in place (its size checked
        by the caller); it keeps the mapping open, and copies to the host on demand."""

        def to_host() -> np.ndarray[Any, Any]:
            return np.frombuffer(self.to_host(runtime), dtype=dtype).reshape(shape)

        return DeviceArray(
            self.address, shape, dtype, device_id=self.mapping.device, owner=self, to_host=to_host
        )

    def copy_from_device(self, runtime: Runtime, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` (at most ``nbytes`` of the span) from device memory ``src``
        of the span's GPU to the start of the span."""
        if nbytes:
            try:
                runtime.copy_on_device(self.mapping.device, self.address, src, nbytes)
            except CudaError as exc:
                raise TritonError.internal(f"failed to copy into CUDA shared memory: {exc}") from None

    def write(self, runtime: Runtime, data: memoryview) -> None:
        """Copy ``data`` (host memory, at most ``nbytes``) to the start of the span."""
        size = data.nbytes
        if size:
            host = data if data.c_contiguous else memoryview(data.tobytes())
            try:
                runtime.copy_to_device(self.mapping.device, self.address, _address_of(host), size)
            except CudaError as exc:
                raise TritonError.internal(f"failed to copy into CUDA shared memory: {exc}") from None


@dataclass(slots=True)
class CudaRegion:
    """One registered CUDA region of ``byte_size`` bytes on GPU ``device_id``."""

    name: str
    device_id: int
    byte_size: int
    mapping: IpcMapping = field(repr=False)
    #: The ``cudaIpcMemHandle_t`` it was opened from (another process opens it again).
    handle: bytes = field(default=b"", repr=False)

    def status(self) -> dict[str, Any]:
        """The region as Triton's CUDA status endpoint lists it."""
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def slice(self, offset: int, byte_size: int) -> DeviceSpan:
        check_bounds(self.name, self.byte_size, offset, byte_size)
        return DeviceSpan(self.mapping, self.mapping.address + offset, byte_size)


def open_region(
    runtime: Runtime | None, name: str, handle: bytes, device_id: int, byte_size: int
) -> CudaRegion:
    """Open ``handle`` on GPU ``device_id`` as region ``name`` (Triton's error when it cannot be)."""
    if runtime is None:
        log.error("failed to open CUDA IPC handle: no CUDA runtime (a GPU and tritonpy[cuda] are needed)")
        raise TritonError.invalid_arg(REGISTER_FAILED)
    if not 0 <= device_id < runtime.device_count:
        log.error("failed to open CUDA IPC handle: no GPU %d", device_id)
        raise TritonError.invalid_arg(REGISTER_FAILED)
    try:
        mapping = _open_mapping(runtime, device_id, handle)
    except Exception as exc:  # the runtime's error, logged as Triton logs it
        log.error("failed to open CUDA IPC handle: %s", exc)
        raise TritonError.invalid_arg(REGISTER_FAILED) from None
    return CudaRegion(name, device_id, byte_size, mapping, bytes(handle))


def _open_mapping(runtime: Runtime, device_id: int, handle: bytes) -> IpcMapping:
    """Open ``handle``. A client that freed a region and allocated a new one may get the
    same device memory back; while this process still maps the old one (an unregistered
    region's last views wait for the garbage collector), the driver refuses the new
    handle as "already mapped": collect them and try once more."""
    try:
        return IpcMapping(runtime, device_id, handle)
    except Exception as exc:
        if "already mapped" not in str(exc):
            raise
    gc.collect()
    return IpcMapping(runtime, device_id, handle)


def _address_of(buffer: bytearray | memoryview) -> int:
    """Where a (contiguous, possibly read-only) host buffer's bytes start."""
    return int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data)
