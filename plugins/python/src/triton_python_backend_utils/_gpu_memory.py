"""GPU memory as the stub hands it to ``model.py`` and takes it back, with no framework.

``GpuView`` is a pointer, a shape, a dtype and a GPU, plus what keeps the memory
alive; frameworks take it without a copy through DLPack (``torch.from_dlpack``).
It is the SDK's ``DeviceArray`` reduced to what the stub needs, written again
here because a stub may run in an environment with numpy only (the SDK is not
there): ``capsule`` builds the same ``DLManagedTensor`` (DLPack 0.x, the ABI
every consumer reads). ``gpu_source`` reads where a model's own GPU tensor lies
through the CUDA array interface (torch, cupy, numba), also with no import.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: ``DLDeviceType`` of CUDA memory (dlpack.h).
KDLCUDA = 2
_CAPSULE_NAME = b"dltensor"
# DLDataTypeCode by numpy kind: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBool 6.
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

#: What a live DLManagedTensor needs kept (its struct, shape, the memory's owner), by key.
_LIVE: dict[int, tuple[Any, ...]] = {}
_LIVE_LOCK = threading.Lock()
_NEXT = itertools.count(1)


def _delete(managed: Any) -> None:
    key = managed.contents.manager_ctx
    with _LIVE_LOCK:
        _LIVE.pop(int(key or 0), None)


_DELETER = _Deleter(_delete)
_pythonapi = ctypes.pythonapi
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _pythonapi)
)
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pythonapi)
)
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pythonapi)
)


def _destroy_capsule(capsule: int) -> None:
    """A capsule never consumed (still named ``dltensor``) deletes its tensor itself."""
    if _IsValid(capsule, _CAPSULE_NAME):
        _delete(ctypes.cast(_GetPointer(capsule, _CAPSULE_NAME), ctypes.POINTER(_Managed)))


_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)


def capsule(
    address: int, shape: Sequence[int], dtype: np.dtype[Any], device: tuple[int, int], owner: Any
) -> Any:
    """A ``"dltensor"`` capsule over C-contiguous memory that keeps ``owner`` alive
    until the consumer lets go of the tensor."""
    code = _CODES.get(dtype.kind)
    if code is None or dtype.hasobject:
        raise BufferError(f"DLPack cannot carry dtype {dtype}")
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed = _Managed()
    t = managed.dl_tensor
    t.data = address or None
    t.device = _Device(device[0], device[1])
    t.ndim = ndim
    t.dtype = _DataType(code, dtype.itemsize * 8, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    key = next(_NEXT)
    managed.manager_ctx = key
    managed.deleter = _DELETER
    with _LIVE_LOCK:
        _LIVE[key] = (managed, shape_arr, owner)
    return _New(ctypes.addressof(managed), _CAPSULE_NAME, ctypes.cast(_DESTROY, ctypes.c_void_p))


def live_count() -> int:
    """How many tensors made here a consumer (or an unconsumed capsule) still holds."""
    with _LIVE_LOCK:
        return len(_LIVE)


class GpuView:
    """``shape`` elements of ``dtype`` at ``address`` on GPU ``device_id``; ``owner``
    lives as long as this view and every tensor a framework made of it."""

    __slots__ = ("address", "device_id", "dtype", "owner", "shape", "_to_host")

    def __init__(
        self,
        address: int,
        shape: Sequence[int],
        dtype: Any,
        device_id: int,
        owner: Any,
        to_host: Callable[[], np.ndarray[Any, Any]],
    ) -> None:
        self.address = address
        self.shape = tuple(int(d) for d in shape)
        self.dtype: np.dtype[Any] = np.dtype(dtype)
        self.device_id = device_id
        self.owner = owner
        self._to_host = to_host

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDLCUDA, self.device_id)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule, no copy (the data is complete when the view is handed out)."""
        if kwargs.get("copy"):
            raise BufferError("GPU memory is shared without copying; copy it after import")
        return capsule(self.address, self.shape, self.dtype, self.__dlpack_device__(), self)

    def to_host(self) -> np.ndarray[Any, Any]:
        return self._to_host()

    def __repr__(self) -> str:
        where = f"address={self.address:#x}, GPU {self.device_id}"
        return f"GpuView({where}, shape={list(self.shape)}, dtype={self.dtype})"


def gpu_source(producer: Any) -> tuple[int, int, tuple[int, ...], int] | None:
    """``(device, address, shape, nbytes)`` of a GPU tensor, read without a copy; None
    when it cannot be (not C-contiguous, no CUDA array interface: send it by host)."""
    if isinstance(producer, GpuView):
        return producer.device_id, producer.address, producer.shape, producer.nbytes
    try:
        face = producer.__cuda_array_interface__
        device_type, device = producer.__dlpack_device__()
    except Exception:  # e.g. torch refuses a tensor that requires grad
        return None
    if int(device_type) != KDLCUDA:
        return None
    shape = tuple(int(d) for d in face["shape"])
    dtype = np.dtype(face["typestr"])
    strides = face.get("strides")
    if strides is not None:
        expected = dtype.itemsize
        for size, stride in zip(reversed(shape), reversed(strides)):
            if size != 1 and int(stride) != expected:
                return None
            expected *= size
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return int(device), int(face["data"][0]), shape, nbytes
