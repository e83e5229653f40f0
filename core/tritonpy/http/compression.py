"""gzip/deflate request bodies and responses (``Content-Encoding`` / ``Accept-Encoding``).

Decompression is bounded by the maximum input size, so a small compressed body
cannot expand into unbounded memory.
"""

from __future__ import annotations

import gzip
import zlib

from tritonpy_sdk import TritonError


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded per ``Content-Encoding``; TritonError when it is bad or too big."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        # zlib-wrapped (what tritonclient sends) or raw deflate: detect the header.
        wbits = zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
    else:
        raise TritonError.unsupported(f"unsupported Content-Encoding '{encoding}'; use gzip or deflate")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise TritonError.invalid_arg(f"failed to decompress the request body ({encoding}): {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise TritonError.invalid_arg(
            f"decompressed request body exceeds the maximum input size of {limit} bytes"
        )
    if not inflater.eof:
        raise TritonError.invalid_arg(f"failed to decompress the request body ({encoding}): truncated")
    return out


def choose_encoding(accept: str) -> str | None:
    """The response encoding to use for an ``Accept-Encoding`` header, if any."""
    offered = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    for candidate in ("gzip", "deflate"):
        if candidate in offered:
            return candidate
    return None


def compress(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=6)
    return zlib.compress(body, 6)
