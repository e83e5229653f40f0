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
    """The response encoding for an ``Accept-Encoding`` header, as Triton picks it.

    gzip or deflate with the highest q-value (q=0 refuses it); on a tie, the one
    listed first. Anything else (``*``, ``br``, ``identity``) means no compression.
    """
    best: str | None = None
    best_q = 0.0
    for item in accept.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if coding not in ("gzip", "deflate"):
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > best_q:
            best, best_q = coding, q
    return best


def compress(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=6)
    return zlib.compress(body, 6)
