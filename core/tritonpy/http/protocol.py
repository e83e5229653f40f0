"""HTTP/1.1 connection limits on top of uvicorn's two protocol implementations.

uvicorn bounds nothing in a request head: httptools accumulates a header value
piece by piece (quadratic in its size, on the event loop every client shares),
and neither implementation times out a client that sends a head or a body
slowly. The protocol classes here add, per connection:

- the request line plus headers may not exceed ``--http-max-header-size``
  bytes nor ``--http-max-header-count`` fields: answered 431 and closed as soon
  as the head crosses the limit (after the read that crossed it, never after
  buffering all of it);
- a head must arrive within ``--http-header-timeout-secs`` of its first byte
  (of the connection's opening for a first request), else 408 and closed;
- a request body that is still incomplete and sends nothing for
  ``--http-read-timeout-secs`` is dropped (408 when nothing was answered yet).

What they cost on the hot path is a few attribute updates per read and per
request: bytes of a head are counted per read only while a head is incomplete,
the exact size of a complete head is computed only when the reads that carried
it were larger than the limit, and no timer is armed for a request whose head
(or body) arrives in one read. A timer never cuts a request whose body fully
arrived, nor one waiting behind an earlier (pipelined) request on its connection.

With a front end given (``direct``), the httptools protocol also answers
inference requests itself, without an ASGI cycle (``direct.py``); the ASGI scope
of a request is then made only for one that the protocol does not answer, and the
keep-alive timeout costs one timer per timeout period instead of two timer
operations per request.

A refused connection is half-closed after the answer and what the client still
sends is read and dropped for a moment (``LINGER_SECS``), so the client reads
the answer instead of a connection reset.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from .direct import DirectInfer
from .errors import error_body
from .fastpath import InferFastPath, infer_target

try:  # uvicorn's "auto" choice: httptools when it is installed, else h11
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    HAVE_HTTPTOOLS = True
except ImportError:  # pragma: no cover - httptools comes with uvicorn[standard]
    HAVE_HTTPTOOLS = False

if TYPE_CHECKING:
    from ..options import ServerOptions
    from .inference import HttpInference

log = logging.getLogger("tritonpy.http")

#: How long a refused connection keeps reading (and dropping) what the client
#: still sends after the answer, before it is closed for good.
LINGER_SECS = 3.0
#: Most non-empty chunks one chunked request body may have (Triton's cap since 26.05:
#: a piece of a body costs more than its bytes, so tiny chunks multiply its memory).
MAX_CHUNKS = 1 << 16
TOO_MANY_CHUNKS = (
    f"Chunked request body exceeds maximum of {MAX_CHUNKS} non-empty chunks. "
    "Send fewer or larger HTTP chunks."
)

Implementation = Literal["auto", "httptools", "h11"]


@dataclass(frozen=True)
class HttpLimits:
    """The per-connection limits (a timeout of 0 or less is no timeout)."""

    max_header_size: int = 64 * 1024
    max_header_count: int = 128
    header_timeout: float = 30.0
    read_timeout: float = 60.0

    @classmethod
    def from_options(cls, options: ServerOptions) -> HttpLimits:
        return cls(
            max_header_size=options.http_max_header_size,
            max_header_count=options.http_max_header_count,
            header_timeout=options.http_header_timeout_secs,
            read_timeout=options.http_read_timeout_secs,
        )

    def too_large(self) -> str:
        return (
            f"request line and headers exceed {self.max_header_size} bytes "
            "(raise the limit with --http-max-header-size)"
        )

    def too_many(self) -> str:
        return (
            f"request has more than {self.max_header_count} header fields "
            "(raise the limit with --http-max-header-count)"
        )

    def head_too_slow(self) -> str:
        return (
            f"request line and headers did not arrive within {_seconds(self.header_timeout)} "
            "(--http-header-timeout-secs)"
        )

    def body_too_slow(self) -> str:
        return f"request body: nothing received for {_seconds(self.read_timeout)} (--http-read-timeout-secs)"


def _seconds(value: float) -> str:
    return f"{value:g} second" + ("" if value == 1 else "s")


def http_protocol(
    options: ServerOptions, implementation: Implementation = "auto", direct: HttpInference | None = None
) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` enforcing ``options``' HTTP limits.

    ``auto`` picks as uvicorn does: httptools when it is installed, else h11.
    With ``direct``, the httptools protocol answers inference requests itself
    through that front end (``direct.DirectInfer``), without an ASGI cycle.
    """
    if implementation == "auto":
        implementation = "httptools" if HAVE_HTTPTOOLS else "h11"
    if implementation == "httptools":
        if not HAVE_HTTPTOOLS:
            raise ValueError("httptools is not installed")
        base: type[_Limited] = LimitedHttpToolsProtocol
    elif implementation == "h11":
        base = LimitedH11Protocol
    else:
        raise ValueError(f"unknown HTTP implementation {implementation!r}")
    attributes: dict[str, Any] = {"limits": HttpLimits.from_options(options)}
    if implementation == "httptools":
        attributes["direct"] = direct
    return type(base.__name__, (base,), attributes)


def direct_frontend(app: object, options: ServerOptions) -> HttpInference | None:
    """The front end through which the protocol answers inference requests itself,
    or None where uvicorn's ASGI cycle must carry them: an application wrapped in
    more than the inference fast path (restricted APIs). While the access log is on
    (a verbose level, at start or set while serving) each request takes the ASGI
    cycle, which writes its line (``_access_logged``)."""
    if isinstance(app, InferFastPath):
        return app.inference
    return None


#: uvicorn's access log: one INFO line per request, on while the verbose level is
#: above 0 (``LogSettings`` sets its level, also while serving).
_ACCESS_LOG = logging.getLogger("uvicorn.access")


def _access_logged() -> bool:
    return _ACCESS_LOG.isEnabledFor(logging.INFO)  # logging caches the answer per level change


#: An inference URL (``fastpath.infer_target``'s paths: the model, then the version if
#: any) whose path is itself: no query, no fragment, nothing percent-encoded, ASCII
#: without controls or spaces, so uvicorn's ``parse_url`` and unquoting would give the
#: same path back. The model's characters are those less ``/``; a version is digits.
_plain_infer_url = re.compile(rb"/v2/models/([!-\"$&-.0->@-~]+)(?:/versions/([0-9]+))?/infer").fullmatch


def _answer(status: int, message: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A complete ``{"error": ...}`` response that closes the connection."""
    body = error_body(message)
    phrase = http.HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {phrase}\r\n".encode()]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines.append(
        b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    lines.append(body)
    return b"".join(lines)


class _Limited(asyncio.Protocol):
    """What both implementations share: timers, refusing, lingering.

    A subclass sets the connection state up in ``_setup_limits`` and says where
    its parser is (``_in_head``, ``_in_body``, ``_answering_earlier``).
    """

    limits: ClassVar[HttpLimits] = HttpLimits()

    # uvicorn's own attributes, as its protocol classes declare them
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    flow: FlowControl
    server_state: ServerState
    cycle: Any
    logger: logging.Logger

    def _setup_limits(self) -> None:
        limits = self.limits
        self._max_head = limits.max_header_size
        self._max_fields = limits.max_header_count
        #: The connection answered (or will answer) an error and reads only to drop.
        self._refused = False
        #: An error answer waiting for earlier pipelined responses to go out first.
        self._deferred: bytes | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        #: loop.time() of the last read while a body was incomplete.
        self._last_read = 0.0
        #: Non-empty chunks of the body being read (``MAX_CHUNKS``).
        self._chunk_count = 0

    def _chunk_arrived(self) -> bool:
        """Count a chunk of a chunked body whose first bytes arrived; False (the
        request refused, 400 and closed, as Triton) once there are too many."""
        self._chunk_count += 1
        if self._chunk_count <= MAX_CHUNKS:
            return True
        self._refuse(400, TOO_MANY_CHUNKS)
        return False

    # -- what a subclass says about its parser --------------------------------------

    def _in_head(self) -> bool:
        """Some bytes of a request head arrived, not all of them."""
        raise NotImplementedError

    def _in_body(self) -> bool:
        """A request head arrived, its body is not complete."""
        raise NotImplementedError

    def _answering_earlier(self) -> bool:
        """A request before the one being read is still being answered."""
        return False

    if TYPE_CHECKING:  # uvicorn's, on both classes

        def _unset_keepalive_if_required(self) -> None: ...

    # -- the asyncio protocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_head_timer()  # the first head is due this long after connecting

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._body_timer, self._linger):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self._linger = None
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self._refused and self._deferred is None:
            self.transport.close()
        else:
            super().shutdown()  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if self._deferred is not None:
            self._send_deferred()

    def _send_deferred(self) -> None:
        """Send the refusal that waited for earlier responses, once they are all out."""
        if self._deferred is not None and not self._answering_earlier():
            answer, self._deferred = self._deferred, None
            if not self.transport.is_closing():
                self._unset_keepalive_if_required()
                self._send_and_linger(answer)

    # -- timers ---------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        if self.limits.header_timeout > 0:
            self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _touch_body(self) -> None:
        """A read left a body incomplete: (re)start its idle clock.

        The timer is not cancelled when the body completes: it runs out once and
        finds nothing to do, or finds the next body's clock; so a connection
        costs one timer per timeout period, not one per request.
        """
        if self.limits.read_timeout > 0:
            self._last_read = self.loop.time()
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.limits.read_timeout, self._body_timed_out)

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._refused or self.transport.is_closing():
            return
        if self._answering_earlier():
            # Reading waits for an earlier response: not the client's delay.
            self._arm_head_timer()
        elif self._in_head():
            self._refuse(408, self.limits.head_too_slow())
        elif not self._in_body():
            self.transport.close()  # connected and sent nothing at all

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self._refused or self.transport.is_closing() or not self._in_body():
            return
        timeout = self.limits.read_timeout
        now = self.loop.time()
        idle = now - self._last_read
        if idle < timeout:
            self._body_timer = self.loop.call_later(timeout - idle, self._body_timed_out)
            return
        cycle = self.cycle
        if (
            self.flow.read_paused  # the application has not taken what came so far
            or cycle is None
            or cycle.waiting_for_100_continue  # the client waits for us
            or self._answering_earlier()
        ):
            self._last_read = now
            self._body_timer = self.loop.call_later(timeout, self._body_timed_out)
            return
        # The client stalled mid-body: the application gets a disconnect.
        started = cycle.response_started
        cycle.disconnected = True
        cycle.waiting_for_100_continue = False
        cycle.message_event.set()
        if started:
            log.info("%s: closing the connection: %s", self._peer(), self.limits.body_too_slow())
            self._refused = True
            self.transport.close()
        else:
            self._refuse(408, self.limits.body_too_slow())

    # -- refusing -------------------------------------------------------------------

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with ``message`` and close; read nothing more."""
        if self._refused:
            return
        log.info("%s: %d: %s", self._peer(), status, message)
        self._refused = True
        self._cancel_head_timer()
        self._cancel_body_timer()
        self._unset_keepalive_if_required()
        answer = _answer(status, message, self.server_state.default_headers)
        if self._answering_earlier():
            self._deferred = answer  # written once the earlier responses are out
        else:
            self._send_and_linger(answer)

    def _send_and_linger(self, answer: bytes) -> None:
        transport = self.transport
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()  # the client sees the end after the answer
        # Keep reading (and dropping): closing with unread data resets the
        # connection, and the client could lose the answer.
        self.flow.resume_reading()
        self._linger = self.loop.call_later(LINGER_SECS, transport.abort)

    def _peer(self) -> str:
        client = getattr(self, "client", None)
        return f"{client[0]}:{client[1]}" if client else "client"


class LimitedH11Protocol(_Limited, H11Protocol):
    """uvicorn's h11 protocol with the limits.

    h11 parses a head only once it is complete, searching the buffer linearly,
    and refuses one that grows past its ``max_incomplete_event_size``: that is
    set to the head limit, and its refusal answered 431. A complete head is
    measured and its fields counted when h11 hands it over.
    """

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._setup_limits()
        self._partial = False  # a head's first bytes arrived
        self.conn = _H11Connection(self)

    def _in_head(self) -> bool:
        conn = self.conn
        return self._partial and conn.their_state is h11.IDLE and conn.our_state is h11.IDLE

    def _in_body(self) -> bool:
        return self.conn.their_state is h11.SEND_BODY

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # dropped: the connection is closing
        self._unset_keepalive_if_required()
        conn = self.conn
        conn.receive_data(data)
        self.handle_events()
        if self._refused or self.transport.is_closing():
            return
        state = conn.their_state
        if state is h11.SEND_BODY:
            self._touch_body()
        elif state is h11.IDLE and conn.our_state is h11.IDLE:
            self._partial = True  # the bytes of a head, not all of them
            if self._head_timer is None:
                self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # parses what waited, if anything
        if self._partial and not self._refused and self._in_head() and self._head_timer is None:
            # A pipelined head that is not complete: its timer, not the keep-alive one.
            self._unset_keepalive_if_required()
            self._arm_head_timer()

    def _head_received(self, event: h11.Request) -> bool:
        """Check a complete head; False when it was refused."""
        self._partial = False
        self._cancel_head_timer()
        fields = event.headers
        if len(fields) > self._max_fields:
            self._refuse(431, self.limits.too_many())
            return False
        size = len(event.method) + len(event.target) + 14 + 4 * len(fields)
        size += sum(map(len, chain.from_iterable(fields)))
        if size > self._max_head:
            self._refuse(431, self.limits.too_large())
            return False
        return True


class _H11Connection(h11.Connection):
    """h11's server connection, bounded to the protocol's head limits."""

    def __init__(self, protocol: LimitedH11Protocol) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=protocol.limits.max_header_size)
        self._protocol = protocol

    def next_event(self) -> Any:
        state = self.their_state
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            # "Receive buffer too long": an incomplete event past the limit; while
            # no request is under way that event is a request head.
            if exc.error_status_hint == 431 and state is h11.IDLE:
                self._protocol._refuse(431, self._protocol.limits.too_large())
                return h11.NEED_DATA  # uvicorn stops reading events
            raise
        if type(event) is h11.Data:
            if event.chunk_start and event.data and not self._protocol._chunk_arrived():
                return h11.NEED_DATA
        elif type(event) is h11.Request:
            self._protocol._chunk_count = 0
            if not self._protocol._head_received(event):
                return h11.NEED_DATA
        elif event is h11.PAUSED:
            self._protocol._partial = True  # a pipelined request's bytes wait in the buffer
        return event


if HAVE_HTTPTOOLS:
    _IDLE, _HEAD, _BODY = 0, 1, 2

    #: A keep-alive timer finding the connection idle for all but this many seconds of
    #: the timeout closes it (the loop's clock and timers are as coarse as a millisecond).
    _TIMER_SLACK = 0.001

    class _Refused(Exception):
        """Raised in a parser callback to stop parsing a refused request."""

    class LimitedHttpToolsProtocol(_Limited, HttpToolsProtocol):
        """uvicorn's httptools protocol with the limits.

        The parser hands over each header only when complete, so the bytes of
        a head are counted per read while it is incomplete (``data_received``)
        and its fields as the parser reports them (``on_header``); a head that
        came complete within reads larger than the limit is measured exactly
        once complete (``on_headers_complete``).
        """

        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self._setup_limits()
            self._phase = _IDLE
            self._begun = 0  # messages begun on this connection
            self._head_bytes = 0  # bytes of the current head in whole reads before this one
            self._slack = 0  # size of the read the current head began in, when not at its start
            self._read_size = 0  # size of the read being parsed
            #: The last inference request taken directly; it gets the body while its cycle is current.
            self._infer: DirectInfer | None = None
            #: loop.time() of the last response when the connection has been idle since, else None.
            self._idle_since: float | None = None
            #: The keep-alive timer (uvicorn's ``timeout_keep_alive_task`` is not used).
            self._keepalive: asyncio.TimerHandle | None = None
            #: A chunk header was parsed and none of that chunk's bytes yet (``MAX_CHUNKS``).
            self._chunk_open = False

        def _in_head(self) -> bool:
            return self._phase == _HEAD

        def _in_body(self) -> bool:
            return self._phase == _BODY

        def _answering_earlier(self) -> bool:
            if self.pipeline:
                return True
            if self._phase == _BODY:
                return False  # self.cycle is the request being read
            cycle = self.cycle
            return cycle is not None and not cycle.response_complete

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # dropped: the connection is closing
            self._idle_since = None  # _unset_keepalive_if_required, inline
            phase, begun = self._phase, self._begun
            self._read_size = len(data)
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._cancel_head_timer()
                self._cancel_body_timer()
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return
            except httptools.HttpParserError:
                if not self._refused:
                    msg = "Invalid HTTP request received."
                    self.logger.warning(msg)
                    self.send_400_response(msg)
                return
            now = self._phase
            if now == _HEAD:
                if self._begun - begun == (phase == _IDLE):
                    # This whole read is part of the head under way.
                    self._head_bytes += len(data)
                    if self._head_bytes > self._max_head:
                        self._refuse(431, self.limits.too_large())
                        return
                else:
                    self._slack = len(data)  # the head began inside this read
                if self._head_timer is None:
                    self._arm_head_timer()
            elif now == _BODY:
                self._touch_body()

        # -- keep-alive -----------------------------------------------------------
        #
        # uvicorn arms a timer after each response and cancels it at the next read.
        # Here one timer is armed for an idle connection and kept: a read only marks
        # the connection busy, a response marks it idle again, and the timer, when it
        # runs out, closes a connection idle for the whole keep-alive timeout, waits
        # on for one idle for less, and is dropped for a busy one (the next response
        # arms it again). So a connection costs a timer per timeout period, not two
        # timer operations per request; it is closed when uvicorn's would be.

        def _unset_keepalive_if_required(self) -> None:
            self._idle_since = None

        def on_response_complete(self) -> None:
            # uvicorn's, with the keep-alive clock above.
            self.server_state.total_requests += 1
            if not self.transport.is_closing():
                self._idle_since = None
                flow = self.flow
                if flow.read_paused:
                    flow.resume_reading()
                if self.pipeline:
                    cycle, app = self.pipeline.pop()
                    self._start_asgi_task(cycle, app)
                else:
                    loop = self.loop
                    self._idle_since = loop.time()
                    if self._keepalive is None:
                        self._keepalive = loop.call_later(self.timeout_keep_alive, self._keepalive_expired)
            if self._deferred is not None:
                self._send_deferred()

        def _keepalive_expired(self) -> None:
            self._keepalive = None
            since = self._idle_since
            if since is None or self.transport.is_closing():
                return  # busy, or closing already
            left = since + self.timeout_keep_alive - self.loop.time()
            if left > _TIMER_SLACK:
                self._keepalive = self.loop.call_later(left, self._keepalive_expired)
            else:
                self.timeout_keep_alive_handler()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._keepalive is not None:
                self._keepalive.cancel()
                self._keepalive = None
            super().connection_lost(exc)

        # -- parser callbacks -----------------------------------------------------

        def on_message_begin(self) -> None:
            self._phase = _HEAD
            self._begun += 1
            self._head_bytes = self._slack = 0
            self._chunk_count = 0
            # uvicorn's, less its ASGI scope: that is made once the head is complete, only
            # for a request that the protocol does not answer itself (``_make_scope``).
            self.url = b""
            self.expect_100_continue = False
            self.headers = []

        def _make_scope(self) -> None:
            """uvicorn's scope of the request whose head just completed, as its
            ``on_message_begin`` makes it, with the URL and headers that came since."""
            url, headers, expect = self.url, self.headers, self.expect_100_continue
            HttpToolsProtocol.on_message_begin(self)
            self.url, self.headers, self.expect_100_continue = url, headers, expect
            self.scope["headers"] = headers

        def on_header(self, name: bytes, value: bytes) -> None:
            # uvicorn's, with the count.
            headers = self.headers
            if len(headers) >= self._max_fields:
                self._refuse(431, self.limits.too_many())
                raise _Refused
            name = name.lower()
            if name == b"expect" and value.lower() == b"100-continue":
                self.expect_100_continue = True
            headers.append((name, value))

        def on_headers_complete(self) -> None:
            # An upper bound first, from the reads that carried the head; the
            # exact size only when that bound is over the limit.
            if self._head_bytes + self._slack + self._read_size > self._max_head:
                headers = self.headers
                size = len(self.parser.get_method()) + len(self.url) + 14 + 4 * len(headers)
                size += sum(map(len, chain.from_iterable(headers)))
                if size > self._max_head:
                    self._refuse(431, self.limits.too_large())
                    raise _Refused
            self._phase = _BODY
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            frontend = self.direct
            if frontend is not None:
                # An inference request that nothing is answered before and that the ASGI
                # cycle would not treat differently: answered here, without uvicorn's
                # scope and cycle (the request is its own cycle). Every other request
                # takes uvicorn's way, where ``_start_asgi_task`` may still answer it here.
                parser = self.parser
                url = self.url
                cycle = self.cycle
                target = _plain_infer_url(url)
                if (
                    target is not None
                    and parser.get_method() == b"POST"
                    and (cycle is None or cycle.response_complete)
                    and not self.expect_100_continue
                    and not parser.should_upgrade()
                    and self.limit_concurrency is None
                    and not self.root_path
                    and not _ACCESS_LOG.isEnabledFor(logging.INFO)  # _access_logged, inline
                ):
                    model, version = target.groups(b"")
                    keep_alive = parser.get_http_version() != "1.0" and parser.should_keep_alive()
                    infer = DirectInfer(
                        self, frontend, None, model.decode(), version.decode(), url.decode(), keep_alive
                    )
                    self._infer = self.cycle = infer
                    return
            self._make_scope()
            HttpToolsProtocol.on_headers_complete(self)

        def on_message_complete(self) -> None:
            self._phase = _IDLE
            infer = self._infer
            cycle = self.cycle
            if infer is None or infer is not cycle:  # not an inference request that is its own cycle
                HttpToolsProtocol.on_message_complete(self)
                if infer is None or infer.cycle is not cycle:
                    return
            infer.body_complete()

        # -- inference requests without ASGI --------------------------------------

        #: The front end answering inference requests directly (None: all go through ASGI).
        direct: ClassVar[HttpInference | None] = None

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            frontend = self.direct
            # Not when uvicorn chose another application (its over-capacity answer).
            if (
                frontend is not None
                and app is self.app
                and not cycle.waiting_for_100_continue
                and not _access_logged()
            ):
                scope = cycle.scope
                target = infer_target(scope["path"]) if scope["method"] == "POST" else None
                if target is not None:
                    infer = self._infer = DirectInfer(self, frontend, cycle, *target)
                    if not cycle.more_body:  # it waited behind an earlier request: all of it is here
                        infer.body_complete()
                    return
            super()._start_asgi_task(cycle, app)

        def on_chunk_header(self) -> None:
            self._chunk_open = True

        def on_body(self, body: bytes) -> None:
            if self._chunk_open:  # the first bytes of a chunk (the last chunk has none)
                self._chunk_open = False
                if not self._chunk_arrived():
                    raise _Refused
            infer = self._infer
            if infer is not None and infer.cycle is self.cycle:
                infer.on_body(body)
            else:
                HttpToolsProtocol.on_body(self, body)
