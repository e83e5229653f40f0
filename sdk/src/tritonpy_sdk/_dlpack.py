"""A DLPack producer over a raw pointer: memory the SDK does not own (a CUDA
shared-memory region, a pooled device buffer) handed to a framework without a copy.

``capsule(...)`` builds a ``DLManagedTensor`` (the DLPack 0.x ABI every consumer
reads: numpy, torch, cupy, jax, onnxruntime) in a ``"dltensor"`` PyCapsule. The
owner object passed in is kept alive until the consumer calls the tensor's
deleter (when the array it made is freed), or until the capsule itself is freed
unconsumed. Nothing is copied and nothing is synchronised: a device pointer's
data must be ready when the consumer reads it (the core's copies are
synchronous).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

#: ``DLDeviceType`` values (dlpack.h).
KDLCPU = 1
KDLCUDA = 2

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

#: What a live DLManagedTensor needs kept: its struct, shape/strides arrays and
#: the owner of the memory, by the id in ``manager_ctx``.
_LIVE: dict[int, tuple[Any, ...]] = {}
_LIVE_LOCK = threading.Lock()
_NEXT = iter(range(1, 2**62))


def _delete(managed: Any) -> None:
    """The tensor's deleter: the consumer is done; forget what kept the memory alive."""
    key = managed.contents.manager_ctx
    with _LIVE_LOCK:
        _LIVE.pop(int(key or 0), None)


_DELETER = _Deleter(_delete)

# Our own prototypes of the C API: the attributes of ``ctypes.pythonapi`` are shared
# by every module in the process, and others set their argtypes differently.
_pythonapi = ctypes.pythonapi
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", _pythonapi)
)
_IsValidAt = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pythonapi)
)
_GetPointerAt = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pythonapi)
)


def _destroy_capsule(capsule: int) -> None:
    """The capsule's destructor: a capsule still named ``dltensor`` was never
    consumed, so its tensor is deleted here (a consumer renames it and deletes later)."""
    if _IsValidAt(capsule, _CAPSULE_NAME):
        pointer = _GetPointerAt(capsule, _CAPSULE_NAME)
        _delete(ctypes.cast(pointer, ctypes.POINTER(_Managed)))


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_DESTROY = _CapsuleDestructor(_destroy_capsule)


def data_type(dtype: np.dtype[Any]) -> tuple[int, int]:
    """DLPack's ``(code, bits)`` for a numpy dtype (ValueError for what DLPack cannot carry)."""
    code = _CODES.get(dtype.kind)
    if code is None or dtype.hasobject:
        raise ValueError(f"DLPack cannot carry dtype {dtype}")
    return code, dtype.itemsize * 8


def capsule(
    address: int,
    shape: Sequence[int],
    dtype: np.dtype[Any],
    device: tuple[int, int],
    owner: Any,
    strides: Sequence[int] | None = None,
) -> Any:
    """A ``"dltensor"`` capsule over ``address`` (``device`` is ``(DLDeviceType,
    id)``; ``strides`` in elements, None for C-contiguous) that keeps ``owner``
    alive for as long as the consumer holds the tensor."""
    code, bits = data_type(dtype)
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides is not None else None
    managed = _Managed()
    t = managed.dl_tensor
    t.data = address or None
    t.device = _Device(device[0], device[1])
    t.ndim = ndim
    t.dtype = _DataType(code, bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    if strides_arr is not None:
        t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    key = next(_NEXT)
    managed.manager_ctx = key
    managed.deleter = _DELETER
    with _LIVE_LOCK:
        _LIVE[key] = (managed, shape_arr, strides_arr, owner)
    destructor = ctypes.cast(_DESTROY, ctypes.c_void_p)
    return _New(ctypes.addressof(managed), _CAPSULE_NAME, destructor)


def live_count() -> int:
    """How many tensors this module made are still held (by a consumer or an
    unconsumed capsule); for tests of the owner's lifetime."""
    with _LIVE_LOCK:
        return len(_LIVE)


# -- the consumer side: wrapping a producer's memory without a copy ----------------------------

_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pythonapi)
)
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _pythonapi)
)
_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}


class Imported:
    """A tensor taken from a ``"dltensor"`` capsule; its producer's deleter runs
    when this goes (the producer keeps the memory until then)."""

    __slots__ = ("__weakref__", "_pointer")

    def __init__(self, pointer: int) -> None:
        self._pointer = pointer

    def __del__(self) -> None:
        managed = ctypes.cast(self._pointer, ctypes.POINTER(_Managed))
        deleter = managed.contents.deleter
        if deleter:
            deleter(managed)


def take(producer: Any) -> tuple[int, tuple[int, ...], np.dtype[Any], tuple[int, int], Imported]:
    """``(address, shape, dtype, (device type, id), owner)`` of what ``producer``
    (anything with ``__dlpack__``) exports, without a copy. Only C-contiguous
    tensors of the types DLPack and numpy share are taken (BufferError otherwise)."""
    made = producer.__dlpack__()
    pointer = _GetPointer(made, _CAPSULE_NAME)  # raises ValueError for a used or versioned capsule
    _SetName(made, _USED_NAME)  # ours now: the capsule's destructor leaves it alone
    owner = Imported(pointer)
    t = ctypes.cast(pointer, ctypes.POINTER(_Managed)).contents.dl_tensor
    kind = _KINDS.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1:
        raise BufferError(f"DLPack data type code {t.dtype.code} (bits {t.dtype.bits}) has no numpy type")
    dtype = np.dtype("?" if kind == "b" else f"{kind}{t.dtype.bits // 8}")
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if t.strides:
        expected = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and int(t.strides[i]) != expected:
                raise BufferError("only C-contiguous tensors are taken without a copy")
            expected *= shape[i]
    address = int(t.data or 0) + int(t.byte_offset)
    return address, shape, dtype, (int(t.device.device_type), int(t.device.device_id)), owner
