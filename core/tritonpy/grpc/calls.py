"""gRPC calls over HTTP/2 streams (the gRPC over HTTP/2 protocol) for the native transport.

A ``Call`` is one stream's ``Receiver``: it checks the request headers
(content type, encoding, timeout), splits the body into length-prefixed
messages (inflating gzip or deflate ones), runs the handler in a task with a
``Context`` that offers what the servicers use of grpc.aio's, and answers with
headers, messages and trailers (``grpc-status``, ``grpc-message``), or one
Trailers-Only header block for an error before any message.

A unary method with a ``start`` (ModelInfer) runs without a task: ``start``
begins the work from the request's last frame and the call is answered from a
callback (``Call.answer``, ``Call.fail``); a reset, the deadline or the
connection's end cancel the work through what ``start`` returned. The wire is
the same as the task's (tests/grpc/test_unary_fast_path.py).

A streaming method with a ``stream_start`` (ModelStreamInfer) runs without a task
or a queue too: the call hands each request message to the ``StreamHandler`` that
``stream_start`` returned, as it arrives, while the handler has room and the stream
is not congested (else the message stays parked, its bytes keeping the stream's
window closed, as the task's queue does); the handler answers through the call
(``Streamer``). The wire is the task's (tests/grpc/test_stream_fast_path.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from ..restricted import Requirement
from .http2 import MESSAGE_OVERHEAD, Stream
from .status import Aborted, StatusCode

log = logging.getLogger("tritonpy.grpc")


class Answerer(Protocol):
    """What a ``Method.start`` answers its call through (``Call``)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def waiting(self) -> bool:
        """Whether the call still waits for its answer (not cut short, not answered)."""
        ...

    def answer(self, response: Any) -> None: ...

    def answer_encoded(self, body: bytes) -> None: ...

    def fail(self, code: StatusCode, message: str) -> None: ...


class Streamer(Protocol):
    """What a ``StreamHandler`` answers its streaming call through (``Call``); every
    method on the loop's thread, each a no-op once the call has ended."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def send_message(self, body: bytes) -> None:
        """One response message (the response headers before the first)."""
        ...

    def close(self) -> None:
        """End the call with OK (every response sent)."""
        ...

    def fail(self, code: StatusCode, message: str) -> None:
        """End the call with an error status; the handler is cancelled (``cancel``)."""
        ...

    def take(self) -> None:
        """The handler has room again: hand it the request messages parked meanwhile."""
        ...


class StreamHandler(Protocol):
    """A streaming method's work without a task (``Method.stream_start``)."""

    @property
    def room(self) -> bool:
        """Whether it takes another request message now (else the call parks it until
        the handler calls ``Streamer.take``)."""
        ...

    def message(self, data: bytes) -> None:
        """One whole request message (decompressed), in order."""
        ...

    def end(self) -> None:
        """The request stream ended, after its last message: end the call once answered."""
        ...

    def cancel(self) -> None:
        """The call was cut short (reset, deadline, the connection's end, an error status):
        cancel the work in flight; nothing more will be sent."""
        ...


#: A streaming method's work without a task: ``stream_start(context, call)`` returns the
#: handler of the call's request messages; raises nothing.
StreamStart = Callable[["Context", Streamer], StreamHandler]


#: A unary method's work without a task: ``start(data, context, call)`` begins it for the
#: request message's bytes, which it parses itself (a message that is not the request type:
#: ``call.fail(INTERNAL, DESERIALIZING)``, as when ``Method.parse`` fails), and returns what
#: cancels it (None: the call was answered already); it answers through ``call.answer`` or
#: ``call.fail``, once, on the loop's thread, and raises nothing.
Start = Callable[[bytes, "Context", Answerer], "Callable[[], None] | None"]


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC: its handler, how to parse its requests, and what it requires;
    ``start``: the handler's work begun without a task (unary only; None: the task);
    ``stream_start``: a streaming handler's without a task (None: the task)."""

    name: str
    handler: Callable[..., Any]
    parse: Callable[[bytes], Any]
    streaming: bool
    requirement: Requirement | None = None
    start: Start | None = None
    stream_start: StreamStart | None = None


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, new name (RFC 7541 6.2.2)."""
    return b"\x00" + _hpack_int(len(name)) + name + _hpack_int(len(value)) + value


def _hpack_int(value: int) -> bytes:
    # A 7-bit prefix, Huffman flag off (RFC 7541 5.1).
    if value < 127:
        return bytes((value,))
    out = bytearray((127,))
    value -= 127
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


_STATUS_200 = b"\x88"  # the static table's ":status: 200"
_CONTENT_TYPE = _literal(b"content-type", b"application/grpc")
_ACCEPT = _literal(b"grpc-accept-encoding", b"identity,deflate,gzip")
RESPONSE_HEADERS = _STATUS_200 + _CONTENT_TYPE + _ACCEPT
TRAILERS_OK = _literal(b"grpc-status", b"0")
_ENCODINGS = {b"identity": None, b"gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
#: grpc's answer to a message that is not the request type (INTERNAL).
DESERIALIZING = "Exception deserializing request!"
#: Headers that are the protocol's, not the call's metadata.
_RESERVED = {b"content-type", b"te", b"grpc-encoding", b"grpc-accept-encoding", b"grpc-timeout"}


#: The ``grpc-status`` field of each code, made once.
_STATUS_FIELDS = {code: _literal(b"grpc-status", str(code.value).encode()) for code in StatusCode}


def status_block(code: StatusCode, message: str, trailers_only: bool) -> bytes:
    """Trailers with ``code`` and the percent-encoded ``message`` (or a Trailers-Only block)."""
    block = _STATUS_FIELDS[code]
    if message:
        encoded = urllib.parse.quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~").encode()
        block += _literal(b"grpc-message", encoded)
    return RESPONSE_HEADERS + block if trailers_only else block


class Context:
    """What the servicers use of ``grpc.aio.ServicerContext``."""

    __slots__ = ("_stream", "_metadata", "_deadline")

    def __init__(self, stream: Stream, deadline: float | None) -> None:
        self._stream = stream
        self._metadata: tuple[tuple[str, str | bytes], ...] | None = None
        self._deadline = deadline

    async def abort(self, code: StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        raise Aborted(code, details)

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        if self._metadata is None:
            self._metadata = metadata_of(self._stream.headers)
        return self._metadata

    def traceparent(self) -> str:
        """The metadata's first ``traceparent`` (as ``invocation_metadata`` has it), or "",
        read from the headers without building the metadata."""
        for name, value in self._stream.headers:
            if name == b"traceparent":
                return value.decode("latin-1")
        return ""

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def peer(self) -> str:
        """The client's address as grpc writes it (``ipv4:host:port``), worked out when asked."""
        transport = self._stream.conn.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if isinstance(peer, tuple) and len(peer) >= 2:
            host = f"[{peer[0]}]" if ":" in str(peer[0]) else str(peer[0])
            return f"ipv{6 if ':' in str(peer[0]) else 4}:{host}:{peer[1]}"
        return "unknown"


def metadata_of(headers: list[tuple[bytes, bytes]]) -> tuple[tuple[str, str | bytes], ...]:
    """The call's metadata: headers that are not pseudo or protocol headers (``-bin`` ones decoded)."""
    import base64

    out: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name.startswith(b":") or name in _RESERVED:
            continue
        key = name.decode("latin-1")
        if key.endswith("-bin"):
            out.append((key, base64.b64decode(value + b"=" * (-len(value) % 4))))
        else:
            out.append((key, value.decode("latin-1")))
    return tuple(out)


class _End:
    """The request stream's end, on a streaming call's queue."""


_END = _End()


class Call:
    """One gRPC call on one HTTP/2 stream."""

    __slots__ = (
        "stream",
        "method",
        "max_message",
        "context",
        "_wbits",
        "_buf",
        "_request",
        "_queue",
        "_task",
        "_timer",
        "_timed_out",
        "_failed",
        "_started",
        "_tasks",
        "_inflight",
        "_cancel",
        "_ran",
        "_handler",
        "_parked",
        "_ending",
        "_taking",
        "_draining",
    )

    def __init__(
        self,
        stream: Stream,
        method: Method,
        max_message: int,
        wbits: int | None,
        deadline: float | None,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self.stream = stream
        self.method = method
        self.max_message = max_message
        self.context = Context(stream, deadline)
        self._wbits = wbits
        self._buf = bytearray()
        self._request: bytes | None = None
        self._queue: asyncio.Queue[tuple[bytes, int] | _End] | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timed_out = False
        self._failed = False
        self._started = False
        self._tasks = tasks
        self._inflight = False  # a ``Method.start``'s work runs, not yet answered
        self._cancel: Callable[[], None] | None = None  # what cancels that work
        self._ran = False  # the handler's work has begun (``Method.start``'s)
        self._handler: StreamHandler | None = None  # ``Method.stream_start``'s
        self._parked: deque[tuple[bytes, int]] = deque()  # messages the handler has no room for
        self._ending = False  # the request stream ended: ``take`` tells the handler after the last message
        self._taking = False  # in ``take``: what it hands on may call it again
        self._draining = False  # ``take`` waits for the stream to drain (``Stream.when_drained``)
        if deadline is not None:
            loop = stream.conn.loop
            self._timer = loop.call_at(loop.time() + max(0.0, deadline - time.monotonic()), self._expire)
        if method.streaming and method.stream_start is not None:
            self._start_stream(method.stream_start)
        elif method.streaming:
            self._queue = asyncio.Queue()
            self._start(self._run_streaming())

    # -- Receiver ------------------------------------------------------------------------

    def data(self, chunk: bytes) -> None:
        if self._failed:
            return
        buf = self._buf
        if not buf and len(chunk) >= 5 and int.from_bytes(chunk[1:5], "big") + 5 == len(chunk):
            self._message(chunk[0], chunk[5:], len(chunk))  # the common case: one whole message
            return
        buf += chunk
        while len(buf) >= 5 and not self._failed:
            length = int.from_bytes(buf[1:5], "big")
            if length > self.max_message:
                self._message(buf[0], b"", 5 + length, length)
                return
            if len(buf) < 5 + length:
                self.stream.need = 5 + length - len(buf)  # the window it needs (http2._credit)
                return
            flag, message = buf[0], bytes(buf[5 : 5 + length])
            del buf[: 5 + length]
            self._message(flag, message, 5 + length)
        self.stream.need = 5 - len(buf) if buf else 0

    def end(self) -> None:
        if self._failed:
            return
        if self._buf:
            self._fail(StatusCode.INTERNAL, "the request stream ended inside a message")
        elif self._queue is not None:
            self._queue.put_nowait(_END)
        elif self._handler is not None:
            self._ending = True
            self.take()
        elif self._request is None:
            self._fail(StatusCode.UNIMPLEMENTED, "a unary call needs exactly one request message")
        else:
            self.stream.release()  # handed to the handler: no longer the connection's to hold
            request, self._request = self._request, None
            if self.method.start is not None:
                self._start_now(request)
            else:
                self._start(self._run_unary(request))

    def reset(self, code: int) -> None:
        self._failed = True
        self._buf = bytearray()
        self.stream.need = 0
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
        if self._inflight:
            self._abandon()

    # -- requests ------------------------------------------------------------------------

    def _message(self, flag: int, message: bytes, wire: int, length: int | None = None) -> None:
        """A whole request message; ``wire``: its bytes on the stream, prefix included."""
        size = len(message) if length is None else length
        if size > self.max_message:
            self._fail(
                StatusCode.RESOURCE_EXHAUSTED,
                f"Received message larger than max ({size} vs. {self.max_message})",
            )
            return
        if flag == 1:
            if self._wbits is None:
                self._fail(StatusCode.INTERNAL, "a compressed message without grpc-encoding")
                return
            inflate = zlib.decompressobj(self._wbits)
            try:
                message = inflate.decompress(message, self.max_message + 1)
            except zlib.error as exc:
                self._fail(StatusCode.INTERNAL, f"cannot decompress the request: {exc}")
                return
            if len(message) > self.max_message or inflate.unconsumed_tail:
                self._fail(
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"Received message larger than max (over {self.max_message} bytes decompressed)",
                )
                return
        elif flag != 0:
            self._fail(StatusCode.INTERNAL, f"bad message flags {flag}")
            return
        if self._handler is not None:  # parked as in the task's queue, then taken if it has room
            self.stream.parked += wire + MESSAGE_OVERHEAD
            self._parked.append((message, wire))
            self.take()
        elif self._queue is not None:
            # Its bytes are released as the handler takes it; until then, with the others
            # queued, they keep the stream's window from reopening (http2._stream_credit).
            self.stream.parked += wire + MESSAGE_OVERHEAD
            self._queue.put_nowait((message, wire))
        elif self._request is not None:
            self._fail(StatusCode.UNIMPLEMENTED, "a unary call needs exactly one request message")
        else:
            self._request = message

    async def _requests(self) -> AsyncIterator[Any]:
        assert self._queue is not None
        parse = self.method.parse
        stream = self.stream
        while True:
            item = await self._queue.get()
            if isinstance(item, _End):
                return
            message, wire = item
            del item
            stream.release(wire)
            stream.unpark(wire + MESSAGE_OVERHEAD)
            try:
                request = parse(message)
            except Exception:  # grpc's answer to a message that is not the request type
                self._fail(StatusCode.INTERNAL, DESERIALIZING)
                return
            del message
            yield request

    # -- running ---------------------------------------------------------------------------

    def _start(self, coro: Any) -> None:
        task = self.stream.conn.loop.create_task(coro)
        self._task = task
        self._tasks.add(task)
        self.stream.working()
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self.stream.worked()  # a stream reset while the task ran stops counting only now

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the call runs on (its connection's)."""
        return self.stream.conn.loop

    @property
    def waiting(self) -> bool:
        """Whether ``Method.start``'s work still waits for its answer: not answered, and
        not cut short (a task's cancellation would have stopped the handler there)."""
        return self._inflight

    def _start_now(self, data: bytes) -> None:
        """A unary call's work through ``Method.start``: begun here, answered from a
        callback (``answer``, ``fail``); what ``_run_unary`` does, without a task."""
        start = self.method.start
        assert start is not None
        self._ran = self._inflight = True
        self.stream.working()
        cancel = start(data, self.context, self)
        if self._inflight:  # not answered at once
            self._cancel = cancel

    def _start_stream(self, stream_start: StreamStart) -> None:
        """A streaming call's work through ``Method.stream_start``: what ``_run_streaming``
        does, without a task; it counts as the task would (``Stream.working``)."""
        self._ran = self._inflight = True
        self.stream.working()
        handler = self._handler = stream_start(self.context, self)
        if self._inflight:
            self._cancel = handler.cancel

    def take(self) -> None:
        """Hand the stream handler its parked request messages while it has room and the
        stream is not congested (as the task's reader, which waits for a slot and for
        ``Stream.drained``); after the last, the request stream's end."""
        handler = self._handler
        if handler is None or self._taking:
            return  # the outer ``take`` goes on
        parked = self._parked
        stream = self.stream
        self._taking = True
        try:
            while parked and self._inflight:
                if not handler.room:
                    return  # the handler calls ``take`` when a request completes
                if stream.congested:
                    if not self._draining:
                        self._draining = True
                        stream.when_drained(self._drained)
                    return
                message, wire = parked.popleft()
                stream.release(wire)
                stream.unpark(wire + MESSAGE_OVERHEAD)
                handler.message(message)
                del message
        finally:
            self._taking = False
        if self._ending and not parked and self._inflight:
            self._ending = False
            handler.end()

    def _drained(self) -> None:
        self._draining = False
        self.take()

    def send_message(self, body: bytes) -> None:
        """The stream handler's response message, as ``_run_streaming`` sends a response
        (one over the limit ends the call RESOURCE_EXHAUSTED)."""
        if not self._inflight:
            return
        if len(body) > self.max_message:
            self.fail(
                StatusCode.RESOURCE_EXHAUSTED,
                f"Sent message larger than max ({len(body)} vs. {self.max_message})",
            )
            return
        head = None if self._started else RESPONSE_HEADERS
        self._started = True
        self.stream.send(len(body).to_bytes(5, "big") + body, None, head)

    def close(self) -> None:
        """The stream handler's end: OK, after every response (as ``_run_streaming``'s)."""
        if not self._inflight:
            return
        self._inflight = False
        self._cancel = None
        self._done()
        if self._started:
            self.stream.send(b"", TRAILERS_OK)
        else:
            self.stream.send_headers(RESPONSE_HEADERS + TRAILERS_OK, end_stream=True)
        self._access(StatusCode.OK)
        self.stream.worked()

    def answer(self, response: Any) -> None:
        """``Method.start``'s response (on the loop's thread); dropped once the call was
        cut short (reset, deadline, the connection's end)."""
        if not self._inflight:
            return
        self._inflight = False
        self._cancel = None
        try:
            body = response.SerializeToString()
        except Exception as exc:
            self.stream.worked()
            self._exception(exc)
            return
        del response
        self._reply(body)
        self.stream.worked()

    def answer_encoded(self, body: bytes) -> None:
        """``answer`` with the response message already serialized."""
        if not self._inflight:
            return
        self._inflight = False
        self._cancel = None
        self._reply(body)
        self.stream.worked()

    def fail(self, code: StatusCode, message: str) -> None:
        """``Method.start``'s error status (on the loop's thread), as an abort's; a stream
        handler's ends the call as an abort ends the task (the handler cancelled)."""
        if not self._inflight:
            return
        if self._handler is not None:
            if self._taking:
                # Inside the request's frames: the status goes out on a later turn, after
                # the rest of them (their END_STREAM included), as the task's would.
                self._failed = True
                self._abandon()
                self.loop.call_soon(self._fail, code, message)
            else:
                self._fail(code, message)
            return
        self._inflight = False
        self._cancel = None
        self._done()
        self._finish(code, message)
        self.stream.worked()

    def _abandon(self) -> None:
        """Cut short ``Method.start``'s work (as cancelling the task would): its
        request is cancelled, its answer will be dropped."""
        cancel = self._cancel
        self._inflight = False
        self._cancel = None
        if cancel is not None:
            try:
                cancel()
            except Exception as exc:  # a cancel callback's bug: not the connection's
                log.error("cancelling %s failed", self.method.name, exc_info=exc)
        self.stream.worked()

    async def _run_unary(self, data: bytes) -> None:
        try:
            request = self.method.parse(data)
        except Exception:  # grpc's answer to a message that is not the request type
            self._done()
            self._finish(StatusCode.INTERNAL, DESERIALIZING)
            return
        del data
        try:
            response = await self.method.handler(request, self.context)
            del request
            body = response.SerializeToString()
        except asyncio.CancelledError:
            self._cancelled()
            return
        except Exception as exc:  # grpc.aio's answers: the abort's status, or UNKNOWN
            self._exception(exc)
            return
        self._reply(body)

    def _reply(self, body: bytes) -> None:
        """A unary call's one response message, then OK (or RESOURCE_EXHAUSTED when
        ``body`` is larger than the limit)."""
        self._done()
        if len(body) > self.max_message:
            self._finish(
                StatusCode.RESOURCE_EXHAUSTED,
                f"Sent message larger than max ({len(body)} vs. {self.max_message})",
            )
            return
        self._started = True
        self.stream.send(len(body).to_bytes(5, "big") + body, TRAILERS_OK, RESPONSE_HEADERS)
        self._access(StatusCode.OK)

    async def _run_streaming(self) -> None:
        stream = self.stream
        try:
            responses = self.method.handler(self._requests(), self.context)
            try:
                async for response in responses:
                    body = response.SerializeToString()
                    if len(body) > self.max_message:
                        raise Aborted(
                            StatusCode.RESOURCE_EXHAUSTED,
                            f"Sent message larger than max ({len(body)} vs. {self.max_message})",
                        )
                    head = None if self._started else RESPONSE_HEADERS
                    self._started = True
                    stream.send(len(body).to_bytes(5, "big") + body, None, head)
                    await stream.drained()
            finally:
                await responses.aclose()
        except asyncio.CancelledError:
            self._cancelled()
            return
        except Exception as exc:
            self._exception(exc)
            return
        self._done()
        if self._started:
            stream.send(b"", TRAILERS_OK)
        else:
            stream.send_headers(RESPONSE_HEADERS + TRAILERS_OK, end_stream=True)
        self._access(StatusCode.OK)

    def _access(self, code: StatusCode) -> None:
        """One line per answered call at a verbose level, as the HTTP front end's access log
        (Triton logs each gRPC request at verbose level 1)."""
        if log.isEnabledFor(logging.DEBUG):
            log.debug('%s - "%s" %s', self.context.peer(), self.method.name, code.name)

    def _done(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _exception(self, exc: Exception) -> None:
        self._done()
        if isinstance(exc, Aborted):
            self._finish(exc.code, exc.details)
        else:
            log.error("unhandled error in %s", self.method.name, exc_info=exc)
            self._finish(StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")
        exc.__traceback__ = None  # its frames can hold a large request

    def _cancelled(self) -> None:
        if self._timed_out:
            self._finish(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        elif self.stream.open:  # cancelled by a server shutdown, not by the client
            self._finish(StatusCode.UNAVAILABLE, "the server is shutting down")

    def _expire(self) -> None:
        self._timer = None
        if self._task is not None and not self._task.done():
            self._timed_out = True
            self._task.cancel()
        elif self._inflight:  # as the task's cancellation would: cancel, then answer
            self._timed_out = True
            self._abandon()
            self._finish(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        elif self._task is None and not self._ran:
            self._fail(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    def _fail(self, code: StatusCode, message: str) -> None:
        """End the call now: it will not read more (a task still running is cancelled)."""
        self._failed = True
        self._done()
        self._buf = bytearray()
        self.stream.need = 0
        if self._queue is not None:  # what is queued will not be taken
            while not self._queue.empty():
                self._queue.get_nowait()
            self.stream.parked = 0
        elif self._parked:
            self._parked.clear()
            self.stream.parked = 0
        self.stream.release()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._inflight:
            self._abandon()
        self._finish(code, message)

    def _finish(self, code: StatusCode, message: str) -> None:
        self._access(code)
        if not self.stream.open:
            return
        if self._started:
            self.stream.send(b"", status_block(code, message, False))
        else:
            self._started = True
            self.stream.send_headers(status_block(code, message, True), end_stream=True)


def refuse(stream: Stream, code: StatusCode, message: str) -> None:
    """Answer a stream with a Trailers-Only error at once."""
    stream.send_headers(status_block(code, message, True), end_stream=True)


def http_error(stream: Stream, status: int) -> None:
    """Answer a request that is not gRPC with a bare HTTP status."""
    stream.send_headers(_literal(b":status", str(status).encode()), end_stream=True)


def timeout_of(value: bytes) -> float | None:
    """Seconds from a ``grpc-timeout`` value (``1S``, ``200m``...), None if malformed."""
    text = value.decode("latin-1")
    if not 2 <= len(text) <= 9 or not text[:-1].isdigit() or text[-1] not in _TIMEOUT_UNITS:
        return None
    return int(text[:-1]) * _TIMEOUT_UNITS[text[-1]]


def wbits_of(encoding: bytes | None) -> tuple[bool, int | None]:
    """(known, zlib wbits) for a ``grpc-encoding``; identity or none is (True, None)."""
    if encoding is None:
        return True, None
    if encoding not in _ENCODINGS:
        return False, None
    return True, _ENCODINGS[encoding]


__all__ = [
    "Aborted",
    "Answerer",
    "Call",
    "Context",
    "Method",
    "RESPONSE_HEADERS",
    "Start",
    "StreamHandler",
    "StreamStart",
    "Streamer",
    "TRAILERS_OK",
]
