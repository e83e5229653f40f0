"""Inference requests answered by the HTTP protocol itself, without an ASGI cycle.

``POST /v2/models/<m>[/versions/<v>]/infer`` is most of what a loaded server
serves. Through ASGI each one costs a task, a dozen messages and awaits, and
two writes; here the protocol collects the body as the parser hands it over,
queues the request when the body is complete, and the answer — on the event
loop, once the model responded — is one write of head and body. The wire
behaviour is the ASGI fast path's (``fastpath.InferFastPath``): the same
decoding, limits, errors, status codes and headers. The protocol falls back to
ASGI where this path would differ (an ``Expect: 100-continue`` request, an
access log, restricted APIs).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import InferenceResponse, TritonError

from ..failures import report
from .app import DECOUPLED_REFUSAL, encode_infer
from .errors import status_of
from .fastpath import error_body

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    from .app import HttpFrontend
    from .infer import Body

log = logging.getLogger("tritonpy.http")

#: Larger bodies go to the transport part by part instead of joined to the head.
_JOIN_LIMIT = 64 * 1024

_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        from http import HTTPStatus

        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())
    return line


class DirectInfer:
    """One inference request on a connection, from its head to its answer."""

    __slots__ = (
        "_accept",
        "_binary",
        "_chunks",
        "_decided",
        "_flags",
        "_frontend",
        "_headers",
        "_loop",
        "_size",
        "cycle",
        "model",
        "protocol",
        "started",
        "version",
    )

    def __init__(
        self,
        protocol: HttpToolsProtocol,
        frontend: HttpFrontend,
        cycle: RequestResponseCycle,
        model: str,
        version: str,
    ) -> None:
        self.protocol = protocol
        self.cycle = cycle
        self.model = model
        self.version = version
        self.started = False
        self._frontend = frontend
        self._loop: asyncio.AbstractEventLoop = protocol.loop
        self._headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in cycle.scope["headers"]}
        self._accept = self._headers.get("accept-encoding", "")
        self._binary = False
        self._flags: dict[str, bool] = {}
        #: Whether the answer is known (a refusal, or the model's response).
        self._decided = False
        body = cycle.body  # what came while the request waited behind an earlier one
        self._chunks: list[bytes] = [bytes(body)] if body else []
        self._size = len(body)
        try:
            frontend.check_declared_size(self._headers.get("content-length"))
            if self._size > frontend.max_input:
                raise frontend.too_large()
        except TritonError as exc:
            self.fail(exc)

    # -- the request ---------------------------------------------------------------------------

    def on_body(self, chunk: bytes) -> None:
        if self._decided:
            return  # refused already: the rest is dropped
        self._size += len(chunk)
        if self._size > self._frontend.max_input:
            self.fail(self._frontend.too_large())
            return
        self._chunks.append(chunk)

    def body_complete(self) -> None:
        """The whole body arrived: decode it and queue the request."""
        if self._decided or self.started:
            return
        self.started = True
        f, headers = self._frontend, self._headers
        try:
            body = f.finish_body(self._chunks or [b""], headers.get("content-encoding"))
            self._chunks = []
            request, self._binary, self._flags = f.decode_infer(
                self.model, self.version, body, headers.get("inference-header-content-length")
            )
            f.server.start_infer(request, self._answered_from_any_thread, DECOUPLED_REFUSAL)
        except TritonError as exc:
            self.fail(exc)
        except Exception as exc:  # a bug must not take the server down; say what failed
            self._fail_internal(exc)

    # -- the answer ----------------------------------------------------------------------------

    def _answered_from_any_thread(self, response: InferenceResponse) -> None:
        try:
            self._loop.call_soon_threadsafe(self._answered, response)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _answered(self, response: InferenceResponse) -> None:
        self._decided = True
        if response.error is not None:
            self.fail(response.error)
            return
        try:
            parts, extra, media_type = encode_infer(response, self._binary, self._flags, self._accept)
        except TritonError as exc:
            self.fail(exc)
            return
        except Exception as exc:
            self._fail_internal(exc)
            return
        self._write(200, parts, extra, media_type)

    def fail(self, error: TritonError) -> None:
        """Answer ``error``. Written on the loop's next turn, never from inside the
        parser's callbacks (where a refusal is found), as the ASGI path would."""
        error.__traceback__ = None  # its frames hold the request body: no cycle until a GC
        self._decided = True
        self._loop.call_soon(self._write_error, status_of(error), error_body(error.message))

    def _fail_internal(self, exc: Exception) -> None:
        path = self.cycle.scope["path"]
        message = report(log, f"unhandled error in POST {path}", exc)
        exc.__traceback__ = None
        self._decided = True
        self._loop.call_soon(self._write_error, 500, error_body(message))

    def _write_error(self, status: int, body: bytes) -> None:
        self._write(status, [body], {}, "application/json")

    def _write(self, status: int, parts: Body, extra: dict[str, str], media_type: str) -> None:
        cycle = self.cycle
        if cycle.response_complete:
            return
        cycle.response_started = cycle.response_complete = True
        protocol = self.protocol
        if getattr(protocol, "_infer", None) is self:
            protocol._infer = None  # type: ignore[attr-defined]
        if cycle.disconnected:
            return  # the client went away; nothing to answer
        length = sum(len(p) for p in parts)
        head: list[Any] = [_status_line(status)]
        for name, value in cycle.default_headers:
            head += (name, b": ", value, b"\r\n")
        head += (b"content-type: ", media_type.encode(), b"\r\ncontent-length: %d\r\n" % length)
        for key, text in extra.items():
            head += (key.lower().encode(), b": ", text.encode(), b"\r\n")
        if not cycle.keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        transport = protocol.transport
        if length < _JOIN_LIMIT:
            transport.write(b"".join([*head, *parts]))
        else:
            transport.write(b"".join(head))
            for part in parts:
                transport.write(part)
        cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()
        protocol.on_response_complete()
