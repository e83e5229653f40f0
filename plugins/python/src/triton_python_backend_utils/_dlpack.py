"""DLPack capsules made and read with ctypes, no framework: the ``DLManagedTensor`` of
DLPack 0.x, the ABI every consumer reads.

``capsule`` hands memory to a consumer (GPU views; bfloat16 host tensors, which numpy
will not export). ``capsule_device`` reads where a bare capsule's data lies, and
``import_bfloat16`` takes host bfloat16 data numpy's own ``from_dlpack`` refuses.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

#: ``DLDeviceType`` of host, CUDA and pinned host memory (dlpack.h).
KDLCPU, KDLCUDA, KDLCUDAHOST = 1, 2, 3
#: ``DLDataTypeCode`` of bfloat16.
KDLBFLOAT = 4
_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
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


_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_SetName", _pythonapi)
)


def _unconsumed(capsule: int) -> Any:
    """The ``DLManagedTensor`` of the capsule object at address ``capsule`` (a destructor's
    argument, or ``id()`` of one) while it is still named ``dltensor``; else None."""
    if not _IsValid(capsule, _CAPSULE_NAME):
        return None
    return ctypes.cast(_GetPointer(capsule, _CAPSULE_NAME), ctypes.POINTER(_Managed))


def _destroy_capsule(capsule: int) -> None:
    """A capsule never consumed (still named ``dltensor``) deletes its tensor itself."""
    managed = _unconsumed(capsule)
    if managed is not None:
        _delete(managed)


_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)


def capsule(
    address: int,
    shape: Sequence[int],
    dtype: np.dtype[Any],
    device: tuple[int, int],
    owner: Any,
    *,
    bfloat16: bool = False,
) -> Any:
    """A ``"dltensor"`` capsule over C-contiguous memory that keeps ``owner`` alive
    until the consumer lets go of the tensor. ``bfloat16`` marks 16-bit data as
    bfloat16 (an ml_dtypes ``bfloat16`` dtype is marked so by itself)."""
    code = KDLBFLOAT if bfloat16 or dtype.name == "bfloat16" else _CODES.get(dtype.kind)
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


def _managed(dl_capsule: Any) -> Any:
    """The ``DLManagedTensor`` of an unconsumed capsule object (CPython's ``id`` is its
    address; ``pythonapi`` is CPython's anyway)."""
    managed = _unconsumed(id(dl_capsule))
    if managed is None:
        raise BufferError("not an unconsumed DLPack capsule (named 'dltensor')")
    return managed


def capsule_device(dl_capsule: Any) -> tuple[int, int]:
    """``(device type, device id)`` of an unconsumed capsule's data."""
    device = _managed(dl_capsule).contents.dl_tensor.device
    return int(device.device_type), int(device.device_id)


class _Imported:
    """A consumed capsule's tensor as numpy sees it (``__array_interface__``); calls
    the producer's deleter when the last array over it goes."""

    def __init__(self, managed: Any, address: int, shape: tuple[int, ...], strides: Any) -> None:
        self._managed = managed
        self.__array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": "<u2",
            "data": (address, False),
            "strides": strides,
        }

    def __del__(self) -> None:
        deleter = self._managed.contents.deleter
        if deleter:
            deleter(self._managed)


def import_bfloat16(dl_capsule: Any, dtype: Any) -> np.ndarray[Any, Any] | None:
    """Host bfloat16 data of an unconsumed capsule as a numpy array of ``dtype`` (ml_dtypes
    ``bfloat16``, or ``uint16`` without it), no copy: the capsule is consumed and the
    producer's tensor freed with the array. None, the capsule untouched, when it holds
    anything else."""
    managed = _managed(dl_capsule)
    t = managed.contents.dl_tensor
    if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (KDLBFLOAT, 16, 1):
        return None
    if t.device.device_type not in (KDLCPU, KDLCUDAHOST):
        return None
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = tuple(int(t.strides[i]) * 2 for i in range(t.ndim)) if t.strides else None
    address = (t.data or 0) + t.byte_offset
    _SetName(id(dl_capsule), _USED_NAME)
    owner = _Imported(managed, address, shape, strides)
    if not address:  # no elements: numpy refuses a null pointer
        del owner
        return np.empty(shape, dtype)
    array: np.ndarray[Any, Any] = np.asarray(owner).view(dtype)
    return array
