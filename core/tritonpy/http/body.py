"""A request body: read from ASGI, held to ``--http-max-input-size``, decompressed.

One reader for every route: the inference fast path reads the chunks itself
(``read``), the starlette routes through ``read_body``; the direct path
(``direct.py``) gets the chunks from the parser and checks the same limits.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive
from tritonpy_sdk import TritonError

from .compression import decompress


def check_declared_size(declared: str | None, limit: int) -> None:
    """Refuse a body whose ``Content-Length`` is over ``limit`` before reading any of it."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TritonError.invalid_arg(
            f"request body of {declared} bytes exceeds the maximum input size of {limit} bytes "
            "(--http-max-input-size)"
        )


#: No bound on a body's size (its JSON part is bounded instead).
UNBOUNDED = 1 << 62


def inference_limit(header_length: str | None, encoding: str | None, limit: int) -> int:
    """The most bytes an inference body may hold, as Triton bounds it with
    ``--http-max-input-size`` (``limit``): a body of JSON only, a raw binary body (header
    length 0) and a compressed body (after decompression too) are bounded whole; a body
    whose ``Inference-Header-Content-Length`` announces a JSON part within ``limit`` is
    not: its binary tensor data is unbounded. (A body announcing a larger JSON part stays
    bounded whole, so it is refused as too large or as shorter than its JSON part, and
    only after an unknown model is reported, as Triton orders its answers.)"""
    if header_length is None or encoding or not header_length.isdigit():
        return limit  # a malformed length is the decoder's to refuse, in its words
    return UNBOUNDED if 0 < int(header_length) <= limit else limit


#: Pieces of a body smaller than this are gathered into one buffer as they arrive.
SMALL_PIECE = 1 << 16


def add_piece(chunks: list[bytes], piece: bytes) -> None:
    """Append ``piece`` (not empty) of a request body to ``chunks``, gathering small
    pieces into one ``bytearray``: a body that arrives in tiny reads then costs its size
    in memory, not an object per read (a body of 1-byte reads would cost ~40 times its
    size). A body in one piece stays that piece, and large pieces are never copied
    before the body is joined."""
    if len(piece) < SMALL_PIECE and chunks:
        last = chunks[-1]
        if isinstance(last, bytearray):
            last += piece
            return
        if len(last) < SMALL_PIECE:
            gathered = bytearray(last)
            gathered += piece
            chunks[-1] = gathered  # type: ignore[call-overload]
            return
    chunks.append(piece)


def too_large(limit: int) -> TritonError:
    return TritonError.invalid_arg(
        f"request body exceeds the maximum input size of {limit} bytes (--http-max-input-size)"
    )


def join(chunks: list[bytes], encoding: str | None, limit: int) -> bytes:
    """The body of ``chunks`` (at least one), decompressed when ``encoding`` says so."""
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if encoding:
        body = decompress(body, encoding, limit)
    return body


async def read(receive: Receive, limit: int) -> list[bytes] | None:
    """The chunks of a body (never more than ``limit`` bytes; at least one), or None
    when the client went away first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        if chunk:
            add_piece(chunks, chunk)
        if not message.get("more_body", False):
            return chunks or [b""]


async def request_chunks(request: Request, limit: int) -> list[bytes]:
    """The chunks of a starlette route's request body, never more than ``limit`` bytes."""
    check_declared_size(request.headers.get("content-length"), limit)
    chunks = await read(request.receive, limit)
    if chunks is None:
        raise ClientDisconnect()
    return chunks


async def read_body(request: Request, limit: int) -> bytes:
    """The body of a starlette route's request, decompressed, never more than ``limit`` bytes."""
    return join(await request_chunks(request, limit), request.headers.get("content-encoding"), limit)
