"""The inference route straight on ASGI, ahead of starlette.

``POST /v2/models/<m>[/versions/<v>]/infer`` is the hot path; it skips
starlette's routing, middleware and request/response objects and reads the
body, runs the request and writes the answer with the ASGI calls themselves.
Every other request goes to the starlette application unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..model_version import is_version
from ..trace import FrontEnd
from . import body
from .errors import error_answer
from .inference import HttpInference
from .tensors import HEADER_LENGTH, Body

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PREFIX = "/v2/models/"
_SUFFIX = "/infer"
#: Binary outputs at least this large go to the transport as views of the output
#: arrays, one ASGI message each, instead of being joined into one body first.
_STREAM_THRESHOLD = 64 * 1024


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

    def __init__(self, inference: HttpInference, app: ASGIApp) -> None:
        self.inference = inference
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            target = infer_target(scope["path"])
            if target is not None:
                await self._infer(scope, receive, send, *target)
                return
        await self.app(scope, receive, send)

    async def _infer(self, scope: Scope, receive: Receive, send: Send, model: str, version: str) -> None:
        front = self.inference.front()
        try:
            await self._answer(scope, receive, send, model, version, front)
        finally:
            if front is not None:
                front.dropped()  # an answer never sent (the client went away) lets the trace go

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, model: str, version: str, front: FrontEnd | None
    ) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        inference = self.inference
        try:
            limit = body.inference_limit(
                headers.get(HEADER_LENGTH), headers.get("content-encoding"), inference.max_input
            )
            body.check_declared_size(headers.get("content-length"), limit)
            chunks = await body.read(receive, limit)
            if chunks is None:
                return  # the client went away; nothing to answer
            if front is not None:
                front.received()
            parts, extra, media_type = await inference.run(model, version, chunks, headers, front)
            status = 200
        except Exception as exc:
            status, answer = error_answer(exc, scope["path"])
            parts, extra, media_type = [answer], {}, "application/json"
        if front is not None:
            front.sending()
        await self._send(send, status, parts, extra, media_type)
        if front is not None:
            front.sent()

    async def _send(
        self, send: Send, status: int, parts: Body, extra: dict[str, str], media_type: str
    ) -> None:
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
