"""Inference requests answered by the HTTP protocol itself, without an ASGI cycle.

``POST /v2/models/<m>[/versions/<v>]/infer`` is most of what a loaded server
serves. Through ASGI each one costs a task, a dozen messages and awaits, and
two writes; here the protocol collects the body as the parser hands it over,
queues the request when the body is complete, and the answer — on the event
loop, once the model responded — is one write of head and body. The wire
behaviour is the ASGI fast path's (``fastpath.InferFastPath``): the same
decoding (``inference.HttpInference``), limits, errors, status codes and headers. The protocol falls back to
ASGI where this path would differ (an ``Expect: 100-continue`` request, an
access log, restricted APIs).

An inference request that nothing is being answered before on its connection, with
a plain path (no query, no percent-encoding), is taken when its head completes: it
is then its own request cycle, and uvicorn makes no ASGI scope, cycle or event for
it. Others (pipelined behind an earlier request, an unusual URL) take uvicorn's way
first and are answered here from its cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import InferenceResponse, TritonError

from ..bridges import call_soon_threadsafe
from .body import add_piece, check_declared_size, inference_limit, too_large
from .errors import error_answer
from .inference import DECOUPLED_REFUSAL, REQUEST_HEADERS, encode_infer
from .tensors import HEADER_LENGTH

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    from .inference import HttpInference
    from .tensors import Body, Placement

#: The request headers an inference reads, by their name as uvicorn hands it over (lowercase).
_WANTED = {name.encode("latin-1"): name for name in REQUEST_HEADERS}

#: Larger bodies go to the transport part by part instead of joined to the head.
_JOIN_LIMIT = 64 * 1024

_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = _STATUS_LINES[status] = b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())
    return line


#: The default headers' lines, joined, and the list they were joined from: uvicorn makes a
#: new list when its date changes (once a second), so this is joined once a second. One
#: tuple, replaced whole: loops on other threads (other servers) may read it meanwhile.
_defaults: tuple[object, bytes] = (None, b"")
#: ``content-type: <media type>`` and the name of the length that follows, by media type.
_CONTENT_TYPES: dict[str, bytes] = {}
#: An extra header's name as it goes on the wire (lowercase, with its colon), by name.
_NAMES: dict[str, bytes] = {}


def encode_head(
    status: int,
    parts: Body,
    extra: dict[str, str],
    media_type: str,
    default_headers: list[tuple[bytes, bytes]],
    keep_alive: bool,
) -> tuple[list[Any], int]:
    """The head of an answer whose body is ``parts``, as parts to join, and the body's length."""
    global _defaults
    length = sum(map(len, parts))  # no generator's frame per part
    defaults = _defaults
    if defaults[0] is not default_headers:
        block = b"".join([name + b": " + value + b"\r\n" for name, value in default_headers])
        defaults = _defaults = (default_headers, block)
    content = _CONTENT_TYPES.get(media_type)
    if content is None:
        content = _CONTENT_TYPES[media_type] = b"content-type: %s\r\ncontent-length: " % media_type.encode()
    head: list[Any] = [_status_line(status), defaults[1], content, b"%d\r\n" % length]
    for key, text in extra.items():
        name = _NAMES.get(key)
        if name is None:
            name = _NAMES[key] = key.lower().encode() + b": "
        head += (name, text.encode(), b"\r\n")
    head.append(b"\r\n" if keep_alive else b"connection: close\r\n\r\n")
    return head, length


class _NoEvent:
    """The ``message_event`` of a request that is its own cycle: nothing waits on it."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT = _NoEvent()


class DirectInfer:
    """One inference request on a connection, from its head to its answer.

    Made from uvicorn's request cycle (``cycle``: a request that waited behind an
    earlier one, or one that took uvicorn's way), or, with ``cycle`` None, as the
    protocol's cycle itself: then it carries the fields of uvicorn's
    ``RequestResponseCycle`` that the protocol reads and sets (``disconnected``,
    ``keep_alive``, ``response_complete``, ...), and no scope, event or body
    buffer is made for the request.
    """

    __slots__ = (
        "_accept",
        "_binary",
        "_chunks",
        "_flags",
        "_front",
        "_inference",
        "_headers",
        "_limit",
        "_loop",
        "_reading",
        "_size",
        "cycle",
        "default_headers",
        "disconnected",
        "keep_alive",
        "message_event",
        "model",
        "more_body",
        "path",
        "protocol",
        "response_complete",
        "response_started",
        "version",
        "waiting_for_100_continue",
    )

    def __init__(
        self,
        protocol: HttpToolsProtocol,
        inference: HttpInference,
        cycle: RequestResponseCycle | None,
        model: str,
        version: str,
        path: str = "",
        keep_alive: bool = True,
    ) -> None:
        self.protocol = protocol
        self.model = model
        self.version = version
        self._inference = inference
        #: The trace's front-end stamps, while tracing is on (``HttpInference.front``).
        self._front = inference.front()
        self._loop: asyncio.AbstractEventLoop = protocol.loop
        self._binary = False
        self._flags: dict[str, Placement] = {}
        #: Whether the body is still wanted: not once it is complete, nor once refused.
        self._reading = True
        if cycle is None:
            # The request's own cycle: uvicorn's fields, as its cycle starts them.
            self.cycle: DirectInfer | RequestResponseCycle = self
            self.path = path
            self.keep_alive = keep_alive
            self.default_headers = protocol.server_state.default_headers
            self.message_event = _NO_EVENT
            self.disconnected = self.response_started = self.response_complete = False
            self.waiting_for_100_continue = False
            self.more_body = True
            fields: Iterable[tuple[bytes, bytes]] = protocol.headers
            self._chunks: list[bytes] = []
            self._size = 0
        else:
            self.cycle = cycle
            self.path = cycle.scope["path"]
            fields = cycle.scope["headers"]
            body = cycle.body  # what came while the request waited behind an earlier one
            self._chunks = [bytes(body)] if body else []
            self._size = len(body)
        # Only the headers that an inference reads (the last of each, as a dict of all would
        # have), and those to forward to the model (--http-header-forward-pattern).
        headers: dict[str, str] = {}
        wanted = _WANTED
        forward = inference.forward
        for name, value in fields:
            key = wanted.get(name)
            if key is not None:
                headers[key] = value.decode("latin-1")
            elif forward is not None:
                text = name.decode("latin-1")
                if forward.search(text):
                    headers[text] = value.decode("latin-1")
        self._headers = headers
        self._accept = self._headers.get("accept-encoding", "")
        self._limit = inference.max_input
        try:
            self._limit = inference_limit(
                headers.get(HEADER_LENGTH), headers.get("content-encoding"), inference.max_input
            )
            check_declared_size(headers.get("content-length"), self._limit)
            if self._size > self._limit:
                raise too_large(self._limit)
        except TritonError as exc:
            self._fail(exc)

    # -- the request ---------------------------------------------------------------------------

    def on_body(self, chunk: bytes) -> None:
        if not self._reading:
            return  # refused already: the rest is dropped
        self._size += len(chunk)
        if self._size > self._limit:
            self._fail(too_large(self._limit))
            return
        add_piece(self._chunks, chunk)

    def body_complete(self) -> None:
        """The whole body arrived: decode it and queue the request."""
        if not self._reading:
            return
        self._reading = False
        f = self._inference
        front = self._front
        if front is not None:
            front.received()
        try:
            request, self._binary, self._flags = f.decode(
                self.model, self.version, self._chunks or [b""], self._headers
            )
            self._chunks = []
            f.server.start_infer(request, self._on_response, DECOUPLED_REFUSAL, front=front)
        except Exception as exc:
            self._fail(exc)

    # -- the answer ----------------------------------------------------------------------------

    def _on_response(self, response: InferenceResponse) -> None:
        """``start_infer``'s callback, on whichever thread answers: the answer is written
        on the loop's next turn (``bridges.call_soon_threadsafe``), also on the loop's
        own thread (a stub's answer is read there): the model's instance is released and
        the next queued request sent to it before this client is written to, which keeps
        a busy model busy (writing at once cost HTTP c=8 a quarter of its throughput and
        ~5 % more CPU per inference, and saved nothing at c=1:
        bench/http_concurrency_1.md)."""
        call_soon_threadsafe(self._loop, self._answered, response)

    def _answered(self, response: InferenceResponse) -> None:
        """The model's response, on the loop."""
        if response.error is not None:
            self._fail(response.error)
            return
        try:
            parts, extra, media_type = encode_infer(response, self._binary, self._flags, self._accept)
        except Exception as exc:
            self._fail(exc)
            return
        self._write(200, parts, extra, media_type)

    def _fail(self, exc: Exception) -> None:
        """Answer ``exc`` (``errors.error_answer``) and read no more of the body.
        Written on the loop's next turn, never from inside the parser's callbacks
        (where a refusal is found), as the ASGI path would."""
        self._reading = False
        status, body = error_answer(exc, self.path)
        parts: Body = [body]
        extra: dict[str, str] = {}
        self._loop.call_soon(self._write, status, parts, extra, "application/json")

    def _write(self, status: int, parts: Body, extra: dict[str, str], media_type: str) -> None:
        cycle = self.cycle
        front = self._front
        if cycle.response_complete:
            return
        cycle.response_started = cycle.response_complete = True
        protocol = self.protocol
        if cycle.disconnected:
            if front is not None:
                front.dropped()
            return  # the client went away; nothing to answer
        head, length = encode_head(status, parts, extra, media_type, cycle.default_headers, cycle.keep_alive)
        transport = protocol.transport
        if front is not None:
            front.sending()
        if length < _JOIN_LIMIT:
            head += parts
            transport.write(b"".join(head))
        else:
            transport.write(b"".join(head))
            for part in parts:
                transport.write(part)
        if front is not None:
            front.sent()
        if cycle is not self:
            cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()
        protocol.on_response_complete()
