"""``Tensor``: a named, typed array handed between the core and backends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._datatype import DataType


@dataclass(slots=True)
class Tensor:
    """A named tensor held as a numpy array on the CPU.

    ``data`` is a numpy array whose dtype matches ``datatype`` (an object array
    of ``bytes`` for BYTES). Device buffers arrive through DLPack in a later
    version; ``memory_type`` and ``device_id`` already say where data lives.
    """

    name: str
    data: np.ndarray[Any, Any]
    datatype: DataType
    memory_type: str = "CPU"
    device_id: int = 0

    @classmethod
    def from_numpy(cls, name: str, array: Any, datatype: DataType | None = None) -> Tensor:
        """Wrap ``array`` (anything ``numpy.asarray`` takes) as a tensor.

        The data type is inferred from the array unless given. Strings become
        BYTES, encoded as UTF-8.
        """
        arr = np.asarray(array)
        dt = datatype or DataType.from_numpy(arr.dtype)
        if dt is DataType.BYTES:
            arr = as_bytes_array(arr)
        return cls(name, arr, dt)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def as_numpy(self) -> np.ndarray[Any, Any]:
        """The tensor's data as a numpy array (no copy)."""
        return self.data

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Same as ``as_numpy`` (the name Triton's in-process API uses)."""
        return self.data

    def to_bytes_array(self) -> np.ndarray[Any, Any]:
        """BYTES data as an object array of ``bytes`` (other types: their values' text)."""
        return as_bytes_array(self.data)

    def to_string_array(self) -> np.ndarray[Any, Any]:
        """BYTES data decoded as UTF-8 ``str`` (object array)."""
        out = np.empty(self.data.shape, dtype=np.object_)
        out.reshape(-1)[:] = [b.decode("utf-8") for b in self.to_bytes_array().reshape(-1)]
        return out

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.data.__dlpack_device__()


def as_bytes_array(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Return ``array`` as an object array of ``bytes`` (UTF-8 for str)."""
    if array.dtype == np.object_:
        flat = array.reshape(-1)
        if all(isinstance(v, bytes) for v in flat):
            return array
    out = np.empty(array.shape, dtype=np.object_)
    src = array.reshape(-1)
    dst = out.reshape(-1)
    for i, value in enumerate(src):
        if isinstance(value, bytes):
            dst[i] = value
        elif isinstance(value, str):
            dst[i] = value.encode("utf-8")
        elif isinstance(value, np.bytes_):
            dst[i] = bytes(value)
        else:
            dst[i] = str(value).encode("utf-8")
    return out
