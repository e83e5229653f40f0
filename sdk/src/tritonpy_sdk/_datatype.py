"""Tensor data types: Triton's config names, protocol names and numpy dtypes.

One ``DataType`` member per Triton type. ``TYPE_FP32`` in ``config.pbtxt``,
``"FP32"`` on the wire and ``numpy.float32`` in memory are the same member.
BYTES tensors are numpy object arrays whose elements are ``bytes``. BF16 is
``ml_dtypes.bfloat16`` when that package is installed, else raw ``uint16``
words holding the bfloat16 bit patterns (the wire format is the same).
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

try:  # ml_dtypes is optional: it gives BF16 a real numpy dtype.
    from ml_dtypes import bfloat16 as _bfloat16

    _BF16_DTYPE: np.dtype[Any] = np.dtype(_bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _BF16_DTYPE = np.dtype(np.uint16)


class DataType(enum.Enum):
    """A Triton tensor data type. The value is the protocol name (``"FP32"``)."""

    BOOL = "BOOL"
    UINT8 = "UINT8"
    UINT16 = "UINT16"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FP16 = "FP16"
    FP32 = "FP32"
    FP64 = "FP64"
    BYTES = "BYTES"
    BF16 = "BF16"

    @property
    def protocol_name(self) -> str:
        """The name used by the KServe v2 protocol, e.g. ``"FP32"``."""
        return self.value

    @property
    def config_name(self) -> str:
        """The name used in ``config.pbtxt``, e.g. ``"TYPE_FP32"``.

        BYTES is ``TYPE_STRING`` in model configurations, as in Triton.
        """
        return "TYPE_STRING" if self is DataType.BYTES else "TYPE_" + self.value

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of arrays of this type (``object`` for BYTES)."""
        return _TO_NUMPY[self]

    @property
    def itemsize(self) -> int:
        """Bytes per element; 0 for BYTES, whose elements vary in size."""
        return 0 if self is DataType.BYTES else _TO_NUMPY[self].itemsize

    @classmethod
    def from_protocol(cls, name: str) -> DataType:
        """The member for a protocol name such as ``"FP32"``; ValueError if unknown."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown data type '{name}'") from None

    @classmethod
    def from_config(cls, name: str) -> DataType:
        """The member for a config name such as ``"TYPE_FP32"``; ValueError if unknown."""
        member = _FROM_CONFIG.get(name)
        if member is None:
            raise ValueError(f"unknown or invalid data type '{name}'")
        return member

    @classmethod
    def from_numpy(cls, dtype: Any) -> DataType:
        """The member for a numpy dtype; strings and ``object`` map to BYTES."""
        dt = np.dtype(dtype)
        member = _FROM_NUMPY.get(dt)
        if member is not None:
            return member
        if dt.kind in "OSU":
            return DataType.BYTES
        raise ValueError(f"numpy dtype '{dt}' has no Triton data type")


_TO_NUMPY: dict[DataType, np.dtype[Any]] = {
    DataType.BOOL: np.dtype(np.bool_),
    DataType.UINT8: np.dtype(np.uint8),
    DataType.UINT16: np.dtype(np.uint16),
    DataType.UINT32: np.dtype(np.uint32),
    DataType.UINT64: np.dtype(np.uint64),
    DataType.INT8: np.dtype(np.int8),
    DataType.INT16: np.dtype(np.int16),
    DataType.INT32: np.dtype(np.int32),
    DataType.INT64: np.dtype(np.int64),
    DataType.FP16: np.dtype(np.float16),
    DataType.FP32: np.dtype(np.float32),
    DataType.FP64: np.dtype(np.float64),
    DataType.BYTES: np.dtype(np.object_),
    DataType.BF16: _BF16_DTYPE,
}

_FROM_CONFIG: dict[str, DataType] = {m.config_name: m for m in DataType}

# uint16 stays UINT16 even when BF16 falls back to uint16 words.
_FROM_NUMPY: dict[np.dtype[Any], DataType] = {
    dt: m for m, dt in reversed(list(_TO_NUMPY.items())) if m is not DataType.BYTES
}
_FROM_NUMPY[np.dtype(np.uint16)] = DataType.UINT16
