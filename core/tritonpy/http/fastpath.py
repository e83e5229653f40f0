"""The inference route straight on ASGI, ahead of starlette.

``POST /v2/models/<m>[/versions/<v>]/infer`` is the hot path; it skips
starlette's routing, middleware and request/response objects and reads the
body, runs the request and writes the answer with the ASGI calls themselves.
Every other request goes to the starlette application unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import TritonError

from ..failures import report
from .errors import status_of

if TYPE_CHECKING:
    from .app import HttpFrontend

log = logging.getLogger("tritonpy.http")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PREFIX = "/v2/models/"
_SUFFIX = "/infer"
#: Binary outputs at least this large go to the transport as views of the output
#: arrays, one ASGI message each, instead of being joined into one body first.
_STREAM_THRESHOLD = 64 * 1024


def is_version(text: str) -> bool:
    """Whether ``text`` is a version as Triton's routes take it: ASCII digits only
    (``str.isdigit`` also takes other scripts' digits, which ``int`` then reads)."""
    return text.isascii() and text.isdigit()


def infer_target(path: str) -> tuple[str, str] | None:
    """``(model, version)`` for an inference path, else None."""
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return None
    parts = path[len(_PREFIX) : -len(_SUFFIX)].split("/")
    if len(parts) == 1 and parts[0]:
        return parts[0], ""
    if len(parts) == 3 and parts[0] and parts[1] == "versions" and is_version(parts[2]):
        return parts[0], parts[2]
    return None


class InferFastPath:
    """ASGI app: inference requests handled here, the rest by ``app``."""

    def __init__(self, frontend: HttpFrontend, app: ASGIApp) -> None:
        self.frontend = frontend
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            target = infer_target(scope["path"])
            if target is not None:
                await self._infer(scope, receive, send, *target)
                return
        await self.app(scope, receive, send)

    async def _infer(self, scope: Scope, receive: Receive, send: Send, model: str, version: str) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        f = self.frontend
        try:
            f.check_declared_size(headers.get("content-length"))
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client went away; nothing to answer
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > f.max_input:
                    raise f.too_large()
                if chunk:
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            body = f.finish_body(chunks or [b""], headers.get("content-encoding"))
            parts, extra, media_type = await f.infer_payload(
                model,
                version,
                body,
                headers.get("inference-header-content-length"),
                headers.get("accept-encoding", ""),
            )
            status = 200
        except Exception as exc:
            status, body = error_answer(exc, scope["path"])
            parts, extra, media_type = [body], {}, "application/json"
        length = sum(len(p) for p in parts)
        raw_headers = [
            (b"content-type", media_type.encode()),
            (b"content-length", str(length).encode()),
            *((k.lower().encode(), v.encode()) for k, v in extra.items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        if len(parts) == 1 or length < _STREAM_THRESHOLD:
            body_out = parts[0] if len(parts) == 1 else b"".join(parts)
            await send({"type": "http.response.body", "body": body_out})
            return
        last = len(parts) - 1
        for i, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < last})


def error_answer(exc: Exception, path: str) -> tuple[int, bytes]:
    """The status and JSON body answering an inference that failed with ``exc``:
    a TritonError's own; anything else (a bug must not take the server down) 500,
    logged under an incident id the answer names."""
    if isinstance(exc, TritonError):
        status, message = status_of(exc), exc.message
    else:
        status, message = 500, report(log, f"unhandled error in POST {path}", exc)
    exc.__traceback__ = None  # its frames hold the request body: no cycle until a GC
    return status, json.dumps({"error": message}).encode()
