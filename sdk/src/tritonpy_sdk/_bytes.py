"""BYTES tensors in Triton's wire format: each element a 4-byte little-endian
length followed by that many bytes."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ._errors import TritonError

_LEN = struct.Struct("<I")


def serialize_bytes_tensor(array: np.ndarray[Any, Any]) -> bytes:
    """Flatten an object array of ``bytes`` (or str) into Triton's BYTES encoding."""
    parts: list[bytes] = []
    for value in array.reshape(-1):
        b = value if isinstance(value, bytes) else str(value).encode("utf-8")
        parts.append(_LEN.pack(len(b)))
        parts.append(b)
    return b"".join(parts)


def deserialize_bytes_tensor(buffer: bytes | memoryview, count: int | None = None) -> np.ndarray[Any, Any]:
    """Decode Triton's BYTES encoding into a flat object array of ``bytes``.

    When ``count`` is given the buffer must hold exactly that many elements.
    Raises ``TritonError`` (INVALID_ARG) on a truncated or overlong buffer.
    """
    view = memoryview(buffer)
    n = len(view)
    items: list[bytes] = []
    pos = 0
    while pos < n:
        if pos + 4 > n:
            raise TritonError.invalid_arg("BYTES data is truncated: an element length is cut off")
        (size,) = _LEN.unpack_from(view, pos)
        pos += 4
        if pos + size > n:
            raise TritonError.invalid_arg(
                f"BYTES data is truncated: element {len(items)} declares {size} bytes, {n - pos} remain"
            )
        items.append(bytes(view[pos : pos + size]))
        pos += size
    if count is not None and len(items) != count:
        raise TritonError.invalid_arg(f"BYTES data holds {len(items)} elements, expected {count}")
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out
