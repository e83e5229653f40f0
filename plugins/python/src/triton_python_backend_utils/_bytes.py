"""BYTES tensors in Triton's encoding: each element a 4-byte little-endian length, then its bytes."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

_LEN = struct.Struct("<I")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.bytes_):
        return bytes(value)
    return str(value).encode("utf-8")


def elements(array: np.ndarray[Any, Any]) -> list[bytes]:
    """The elements of a BYTES tensor as ``bytes``, in C order (``str`` encoded as UTF-8)."""
    return [_as_bytes(v) for v in array.reshape(-1)]


def encoded_size(items: list[bytes]) -> int:
    return 4 * len(items) + sum(len(b) for b in items)


def encode_into(items: list[bytes], target: memoryview) -> int:
    """Write ``items`` in the BYTES encoding into ``target``; return the bytes written."""
    pos = 0
    for b in items:
        _LEN.pack_into(target, pos, len(b))
        pos += 4
        target[pos : pos + len(b)] = b
        pos += len(b)
    return pos


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """Triton's ``serialize_byte_tensor``: a flat ``uint8`` array of the encoded elements.

    Elements are taken in C order. ``None`` for an empty tensor.
    """
    if input_tensor.size == 0:
        return None
    items = elements(input_tensor)
    buf = bytearray(encoded_size(items))
    encode_into(items, memoryview(buf))
    return np.frombuffer(buf, dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor: Any) -> np.ndarray[Any, Any]:
    """Triton's ``deserialize_bytes_tensor``: the encoding → flat object array of ``bytes``."""
    view = memoryview(encoded_tensor).cast("B")
    n = len(view)
    items: list[bytes] = []
    pos = 0
    while pos < n:
        if pos + 4 > n:
            raise ValueError("BYTES data is truncated: an element length is cut off")
        (size,) = _LEN.unpack_from(view, pos)
        pos += 4
        if pos + size > n:
            raise ValueError(f"BYTES data is truncated: element {len(items)} needs {size} bytes")
        items.append(bytes(view[pos : pos + size]))
        pos += size
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out
