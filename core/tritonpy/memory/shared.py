"""The shared-memory regions that clients register by name: system (CPU)
shared memory, and CUDA regions (``cuda_shared.py``) when the server has a GPU.

A client creates a POSIX shared-memory object (``shm_open``, as
``tritonclient.utils.shared_memory`` does), registers ``(name, key, offset,
byte_size)``, and then names the region in an input's or output's
``shared_memory_region`` parameter instead of sending the data. The region is
mapped once, at registration.

Lifetime: an input read from a region is a numpy view of the map, and an output
slot is a memoryview of it. Unregistering removes the name at once, but the map
stays alive while any such view does (Python's buffer protocol keeps the
``mmap`` open while views of it exist), so requests that are still running
finish on the memory they started with; the map is closed when the last view
goes.

System and CUDA regions share one namespace, as in Triton: a name registered
as one kind cannot be registered as the other.

Messages and status codes are Triton 2.51's.
"""

from __future__ import annotations

import mmap
import os
import stat
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import DataType, ErrorCode, Tensor, TritonError

from ..codec import ByteSizeMismatch, array_from_buffer, array_to_buffer, element_count, stand_in
from .cuda import Runtime
from .cuda_shared import CudaRegion, DeviceSpan, open_region
from .region import check_bounds

#: Where Linux keeps POSIX shared-memory objects (``shm_open(key)`` opens ``/dev/shm/key``).
SHM_DIR = "/dev/shm"

#: The tensor parameters of the shared-memory extensions.
REGION = "shared_memory_region"
OFFSET = "shared_memory_offset"
BYTE_SIZE = "shared_memory_byte_size"
SHARED_MEMORY_KEYS = (REGION, OFFSET, BYTE_SIZE)

#: Triton's answer (UNSUPPORTED: HTTP 501, gRPC UNIMPLEMENTED) to a client's register or
#: unregister while the server runs without ``--allow-client-shm=true``.
CLIENT_SHM_DISABLED = (
    "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
)


def check_client_shm(allowed: bool) -> None:
    """Refuse a client's register or unregister (system or CUDA) unless ``allowed``
    (``--allow-client-shm``); status stays open, as in Triton."""
    if not allowed:
        raise TritonError.unsupported(CLIENT_SHM_DISABLED)


#: Types read from a CUDA region into host memory always: BYTES must be parsed,
#: and DLPack has no code for BF16 that every consumer reads.
HOST_ONLY = frozenset({DataType.BYTES, DataType.BF16})


@dataclass(slots=True)
class Region:
    """One registered region: ``byte_size`` bytes of object ``key`` from ``offset``."""

    name: str
    key: str
    offset: int
    byte_size: int
    view: memoryview = field(repr=False)

    def status(self) -> dict[str, Any]:
        """The region as Triton's status endpoint lists it."""
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}

    def slice(self, offset: int, byte_size: int) -> memoryview:
        """``byte_size`` bytes at ``offset`` into the region, bounds checked."""
        check_bounds(self.name, self.byte_size, offset, byte_size)
        return self.view[offset : offset + byte_size]


@dataclass(slots=True)
class OutputSlot:
    """Where a requested output goes: ``view`` (a slice of a system region, or of
    a CUDA region's device memory with the ``runtime`` that copies to it), which
    the output's data must fit."""

    output: str
    view: memoryview | DeviceSpan
    runtime: Runtime | None = None

    @property
    def device_id(self) -> int | None:
        """The GPU of the slot's CUDA region, where the output is best produced
        (``RequestedOutput.device_id``); None for a system region."""
        view = self.view
        return view.mapping.device if isinstance(view, DeviceSpan) else None

    def write(self, data: np.ndarray[Any, Any], datatype: DataType) -> None:
        """Copy the output into the slot (Triton's error if it does not fit)."""
        buf = array_to_buffer(data, datatype)
        size = len(buf)
        if size > len(self.view):
            raise TritonError.internal(
                f"shared memory size specified with the request for output '{self.output}' "
                f"({len(self.view)} bytes) should be at least {size} bytes to hold the results"
            )
        if isinstance(self.view, memoryview):
            self.view[:size] = buf
        elif self.runtime is not None:
            self.view.write(self.runtime, memoryview(buf).cast("B"))

    def write_tensor(self, tensor: Tensor) -> None:
        """Copy output ``tensor`` into the slot: device to device when it lies on the
        GPU of the slot's CUDA region, else from its host data (copied there first)."""
        device = tensor.device
        view = self.view
        if (
            device is None
            or not tensor.is_device
            or not isinstance(view, DeviceSpan)
            or self.runtime is None
            or device.device_id != view.mapping.device
        ):
            self.write(tensor.data, tensor.datatype)
            return
        if device.nbytes > len(view):
            raise TritonError.internal(
                f"shared memory size specified with the request for output '{self.output}' "
                f"({len(view)} bytes) should be at least {device.nbytes} bytes to hold the results"
            )
        view.copy_from_device(self.runtime, device.address, device.nbytes)


def _int_param(params: Any, key: str) -> int:
    value = params.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        # Triton's words; Triton answers 500 here, a client's mistake is a 400.
        raise TritonError.invalid_arg(
            f"Unable to parse '{key}': attempt to access JSON non-unsigned-integer as unsigned-integer"
        )
    return value


#: The start of the names Triton's Python backend gives its own shared memory; a
#: client's region may not name one (Triton refuses it since 2.61).
RESERVED_KEY_PREFIX = "triton_python_backend_shm_region_"


def check_key(name: str, key: str) -> None:
    """Refuse a key that is only slashes (or empty), or whose name starts with the
    reserved prefix, in Triton's words (INVALID_ARG)."""
    bare = key.lstrip("/")
    if not bare:
        raise TritonError.invalid_arg(
            f"cannot register shared memory region '{name}' - invalid shm key '{key}'"
        )
    if bare.startswith(RESERVED_KEY_PREFIX):
        raise TritonError.invalid_arg(
            f"cannot register shared memory region '{name}' with key '{key}' as the key contains "
            f"the reserved prefix '{RESERVED_KEY_PREFIX}'"
        )


class SystemSharedMemory:
    """The registered regions of one server, system and CUDA (thread-safe).

    CUDA regions need ``runtime`` (a GPU and cuda-python); without one, registering
    a CUDA region answers Triton's error and the CUDA status lists none.
    """

    def __init__(self, runtime: Runtime | None = None) -> None:
        self._regions: dict[str, Region | CudaRegion] = {}
        self._lock = threading.Lock()
        self.runtime = runtime

    def _check_new(self, name: str) -> None:
        if name in self._regions:
            raise TritonError(f"shared memory region '{name}' already in manager", ErrorCode.ALREADY_EXISTS)

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``byte_size`` bytes of shared-memory object ``key`` from ``offset`` as ``name``."""
        check_key(name, key)
        with self._lock:
            self._check_new(name)
            if any(isinstance(r, Region) and r.key == key for r in self._regions.values()):
                # Triton 2.51 refuses a second name for a key that is registered (its DLIS-6448).
                raise TritonError.internal(f"Invalid shared memory region: '{key}'")
            self._regions[name] = Region(name, key, offset, byte_size, _map(name, key, offset, byte_size))

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Open the ``cudaIpcMemHandle_t`` ``raw_handle`` of GPU ``device_id`` as ``name``."""
        with self._lock:
            self._check_new(name)
            self._regions[name] = open_region(self.runtime, name, raw_handle, device_id, byte_size)

    def _unregister(self, kind: type[Region] | type[CudaRegion], name: str | None) -> None:
        with self._lock:
            if name is None:
                gone = [r for r in self._regions.values() if isinstance(r, kind)]
            else:
                region = self._regions.get(name)
                gone = [region] if isinstance(region, kind) else []
            for region in gone:
                del self._regions[region.name]
        for region in gone:
            if isinstance(region, Region):
                _release(region.view)

    def unregister(self, name: str | None = None) -> None:
        """Forget system region ``name`` (every one when None); unknown names are no error, as in Triton."""
        self._unregister(Region, name)

    def unregister_cuda(self, name: str | None = None) -> None:
        """Forget CUDA region ``name`` (every one when None). Its handle closes when
        the requests that use it are done."""
        self._unregister(CudaRegion, name)

    def _status(
        self, kind: type[Region] | type[CudaRegion], what: str, name: str | None
    ) -> list[dict[str, Any]]:
        with self._lock:
            if name is None:
                return [r.status() for r in self._regions.values() if isinstance(r, kind)]
            region = self._regions.get(name)
        if not isinstance(region, kind):
            raise TritonError.not_found(f"Unable to find {what} shared memory region: '{name}'")
        return [region.status()]

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every system region (or ``name`` alone) as Triton lists them."""
        return self._status(Region, "system", name)

    def cuda_status(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every CUDA region (or ``name`` alone) as Triton lists them."""
        return self._status(CudaRegion, "cuda", name)

    def region(self, name: str) -> Region | CudaRegion:
        region = self._regions.get(name)
        if region is None:
            raise TritonError.not_found(f"Unable to find shared memory region: '{name}'")
        return region

    def describe(self, name: str) -> tuple[str, Any, int, int]:
        """How another process opens region ``name``: ``("system", key, offset, byte_size)``
        or ``("cuda", raw_handle, device_id, byte_size)`` (NOT_FOUND as ``region``)."""
        region = self.region(name)
        if isinstance(region, Region):
            return ("system", region.key, region.offset, region.byte_size)
        return ("cuda", region.handle, region.device_id, region.byte_size)

    def adopt(self, name: str, description: tuple[str, Any, int, int]) -> Region | CudaRegion:
        """Open a region another process registered, as ``describe`` described it there."""
        kind, where, position, byte_size = description
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                if kind == "system":
                    region = Region(name, where, position, byte_size, _map(name, where, position, byte_size))
                else:
                    region = open_region(self.runtime, name, where, position, byte_size)
                self._regions[name] = region
        return region

    def slice(self, params: Any) -> memoryview | DeviceSpan:
        """The bytes that a tensor's ``shared_memory_*`` parameters name (a missing
        byte size is 0 bytes, refused as out of bounds, as Triton does)."""
        name = params[REGION]
        if not isinstance(name, str):
            raise TritonError.invalid_arg(
                f"Unable to parse '{REGION}': attempt to access JSON non-string as string"
            )
        offset, byte_size = _int_param(params, OFFSET), _int_param(params, BYTE_SIZE)
        region = self.region(name)
        if byte_size == 0:
            raise TritonError.invalid_arg(f"Invalid offset + byte size for shared memory region: '{name}'")
        return region.slice(offset, byte_size)

    def input_tensor(
        self,
        name: str,
        datatype: DataType,
        shape: list[int],
        params: Any,
        mismatched: list[ByteSizeMismatch] | None = None,
    ) -> Tensor:
        """An input read from the region its parameters name. A fixed-size type in
        a CUDA region stays there: a device-resident tensor over the region's
        memory (the core copies it to host memory for instances that do not take
        device inputs). Otherwise the array a system region's map holds, a read-only
        view (no copy) for fixed-size types, or a CUDA region's bytes copied to host
        memory first; BYTES are decoded from the bytes. A span of the wrong size raises
        ``ByteSizeMismatch``, or is recorded in ``mismatched`` (``codec.array_from_buffer``)."""
        span = self.slice(params)
        if isinstance(span, DeviceSpan) and datatype not in HOST_ONLY:
            expected = element_count(name, shape) * datatype.itemsize
            if len(span) != expected:
                mismatch = ByteSizeMismatch(name, expected, len(span))
                return Tensor(name, stand_in(mismatch, datatype, shape, mismatched), datatype)
            array = span.device_array(self._runtime(), shape, datatype.numpy_dtype)
            return Tensor.on_device(name, array, datatype)
        if isinstance(span, memoryview):
            data = span.toreadonly()
        else:
            data = memoryview(span.to_host(self._runtime()))
        return Tensor(name, array_from_buffer(name, datatype, shape, data, mismatched), datatype)

    def output_slot(self, name: str, params: Any) -> OutputSlot:
        """Where output ``name`` goes, from its parameters."""
        # tritonclient sends binary_data false with a region; Triton refuses only true.
        for other in ("binary_data", "classification"):
            if other in params and (other != "binary_data" or params[other] is True):
                raise TritonError.invalid_arg(f"Output can't set both '{REGION}' and '{other}'")
        span = self.slice(params)
        if isinstance(span, memoryview):
            return OutputSlot(name, span)
        return OutputSlot(name, span, self._runtime())

    def _runtime(self) -> Runtime:
        if self.runtime is None:  # a CUDA region exists only where a runtime opened it
            raise TritonError.internal("CUDA shared memory needs a CUDA runtime")
        return self.runtime


def _map(name: str, key: str, offset: int, byte_size: int) -> memoryview:
    failed = f"failed to register shared memory region '{name}': "
    # A POSIX shared-memory name is one path component (shm_open refuses others);
    # checking it here keeps a key from naming any file outside /dev/shm.
    base = key[1:] if key.startswith("/") else key
    if not base or "/" in base or base in (".", ".."):
        raise TritonError.internal(f"Unable to open shared memory region: '{key}'")
    try:
        fd = os.open(os.path.join(SHM_DIR, base), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise TritonError.internal(f"Unable to open shared memory region: '{key}'") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or socket someone left in /dev/shm
            raise TritonError.internal(f"Unable to open shared memory region: '{key}'")
        size = info.st_size
        if offset + byte_size > size:
            raise TritonError.invalid_arg(failed + "invalid args")
        if byte_size == 0 or offset % mmap.ALLOCATIONGRANULARITY:
            # What mmap(2) answers Triton for these (EINVAL), in its words.
            raise TritonError.invalid_arg(failed + "unable to process address spaceInvalid argument")
        mapped = mmap.mmap(fd, byte_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
    finally:
        os.close(fd)
    return memoryview(mapped)


def _release(view: memoryview) -> None:
    """Drop the registry's hold on a map. The map itself closes when the last view
    of it (an input still being read, an output not yet written) goes away."""
    try:
        view.release()
    except BufferError:  # something holds a buffer of the root view itself: let the GC close it
        pass
