"""HTTP/2 server connections (RFC 9113) on asyncio, for the native gRPC transport.

One ``Connection`` per TCP (or TLS) connection, an ``asyncio.Protocol`` on the
server's event loop: it checks the client preface, exchanges SETTINGS, parses
frames, keeps flow control both ways, answers PINGs, polices client pings and
sends keepalive pings as grpc core does, and hands each new stream to the
application (``app(stream)`` returns the stream's ``Receiver``). A connection
error sends GOAWAY with its code and closes the connection; a stream error
resets only that stream.

Header blocks are decoded with ``hpack``; the header blocks we send are built by
the caller (literals without indexing, so the peer's table size never matters).
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

import hpack

log = logging.getLogger("tritonpy.grpc")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0x0, 0x1, 0x2, 0x3, 0x4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x5, 0x6, 0x7, 0x8, 0x9
# Flags.
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# Error codes.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB
# Settings.
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS = 0x1, 0x2, 0x3
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = 0x4, 0x5, 0x6

MAX_WINDOW = 2**31 - 1
DEFAULT_WINDOW = 65_535
DEFAULT_FRAME = 16_384
#: The window a new stream gets (SETTINGS_INITIAL_WINDOW_SIZE: the protocol's default).
STREAM_WINDOW = DEFAULT_WINDOW
#: The window we top a stream up to as its data arrives and is taken, while the
#: connection has room (``Connection._stream_credit``; else STREAM_WINDOW).
RECV_WINDOW = 1 << 20
#: The default of ``Config.buffer_limit`` (``--grpc-connection-buffer-limit``).
CONNECTION_BUFFER_LIMIT = 1 << 26
#: The largest frame we accept.
OUR_MAX_FRAME = 1 << 20
#: Queued response bytes above which a streaming sender waits for the peer.
HIGH_WATER = 1 << 20
#: The transport's write buffer: above HIGH, the connection stops reading and producing
#: for the peer until the buffer is back under LOW; a flush writes at most WRITE_HIGH at a time.
WRITE_HIGH = 1 << 20
WRITE_LOW = 1 << 18
#: Bytes a queued request message is counted for beyond its own, against a stream's
#: ``RECV_WINDOW`` (the queue's per-message memory).
MESSAGE_OVERHEAD = 64
#: Frame types whose payload is of no use to us: dropped as it arrives, never buffered.
_KNOWN = frozenset(range(10))
#: The PING payload that follows a graceful shutdown's first GOAWAY.
_GOAWAY_PING = b"tpgoaway"
#: Seconds a connection closed for an error still reads (and drops) what the peer sends.
_LINGER = 1.0
#: grpc core's ping policing: without calls (and not permitted), a ping every 2 hours at most.
_NO_CALLS_PING_INTERVAL = 7200.0
#: Streams closed by a reset (ours while the client was still sending, or the client's)
#: whose ids are remembered, to answer the frames that may still come for them.
_CLOSED_EARLY_KEPT = 1024

#: The connection-age jitter's own generator: a server embedded in a program leaves the
#: program's global ``random`` sequence alone (and is not counted as drawing from it).
_JITTER = random.Random()


#: A frame's 9-byte header: its length (high byte, low 16 bits), type, flags, stream id.
_HEAD = struct.Struct(">BHBBL")


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame: its 9-byte header and ``payload``."""
    length = len(payload)
    return _HEAD.pack(length >> 16, length & 0xFFFF, kind, flags, stream_id) + payload


def _only_indexed(block: bytes) -> bool:
    """Whether every field of a header block is an indexed field (RFC 7541 6.1):
    decoding it leaves the dynamic table as it was."""
    pos, end = 0, len(block)
    while pos < end:
        byte = block[pos]
        if not byte & 0x80:
            return False
        pos += 1
        if byte & 0x7F == 0x7F:  # the index goes on in 7-bit groups (RFC 7541 5.1)
            while pos < end and block[pos] & 0x80:
                pos += 1
            pos += 1
    return True


_PSEUDO = {b":method", b":scheme", b":path", b":authority"}
_CONNECTION_SPECIFIC = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}


_REQUIRED = {b":method", b":scheme", b":path"}

#: A decoded header block: its fields, whether it has pseudo-headers, whether it has
#: every pseudo-header a request needs, and its content-length (-1: none).
Decoded = tuple[list[tuple[bytes, bytes]], bool, bool, int]


def _well_formed(headers: list[tuple[bytes, bytes]]) -> Decoded:
    """RFC 9113 8.2-8.3: lower-case names, known pseudo-headers once each and first,
    no connection-specific fields, ``te`` only as ``trailers``, one decimal
    ``content-length`` (``_Malformed`` otherwise)."""
    regular = False
    seen: set[bytes] = set()
    length = -1
    for name, value in headers:
        if name[:1] == b":":
            if regular or name not in _PSEUDO or name in seen:
                raise _Malformed
            seen.add(name)
        else:
            regular = True
            if (
                name != name.lower()
                or name in _CONNECTION_SPECIFIC
                or (name == b"te" and value != b"trailers")
            ):
                raise _Malformed
            if name == b"content-length":
                if not value.isdigit() or (length >= 0 and int(value) != length):
                    raise _Malformed
                length = int(value)
    return headers, bool(seen), _REQUIRED <= seen, length


class _Malformed(Exception):
    """A header list RFC 9113 forbids: a stream error."""


class ConnectionError_(Exception):
    """A connection error: GOAWAY with ``code``, then close."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Budget:
    """A token bucket: ``burst`` tokens at first and at most, ``rate`` more a second;
    ``spend`` takes one, False when none is left (burst 0: no limit)."""

    __slots__ = ("burst", "rate", "tokens", "stamp")

    def __init__(self, burst: int, rate: float, now: float) -> None:
        self.burst = burst
        self.rate = rate
        self.tokens = float(burst)
        self.stamp = now

    def spend(self, now: float) -> bool:
        if self.burst <= 0:
            return True
        tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if tokens < 1.0:
            self.tokens = tokens
            return False
        self.tokens = tokens - 1.0
        return True


class Receiver(Protocol):
    """What the application gives a stream: its request's data, end, and reset."""

    def data(self, chunk: bytes) -> None: ...

    def end(self) -> None: ...

    def reset(self, code: int) -> None: ...


App = Callable[["Stream"], Receiver]


@dataclass(slots=True)
class Config:
    """The connection's limits and keepalive policy (tritonserver's gRPC flags)."""

    max_concurrent_streams: int = 1000
    max_header_list_size: int = 16_384
    keepalive_time: float = 7200.0
    keepalive_timeout: float = 20.0
    keepalive_permit_without_calls: bool = False
    max_pings_without_data: int = 2
    min_recv_ping_interval_without_data: float = 300.0
    max_ping_strikes: int = 2
    #: Seconds a new connection has to send the client preface (grpc core's handshake timeout).
    preface_timeout: float = 120.0
    #: RST_STREAM frames a client may send (and stream errors it may provoke) in a burst, and
    #: per second after it, as a token bucket (nghttp2's defaults); 0: no limit.
    reset_burst: int = 1000
    reset_rate: float = 33.0
    #: SETTINGS frames a client may send in a burst, and per second after it; 0: no limit.
    settings_burst: int = 100
    settings_rate: float = 10.0
    #: DATA frames with no body and no END_STREAM (they do nothing but cost: the "empty
    #: frames flood", CVE-2019-9518) a client may send in a burst, and per second after it.
    empty_data_burst: int = 100
    empty_data_rate: float = 10.0
    #: Entries in one SETTINGS frame (nghttp2's limit).
    max_settings_entries: int = 32
    #: Control frames we answer (SETTINGS and PING acks, RST_STREAM) queued while the peer
    #: does not read: past this, ENHANCE_YOUR_CALM (nghttp2's max outbound acks).
    max_queued_control: int = 1000
    #: CONTINUATION frames in one header block (nghttp2's limit, CVE-2024-28182).
    max_continuations: int = 8
    #: Seconds without open streams after which the connection is closed (GOAWAY
    #: NO_ERROR); 0: never (grpc core's max_connection_idle, infinite by default).
    max_connection_idle: float = 0.0
    #: Seconds after which a connection is told to go away (graceful GOAWAY), then
    #: ``max_connection_age_grace`` more before it is closed; 0: never (grpc core's).
    max_connection_age: float = 0.0
    max_connection_age_grace: float = 0.0
    #: Bytes one connection may hold of what its client sent and no handler has taken yet,
    #: plus responses queued for the client (``--grpc-connection-buffer-limit``): at the
    #: limit no window is granted, so the client waits. One message larger than the room
    #: left may still complete (``Connection._credit``).
    buffer_limit: int = CONNECTION_BUFFER_LIMIT


class Stream:
    """One request stream: its request headers, its windows, its queued output."""

    __slots__ = (
        "id",
        "conn",
        "headers",
        "receiver",
        "send_window",
        "recv_window",
        "remote_closed",
        "local_closed",
        "_out",
        "_queued",
        "_trailers",
        "_head",
        "_drained",
        "work",
        "length",
        "held",
        "need",
        "parked",
    )

    def __init__(self, conn: Connection, stream_id: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.id = stream_id
        self.conn = conn
        self.headers = headers
        self.receiver: Receiver | None = None
        self.send_window = conn.peer_initial_window
        self.recv_window = STREAM_WINDOW
        conn._granted += STREAM_WINDOW
        self.remote_closed = False
        self.local_closed = False
        self._out: deque[memoryview] = deque()
        self._queued = 0
        self._trailers: bytes | None = None
        self._head: bytes | None = None
        self._drained: asyncio.Future[None] | None = None
        #: The handler's work: 0 none running, 1 running, 2 running after the stream was
        #: forgotten (reset): it still counts against MAX_CONCURRENT_STREAMS until it ends.
        self.work = 0
        #: The request's content-length less the DATA received so far; -1: none declared.
        self.length = -1
        #: Request bytes received and not yet released (counted in the connection's too).
        self.held = 0
        #: Bytes the receiver still needs to complete the message it is in (0: none).
        self.need = 0
        #: Bytes of whole messages queued for a streaming handler (window: RECV_WINDOW at most).
        self.parked = 0

    @property
    def wants_window(self) -> bool:
        """Whether the stream's window should be topped up: under half a new stream's, or
        under half RECV_WINDOW and less than the message in progress still needs."""
        window = self.recv_window
        return window < STREAM_WINDOW // 2 or (self.need > window and window < RECV_WINDOW // 2)

    @property
    def open(self) -> bool:
        """Whether the response can still be sent (not finished, not reset, connection up)."""
        return not self.local_closed and not self.conn.closed

    def send_headers(self, block: bytes, end_stream: bool = False) -> None:
        """A HEADERS frame now (headers precede any data, so need no window)."""
        if not self.open:
            return
        self.conn.write_headers(self.id, block, end_stream)
        if end_stream:
            self.conn.local_done(self)

    def send(self, data: bytes, trailers: bytes | None = None, headers: bytes | None = None) -> None:
        """Queue DATA (sent as the peer's windows allow) and, after it, the trailers
        (b"": end with an empty DATA frame); ``headers`` go first, in the same write."""
        if not self.open or self._trailers is not None:
            return
        conn = self.conn
        if (
            trailers
            and headers is not None
            and data
            and not self._out
            and not conn._paused
            and len(data) <= min(self.send_window, conn.send_window, conn.peer_max_frame)
            and max(len(headers), len(trailers)) <= conn.peer_max_frame
        ):  # a whole answer in one frame each way (a unary call's): what flush would write
            self._trailers = trailers
            conn.send_whole(self, headers, data, trailers)
            return
        self._head = headers
        if data:
            self._out.append(memoryview(data))
            self._queued += len(data)
            self.conn._held += len(data)
        self._trailers = trailers
        self.conn.flush(self)

    async def drained(self) -> None:
        """Wait while more than ``HIGH_WATER`` bytes are queued for the peer, or while
        the connection's writing is paused."""
        while (self._queued > HIGH_WATER or self.conn._paused) and self.open:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    @property
    def congested(self) -> bool:
        """What ``drained`` waits out: more than ``HIGH_WATER`` bytes queued for the peer,
        or the connection's writing paused (while the response can still be sent)."""
        return (self._queued > HIGH_WATER or self.conn._paused) and self.open

    def when_drained(self, callback: Callable[[], None]) -> None:
        """``drained`` for a handler without a task: ``callback()`` on a later loop turn,
        once the stream is no longer ``congested`` (or can no longer send)."""
        waiter = self._drained
        if waiter is None or waiter.done():
            waiter = self._drained = self.conn.loop.create_future()
        waiter.add_done_callback(lambda _: callback())

    def release(self, size: int = -1) -> None:
        """The receiver has handed ``size`` bytes (-1: all it holds) to the handler or
        dropped them: they stop counting against the connection's buffer limit, and
        the windows they kept closed may reopen."""
        if size < 0:
            size = self.held
        self.held -= size
        conn = self.conn
        conn._held -= size
        if conn._recv_window < conn._half:
            conn._credit(None)
        if conn._starved and conn._live_overdraft() is None:  # none, or its message is whole
            conn._refill_starved()

    def unpark(self, size: int) -> None:
        """A streaming handler took a queued message counted as ``size``: the stream's
        window may reopen."""
        self.parked -= size
        if self.wants_window and not self.remote_closed:
            self.conn._stream_credit(self)

    def reset(self, code: int) -> None:
        """RST_STREAM with ``code``; the stream is forgotten."""
        if self.local_closed and self.remote_closed:
            return
        if not self.remote_closed:
            self.conn.closed_early(self.id)
        self.local_closed = self.remote_closed = True
        self.conn.write_reset(self.id, code)
        self.conn.stream_done(self)
        self.conn.count_reset()

    def working(self) -> None:
        """The handler's work for this stream has started: until ``worked`` it counts
        against the connection's MAX_CONCURRENT_STREAMS, even if the stream is reset."""
        self.work = 1

    def worked(self) -> None:
        """The handler's work has ended."""
        if self.work == 2:
            self.conn.detached_done()
        self.work = 0

    def _wake(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None


class Connection(asyncio.Protocol):
    """The server side of one HTTP/2 connection."""

    def __init__(
        self, app: App, config: Config, on_close: Callable[[Connection], None], refuse: bool = False
    ) -> None:
        self.app = app
        self._refuse = refuse  # over the server's connection limit: GOAWAY at once
        self.config = config
        self.on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.streams: dict[int, Stream] = {}
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_max_frame = DEFAULT_FRAME
        self.send_window = DEFAULT_WINDOW
        self._recv_window = DEFAULT_WINDOW
        self._limit = max(config.buffer_limit, 2 * DEFAULT_WINDOW)
        self._half = self._limit // 2
        self._held = 0  # request bytes not yet taken by handlers, and response bytes queued
        self._granted = 0  # the open streams' receive windows, all together
        self._overdraft: Stream | None = None  # the one stream allowed past the limit
        self._starved: dict[int, Stream] = {}  # streams whose window update waits for room
        self._paused = False  # the transport's write buffer is over its high-water mark
        self._rest = 0  # payload bytes still to come of a frame taken as it arrives
        self._rest_body = 0  # of them, body bytes (what follows is padding)
        self._rest_stream: Stream | None = None  # whose body they are (None: dropped)
        self._rest_end = False  # the frame ends the stream
        self._buf = bytearray()
        self._preface = False
        self._decoder = hpack.Decoder(max_header_list_size=config.max_header_list_size)
        self._blocks: dict[bytes, Decoded] = {}
        self._last_stream = 0
        self._blocked: dict[int, Stream] = {}
        self._continuing: tuple[int, int, bytearray] | None = None  # stream id, flags, block
        self._going_away = False  # the final GOAWAY sent: no new streams
        self._shutting_down = False  # the first GOAWAY sent
        self._goaway_reason = b""
        self._goaway_timer: asyncio.TimerHandle | None = None
        self._peer_going_away = False
        #: The loop the connection runs on (made on it: a protocol's factory runs there).
        self.loop = self._loop = asyncio.get_running_loop()
        self._keepalive: asyncio.TimerHandle | None = None
        self._preface_timer: asyncio.TimerHandle | None = None
        self._ping_timeout: asyncio.TimerHandle | None = None
        self._last_ping_recv = float("-inf")
        self._ping_strikes = 0
        self._pings_without_data = 0
        # Policing (RFC 9113 10.5): handler work of streams already forgotten, the reset
        # and SETTINGS budgets, control frames answered while the peer reads nothing,
        # CONTINUATION frames of the header block being read.
        self._detached = 0
        now = self._loop.time()
        self._resets = Budget(config.reset_burst, config.reset_rate, now)
        self._settings_budget = Budget(config.settings_burst, config.settings_rate, now)
        self._empty_data = Budget(config.empty_data_burst, config.empty_data_rate, now)
        self._queued_control = 0
        self._continuations = 0
        # The most recent streams closed by a reset: True where we closed them while the
        # client was still sending (its frames in flight are dropped), False where the
        # client reset them (a frame after is a stream error, RFC 9113 5.1); and ids the
        # client skipped (never opened: a HEADERS on one is a connection error, 5.1.1).
        self._closed_early: dict[int, bool] = {}
        self._skipped: deque[tuple[int, int]] = deque(maxlen=64)
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since = now
        self._age_timer: asyncio.TimerHandle | None = None
        self.closed_event = asyncio.Event()  # closed (or closing)
        self.lost_event = asyncio.Event()  # the transport has let go of its socket

    # -- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.transport = transport
        transport.set_write_buffer_limits(WRITE_HIGH, WRITE_LOW)
        settings = b"".join(
            key.to_bytes(2, "big") + value.to_bytes(4, "big")
            for key, value in (
                (ENABLE_PUSH, 0),
                (MAX_CONCURRENT_STREAMS, self.config.max_concurrent_streams),
                (INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (MAX_FRAME_SIZE, OUR_MAX_FRAME),
                (MAX_HEADER_LIST_SIZE, self.config.max_header_list_size),
            )
        )
        window = min(self._limit, MAX_WINDOW)
        update = (window - DEFAULT_WINDOW).to_bytes(4, "big")
        self._recv_window = window
        transport.write(frame(SETTINGS, 0, 0, settings) + frame(WINDOW_UPDATE, 0, 0, update))
        if self._refuse:
            self.fail(ENHANCE_YOUR_CALM, "too many connections")
            return
        self._schedule_keepalive()
        self._preface_timer = self._loop.call_later(self.config.preface_timeout, self._no_preface)
        if self.config.max_connection_idle > 0:
            self._idle_timer = self._loop.call_later(self.config.max_connection_idle, self._check_idle)
        if self.config.max_connection_age > 0:
            # grpc core's jitter (+-10%), so that connections made together do not all go at once.
            age = self.config.max_connection_age * _JITTER.uniform(0.9, 1.1)
            self._age_timer = self._loop.call_later(age, self._too_old)

    def _no_preface(self) -> None:
        self._preface_timer = None
        if not self._preface:
            self.fail(PROTOCOL_ERROR, "no client preface in time")

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_state()
        self.lost_event.set()
        self.on_close(self)

    def pause_writing(self) -> None:
        """The transport's write buffer passed WRITE_HIGH: stop reading the socket (what
        we read makes answers) and stop producing for the peer until it drains."""
        self._paused = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self.closed:
            return
        if self.transport is not None:
            self.transport.resume_reading()
        for stream in list(self.streams.values()):
            stream._wake()
        self._flush_blocked()
        if (self._buf or self._rest) and not self._paused:
            self.data_received(b"")

    def data_received(self, data: bytes) -> None:
        """Take the frames received; while writing is paused, only buffer them (reading
        is paused too, so that is what was read already), and take them at resume.

        A DATA frame's body goes to its stream as it arrives, and the payload of a
        frame of unknown type is dropped as it arrives: only control frames are
        buffered whole (16 KiB at most, a header block's bound for HEADERS)."""
        if self.closed:
            return
        # Frames are taken from ``data`` itself; only what is left of it is copied, to
        # ``_buf``, where the next read is appended to it.
        buf: bytes | bytearray = data
        if self._buf:
            buf = self._buf
            buf += data
        if self._paused:
            if buf is data:
                self._buf += data
            return
        try:
            pos = 0
            if not self._preface:
                if len(buf) < len(PREFACE):
                    if not PREFACE.startswith(bytes(buf)):
                        raise ConnectionError_(PROTOCOL_ERROR, "bad client preface")
                    if buf is data:
                        self._buf += data
                    return
                if buf[: len(PREFACE)] != PREFACE:
                    raise ConnectionError_(PROTOCOL_ERROR, "bad client preface")
                self._preface = True
                if self._preface_timer is not None:
                    self._preface_timer.cancel()
                    self._preface_timer = None
                pos = len(PREFACE)
            end = len(buf)
            while not self.closed and not self._paused:
                if self._rest:
                    take = min(self._rest, end - pos)
                    if not take:
                        break
                    self._data_part(buf, pos, take)
                    pos += take
                    continue
                if end - pos < 9:
                    break
                high, low, kind, flags, stream_id = _HEAD.unpack_from(buf, pos)
                length = high << 16 | low
                if length > OUR_MAX_FRAME:
                    raise ConnectionError_(FRAME_SIZE_ERROR, f"frame of {length} bytes")
                stream_id &= 0x7FFFFFFF
                if end - pos - 9 < length:
                    if kind == DATA and length:
                        if flags & PADDED and end - pos < 10:
                            break  # the pad length comes first
                        pad = buf[pos + 9] if flags & PADDED else -1
                        self._data_start(flags, stream_id, length, pad)
                        pos += 9 if pad < 0 else 10
                        continue
                    if kind not in _KNOWN:
                        if self._continuing is not None:
                            raise ConnectionError_(PROTOCOL_ERROR, "expected CONTINUATION")
                        self._rest, self._rest_body, self._rest_stream = length, 0, None
                        pos += 9
                        continue
                    if length > DEFAULT_FRAME and self._oversized(kind, stream_id, length):
                        self._rest, self._rest_body, self._rest_stream = length, 0, None
                        pos += 9
                        continue
                    break  # buffered until whole (16 KiB at most, a header block's bound for HEADERS)
                payload = bytes(buf[pos + 9 : pos + 9 + length])
                pos += 9 + length
                self._frame(kind, flags, stream_id, payload)
            if self.closed:
                return
            if buf is data:
                if pos < len(data):
                    self._buf += memoryview(data)[pos:]
            else:
                del self._buf[:pos]
        except ConnectionError_ as exc:
            self.fail(exc.code, exc.message)

    def _oversized(self, kind: int, stream_id: int, length: int) -> bool:
        """A control frame over 16 KiB is coming. A header block within what
        ``_continuation`` takes is buffered (False); a larger one, a fixed-size frame
        of the wrong size, or any other is a connection error, but PRIORITY's wrong
        size is a stream error, its payload dropped as it arrives (True)."""
        if self._continuing is not None and kind != CONTINUATION:
            raise ConnectionError_(PROTOCOL_ERROR, "expected CONTINUATION")
        if kind in (HEADERS, CONTINUATION):
            if length > 2 * self.config.max_header_list_size + 1024:
                raise ConnectionError_(ENHANCE_YOUR_CALM, "header list too large")
            return False
        if kind == PRIORITY and stream_id:
            self._bad_priority(stream_id)
            return True
        if kind in (PING, RST_STREAM, WINDOW_UPDATE, PRIORITY):
            raise ConnectionError_(FRAME_SIZE_ERROR, f"frame of type {kind} of {length} bytes")
        if kind == PUSH_PROMISE:
            raise ConnectionError_(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        raise ConnectionError_(ENHANCE_YOUR_CALM, f"frame of type {kind} of {length} bytes")

    # -- frames received ---------------------------------------------------------------

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is not None and kind != CONTINUATION:
            raise ConnectionError_(PROTOCOL_ERROR, "expected CONTINUATION")
        if kind == DATA:
            self._data(flags, stream_id, payload)
        elif kind == HEADERS:
            self._headers(flags, stream_id, payload)
        elif kind == CONTINUATION:
            self._continuation(flags, stream_id, payload)
        elif kind == SETTINGS:
            self._settings(flags, stream_id, payload)
        elif kind == WINDOW_UPDATE:
            self._window_update(stream_id, payload)
        elif kind == PING:
            self._ping(flags, stream_id, payload)
        elif kind == RST_STREAM:
            self._rst_stream(stream_id, payload)
        elif kind == PRIORITY:
            if stream_id == 0:
                raise ConnectionError_(PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                self._bad_priority(stream_id)
        elif kind == GOAWAY:
            if stream_id != 0:
                raise ConnectionError_(PROTOCOL_ERROR, "GOAWAY on a stream")
            self._peer_going_away = True
            self._close_if_idle()
        elif kind == PUSH_PROMISE:
            raise ConnectionError_(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # Unknown frame types are ignored (RFC 9113 5.5).

    def _bad_priority(self, stream_id: int) -> None:
        """A PRIORITY frame of the wrong size: a stream error (RFC 9113 6.3)."""
        stream = self.streams.get(stream_id)
        if stream is not None:
            self.stream_error(stream, FRAME_SIZE_ERROR)
        else:
            self._forgotten_stream_error(stream_id, FRAME_SIZE_ERROR)

    @staticmethod
    def _unpad(flags: int, payload: bytes) -> bytes:
        if not flags & PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            raise ConnectionError_(PROTOCOL_ERROR, "padding longer than the frame")
        return payload[1 : len(payload) - payload[0]]

    def _data_target(self, stream_id: int, size: int) -> Stream | None:
        """Flow control for a DATA frame of ``size`` bytes: the stream its body goes to,
        or None when it is dropped (a closed stream, or one that overran its window)."""
        if stream_id == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "DATA on stream 0")
        self._recv_window -= size
        if self._recv_window < 0:
            raise ConnectionError_(FLOW_CONTROL_ERROR, "connection window exceeded")
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_closed:
            if stream_id > self._last_stream:
                raise ConnectionError_(PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            if stream is not None:
                self.stream_error(stream, STREAM_CLOSED)
            elif self._closed_early.get(stream_id) is False:
                # The client reset it itself: nothing may follow (RFC 9113 5.1), a stream error.
                self._forgotten_stream_error(stream_id, STREAM_CLOSED)
            # else: a stream we answered or reset; what was in flight is dropped (RFC 9113 5.4.2)
            return None
        stream.recv_window -= size
        self._granted -= size
        if stream.recv_window < 0:
            self.stream_error(stream, FLOW_CONTROL_ERROR)
            return None
        return stream

    def _data(self, flags: int, stream_id: int, payload: bytes) -> None:
        body = self._unpad(flags, payload) if flags & PADDED else payload
        if not body and not flags & END_STREAM and not self._empty_data.spend(self._loop.time()):
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too many empty DATA frames")
        size = len(payload)
        stream = self.streams.get(stream_id)
        if (
            stream is not None
            and not stream.remote_closed
            and size <= stream.recv_window
            and size <= self._recv_window
        ):  # the common case, inline
            stream.recv_window -= size
            self._recv_window -= size
            self._granted -= size
        else:
            stream = self._data_target(stream_id, size)
        if stream is not None and stream.length >= 0 and self._length_broken(stream, len(body), flags):
            stream = None
        if stream is not None:
            if body:
                size = len(body)
                stream.held += size
                self._held += size
                receiver = stream.receiver
                if receiver is not None:
                    receiver.data(body)
            if flags & END_STREAM:
                self._stream_end(stream)
            elif stream.wants_window and not stream.remote_closed:
                self._stream_credit(stream)
        if self._recv_window < self._half:
            self._credit(stream)

    def _length_broken(self, stream: Stream, size: int, flags: int) -> bool:
        """``size`` more bytes of the stream's body, against its declared content-length
        (RFC 9113 8.1.1): past it, or short of it at the stream's end, the request is
        malformed: the stream is reset (PROTOCOL_ERROR) and True."""
        stream.length -= size
        if stream.length < 0 or (flags & END_STREAM and stream.length):
            self.stream_error(stream, PROTOCOL_ERROR)
            return True
        return False

    def _stream_end(self, stream: Stream) -> None:
        stream.remote_closed = True
        self._granted -= stream.recv_window  # a window the peer can no longer use
        stream.recv_window = 0
        if stream.receiver is not None:
            stream.receiver.end()
        if stream.local_closed:
            self.stream_done(stream)

    def _data_start(self, flags: int, stream_id: int, length: int, pad: int) -> None:
        """A DATA frame of ``length`` bytes whose payload has not all arrived: its body is
        handed over as it comes (``_data_part``); ``pad``: its pad length, -1 if unpadded."""
        if self._continuing is not None:
            raise ConnectionError_(PROTOCOL_ERROR, "expected CONTINUATION")
        if pad >= length:
            raise ConnectionError_(PROTOCOL_ERROR, "padding longer than the frame")
        stream = self._data_target(stream_id, length)
        rest = length if pad < 0 else length - 1
        self._rest, self._rest_body = rest, rest - max(pad, 0)
        self._rest_stream, self._rest_end = stream, bool(flags & END_STREAM)

    def _data_part(self, buf: bytes | bytearray, pos: int, take: int) -> None:
        """``take`` bytes of the frame ``_data_start`` began, at ``buf[pos:]``."""
        body = min(take, self._rest_body)
        stream = self._rest_stream
        self._rest -= take
        self._rest_body -= body
        if stream is not None and body:
            if stream.remote_closed:  # reset meanwhile: the rest is dropped
                self._rest_stream = stream = None
            elif stream.length >= 0 and self._length_broken(stream, body, 0):
                self._rest_stream = stream = None
            else:
                stream.held += body
                self._held += body
                if stream.receiver is not None:
                    stream.receiver.data(bytes(buf[pos : pos + body]))
        if self._rest:
            return
        self._rest_stream = None
        if stream is not None and not stream.remote_closed:
            if self._rest_end:
                if stream.length < 0 or not self._length_broken(stream, 0, END_STREAM):
                    self._stream_end(stream)  # (short of its content-length: reset instead)
            elif stream.wants_window:
                self._stream_credit(stream)
        if self._recv_window < self._half:
            self._credit(stream)

    # -- receive windows: granted as what was received is taken -------------------------

    def _credit(self, stream: Stream | None) -> None:
        """Grant the connection window back up to the buffer limit less what is held.

        At the limit, a stream whose message needs more (``stream.need``) than the room
        left becomes the one overdraft stream: the window it needs is granted above the
        limit, until its message is complete (a message larger than the limit, or
        messages of several streams that would fill it together, still arrive)."""
        window = self._recv_window
        grant = self._limit - self._held - window
        had = self._overdraft
        over = self._live_overdraft()
        if had is not None and over is None and self._starved:
            self._refill_starved()  # the overdraft ended: the others' turn
        if over is None and grant < DEFAULT_WINDOW and stream is not None and stream.need > 0:
            self._overdraft = over = stream
            self._starved.pop(stream.id, None)
            if stream.wants_window:
                self._stream_credit(stream)
        if over is not None:
            grant = max(grant, over.need - window)
        grant = min(grant, MAX_WINDOW - window)
        if grant <= 0 or (grant < DEFAULT_WINDOW and window >= DEFAULT_WINDOW):
            return  # nothing to grant, or the peer still has room: grant more at once later
        self._recv_window = window + grant
        self._write(frame(WINDOW_UPDATE, 0, 0, grant.to_bytes(4, "big")))

    def _stream_credit(self, stream: Stream) -> None:
        """Top the stream's window up (it ``wants_window``): to RECV_WINDOW
        while all the streams' windows and what the connection holds stay within the
        buffer limit, else to STREAM_WINDOW, as a new stream's. Not while the stream's
        handler has RECV_WINDOW bytes of messages still to take, nor while another
        stream is the overdraft one (its window must not go to others): then later,
        as they are taken (``Stream.unpark``) or the overdraft ends."""
        over = self._live_overdraft()
        if stream.parked >= RECV_WINDOW or (over is not None and stream is not over):
            self._starved[stream.id] = stream
            return
        window = stream.recv_window
        grant = RECV_WINDOW - window
        if grant <= 0:
            return
        if stream is not over and self._held + self._granted + grant > self._limit:
            grant = STREAM_WINDOW - window
            if grant <= 0:
                self._starved[stream.id] = stream
                return
        stream.recv_window = window + grant
        self._granted += grant
        self._write(frame(WINDOW_UPDATE, 0, stream.id, grant.to_bytes(4, "big")))

    def _live_overdraft(self) -> Stream | None:
        """The overdraft stream while its message is incomplete; one whose message is
        whole (or that ended) is let go here."""
        over = self._overdraft
        if over is not None and (over.need <= 0 or over.remote_closed):
            self._overdraft = over = None
        return over

    def _refill_starved(self) -> None:
        starved, self._starved = self._starved, {}
        for stream in starved.values():
            if not stream.remote_closed and stream.wants_window:
                self._stream_credit(stream)

    def _headers(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "HEADERS on stream 0")
        block = self._unpad(flags, payload)
        if flags & PRIORITY_FLAG:
            if len(block) < 5:
                raise ConnectionError_(FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            block = block[5:]
        if flags & END_HEADERS:
            self._header_block(stream_id, flags, block)
        else:
            self._continuing = (stream_id, flags, bytearray(block))
            self._continuations = 0

    def _continuation(self, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is None or self._continuing[0] != stream_id:
            raise ConnectionError_(PROTOCOL_ERROR, "unexpected CONTINUATION")
        block = self._continuing[2]
        block += payload
        # Empty CONTINUATION frames grow no block: count them (CVE-2024-28182).
        self._continuations += 1
        if self._continuations > self.config.max_continuations:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too many CONTINUATION frames")
        # An encoded list can be somewhat larger than the decoded one, not without bound.
        if len(block) > 2 * self.config.max_header_list_size + 1024:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "header list too large")
        if flags & END_HEADERS:
            first_flags = self._continuing[1]
            self._continuing = None
            self._header_block(stream_id, first_flags, bytes(block))

    def _decode(self, block: bytes) -> Decoded:
        """The block's header list (``_Malformed`` if RFC 9113 8.2 forbids it).

        A client sends the same block with each call (perf_analyzer, any client
        with fixed metadata), all indexed fields once its table holds them: such
        a block means the same until the dynamic table changes, which only a
        block with other fields can do, so its list is kept."""
        cached = self._blocks.get(block)
        if cached is not None:
            return cached
        headers: list[tuple[bytes, bytes]] = list(self._decoder.decode(block, raw=True))
        if not _only_indexed(block):
            self._blocks.clear()  # the block may have changed the dynamic table
        decoded = _well_formed(headers)
        if _only_indexed(block):
            if len(self._blocks) >= 64:
                self._blocks.clear()
            self._blocks[block] = decoded
        return decoded

    def _header_block(self, stream_id: int, flags: int, block: bytes) -> None:
        try:
            headers, pseudo, request, length = self._decode(block)
        except _Malformed:
            # Malformed: no request (a stream error) and, as trailers, refused (pseudo).
            headers, pseudo, request, length = [], True, False, -1
        except hpack.OversizedHeaderListError:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "header list too large") from None
        except hpack.HPACKError as exc:
            raise ConnectionError_(COMPRESSION_ERROR, f"bad header block: {exc}") from None
        end = bool(flags & END_STREAM)
        stream = self.streams.get(stream_id)
        if stream is not None:  # trailers: no pseudo-headers, after all the declared content
            if stream.remote_closed or not end or pseudo or stream.length > 0:
                self.stream_error(stream, PROTOCOL_ERROR)
                return
            stream.remote_closed = True
            if stream.receiver is not None:
                stream.receiver.end()
            if stream.local_closed:
                self.stream_done(stream)
            return
        if stream_id % 2 == 0:
            raise ConnectionError_(PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
        if stream_id <= self._last_stream:
            self._closed_stream_headers(stream_id)
            return
        if stream_id > self._last_stream + 2:  # ids skipped: closed without being opened (5.1.1)
            self._skipped.append((self._last_stream + 2, stream_id - 2))
        self._last_stream = stream_id
        if not request or (end and length > 0):
            # A malformed request (RFC 9113 8.1.1, 8.3.1): a stream error.
            if not end:
                self.closed_early(stream_id)
            self._forgotten_stream_error(stream_id, PROTOCOL_ERROR)
            return
        if self._going_away or len(self.streams) + self._detached >= self.config.max_concurrent_streams:
            if not end:
                self.closed_early(stream_id)
            self.write_reset(stream_id, REFUSED_STREAM)
            return
        stream = Stream(self, stream_id, headers)
        stream.length = length
        self.streams[stream_id] = stream
        stream.remote_closed = end
        receiver = self.app(stream)
        if stream.local_closed:  # answered at once (an error)
            return
        stream.receiver = receiver
        if end:
            receiver.end()

    def _closed_stream_headers(self, stream_id: int) -> None:
        """HEADERS on a stream id at or below the largest the client opened (RFC 9113 5.1)."""
        ours = self._closed_early.get(stream_id)
        if ours:
            return  # trailers in flight on a stream we answered or reset: decoded (HPACK), dropped
        if ours is not None:  # the client reset it: a stream error
            self._forgotten_stream_error(stream_id, STREAM_CLOSED)
            return
        for low, high in self._skipped:
            if low <= stream_id <= high:
                raise ConnectionError_(
                    PROTOCOL_ERROR, f"new stream {stream_id} below the last one, {self._last_stream}"
                )
        # A stream the client ended: nothing may follow (RFC 9113 5.1, closed).
        raise ConnectionError_(STREAM_CLOSED, f"HEADERS on closed stream {stream_id}")

    def stream_error(self, stream: Stream, code: int) -> None:
        """A stream error: RST_STREAM with ``code``, and the call is told."""
        stream.reset(code)
        if stream.receiver is not None:
            stream.receiver.reset(code)

    def _forgotten_stream_error(self, stream_id: int, code: int) -> None:
        """A stream error on a stream not open (never opened, or already forgotten):
        RST_STREAM with ``code``, spending the reset budget as ``Stream.reset`` does."""
        self.write_reset(stream_id, code)
        self.count_reset()

    def closed_early(self, stream_id: int, ours: bool = True) -> None:
        """We close a stream the client is still sending on (``ours``: what it has in flight
        is dropped), or the client resets one."""
        early = self._closed_early
        if len(early) >= _CLOSED_EARLY_KEPT:
            del early[next(iter(early))]
        early[stream_id] = ours

    def count_reset(self) -> None:
        """One more stream reset by the client, or by us for its error: past the budget
        (a rapid reset, CVE-2023-44487; or a MadeYouReset), GOAWAY ENHANCE_YOUR_CALM."""
        if not self._resets.spend(self._loop.time()):
            self.fail(ENHANCE_YOUR_CALM, "too many stream resets")

    def detached_done(self) -> None:
        """The handler of a stream already forgotten has ended."""
        if not self.closed:
            self._detached -= 1

    def _settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id != 0:
            raise ConnectionError_(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ConnectionError_(FRAME_SIZE_ERROR, "SETTINGS ack with a payload")
            return
        if len(payload) % 6:
            raise ConnectionError_(FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6")
        if not self._settings_budget.spend(self._loop.time()):
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too many SETTINGS frames")
        if len(payload) > 6 * self.config.max_settings_entries:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too many entries in a SETTINGS frame")
        window = self.peer_initial_window
        for at in range(0, len(payload), 6):
            key = int.from_bytes(payload[at : at + 2], "big")
            value = int.from_bytes(payload[at + 2 : at + 6], "big")
            if key == INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionError_(FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE too large")
                window = value
            elif key == MAX_FRAME_SIZE:
                if not DEFAULT_FRAME <= value <= 16_777_215:
                    raise ConnectionError_(PROTOCOL_ERROR, f"MAX_FRAME_SIZE {value}")
                self.peer_max_frame = value
            elif key == ENABLE_PUSH and value > 1:
                raise ConnectionError_(PROTOCOL_ERROR, f"ENABLE_PUSH {value}")
            # HEADER_TABLE_SIZE: our header blocks never index, so any size suits them.
        # The windows change once a frame, by the last INITIAL_WINDOW_SIZE in it.
        delta = window - self.peer_initial_window
        if delta:
            self.peer_initial_window = window
            for stream in self.streams.values():
                stream.send_window += delta
                if stream.send_window > MAX_WINDOW:
                    raise ConnectionError_(FLOW_CONTROL_ERROR, "stream window overflow")
        self._write_control(frame(SETTINGS, ACK, 0))
        if delta > 0:
            self._flush_blocked()

    def _window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong length")
        increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                raise ConnectionError_(PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
            if self.send_window > MAX_WINDOW:
                raise ConnectionError_(FLOW_CONTROL_ERROR, "connection window overflow")
            self._flush_blocked()
            return
        stream = self.streams.get(stream_id)
        if stream is None:
            if stream_id > self._last_stream:
                raise ConnectionError_(PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
            return
        if increment == 0:
            self.stream_error(stream, PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self.stream_error(stream, FLOW_CONTROL_ERROR)
            return
        if stream.id in self._blocked:
            del self._blocked[stream.id]
            self.flush(stream)

    def _ping(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id != 0:
            raise ConnectionError_(PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ConnectionError_(FRAME_SIZE_ERROR, "PING of the wrong length")
        if flags & ACK:
            if payload == _GOAWAY_PING:
                self._final_goaway()
                return
            if self._ping_timeout is not None:
                self._ping_timeout.cancel()
                self._ping_timeout = None
            return
        # grpc core's policy: pings closer together than allowed are strikes; too many, GOAWAY.
        now = time.monotonic()
        config = self.config
        if not self.streams and not config.keepalive_permit_without_calls:
            interval = _NO_CALLS_PING_INTERVAL
        else:
            interval = config.min_recv_ping_interval_without_data
        if now - self._last_ping_recv < interval:
            self._ping_strikes += 1
        self._last_ping_recv = now
        self._write_control(frame(PING, ACK, 0, payload))
        if config.max_ping_strikes and self._ping_strikes > config.max_ping_strikes:
            raise ConnectionError_(ENHANCE_YOUR_CALM, "too_many_pings")

    def _rst_stream(self, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise ConnectionError_(PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ConnectionError_(FRAME_SIZE_ERROR, "RST_STREAM of the wrong length")
        if stream_id > self._last_stream:
            raise ConnectionError_(PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
        stream = self.streams.get(stream_id)
        if stream is None:
            return  # a stream already closed: nothing to cancel, nothing counted
        self.count_reset()
        if self.closed:
            return
        self.closed_early(stream_id, ours=False)
        stream.local_closed = stream.remote_closed = True
        self.stream_done(stream)
        if stream.receiver is not None:
            stream.receiver.reset(int.from_bytes(payload, "big"))

    # -- sending ---------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def _write_control(self, data: bytes) -> None:
        """A frame answering the peer's (an ack, a RST_STREAM): counted while our
        output waits for the peer to read, so that a peer that sends without reading
        cannot queue answers without bound (GOAWAY ENHANCE_YOUR_CALM past the limit)."""
        transport = self.transport
        if self.closed or transport is None:
            return
        if not transport.get_write_buffer_size():
            self._queued_control = 0
        else:
            self._queued_control += 1
            if self._queued_control > self.config.max_queued_control:
                self.fail(ENHANCE_YOUR_CALM, "too many control frames unread")
                return
        transport.write(data)

    def _header_frames(self, stream_id: int, block: bytes, end_stream: bool) -> bytes:
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        max_frame = self.peer_max_frame
        if len(block) <= max_frame:
            return frame(HEADERS, flags, stream_id, block)
        parts = [block[at : at + max_frame] for at in range(0, len(block), max_frame)]
        out = [frame(HEADERS, flags & ~END_HEADERS, stream_id, parts[0])]
        out += [frame(CONTINUATION, 0, stream_id, part) for part in parts[1:-1]]
        out.append(frame(CONTINUATION, END_HEADERS, stream_id, parts[-1]))
        return b"".join(out)

    def write_headers(self, stream_id: int, block: bytes, end_stream: bool) -> None:
        self._write(self._header_frames(stream_id, block, end_stream))
        self._last_ping_recv = float("-inf")
        self._ping_strikes = 0
        self._pings_without_data = 0

    def local_done(self, stream: Stream) -> None:
        """Our side of ``stream`` has ended (its END_STREAM was sent)."""
        self._blocked.pop(stream.id, None)
        stream.local_closed = True
        stream.work = 0  # the handler answered: what is left of its task is not counted
        stream._wake()
        if not stream.remote_closed:
            # We answered before the client finished sending: tell it to stop (RFC 9113 8.1).
            self.write_reset(stream.id, NO_ERROR)
            self.closed_early(stream.id)
            stream.remote_closed = True
        self.stream_done(stream)

    def write_reset(self, stream_id: int, code: int) -> None:
        self._write_control(frame(RST_STREAM, 0, stream_id, code.to_bytes(4, "big")))

    def send_whole(self, stream: Stream, headers: bytes, data: bytes, trailers: bytes) -> None:
        """``flush`` of a stream's whole answer (``Stream.send``: nothing queued before it,
        writing not paused, ``data`` within the windows and a frame, each header block
        within a frame): HEADERS, one DATA, trailers, in one write."""
        sid = stream.id
        size = len(data)
        stream.send_window -= size
        self.send_window -= size
        head = _HEAD.pack
        self._write(
            b"".join(
                (
                    head(len(headers) >> 16, len(headers) & 0xFFFF, HEADERS, END_HEADERS, sid),
                    headers,
                    head(size >> 16, size & 0xFFFF, DATA, 0, sid),
                    data,
                    head(len(trailers) >> 16, len(trailers) & 0xFFFF, HEADERS, END_HEADERS | END_STREAM, sid),
                    trailers,
                )
            )
        )
        self._last_ping_recv = float("-inf")
        self._ping_strikes = 0
        self._pings_without_data = 0
        self.local_done(stream)
        if self._recv_window < self._half:
            self._credit(None)

    def flush(self, stream: Stream) -> None:
        """Send what the windows allow of the stream's queued data, then its trailers;
        while writing is paused, nothing (the stream waits for ``resume_writing``)."""
        if self._paused:
            self._blocked[stream.id] = stream
            return
        out: list[bytes] = []
        if stream._head is not None:
            out.append(self._header_frames(stream.id, stream._head, False))
            stream._head = None
        queue = stream._out
        sent = 0
        cut = WRITE_HIGH
        while queue:
            window = min(stream.send_window, self.send_window)
            if window <= 0:
                break
            chunk = queue[0]
            size = min(len(chunk), window, self.peer_max_frame)
            out.append(frame(DATA, 0, stream.id, bytes(chunk[:size])))
            if size == len(chunk):
                queue.popleft()
            else:
                queue[0] = chunk[size:]
            stream.send_window -= size
            self.send_window -= size
            sent += size
            if sent >= cut and queue:  # WRITE_HIGH at a time, while the transport takes them
                self._write(b"".join(out))
                out, cut = [], sent + WRITE_HIGH
                if self._paused or self.closed:
                    break
        stream._queued -= sent
        self._held -= sent
        done = not queue and stream._trailers is not None
        if done:
            if stream._trailers:
                out.append(self._header_frames(stream.id, stream._trailers, True))
            else:
                out.append(frame(DATA, END_STREAM, stream.id))
        if out:
            self._write(b"".join(out))
        if out or sent:
            self._last_ping_recv = float("-inf")
            self._ping_strikes = 0
            self._pings_without_data = 0
        if done:
            self.local_done(stream)
        elif queue:
            self._blocked[stream.id] = stream
        if stream._queued <= HIGH_WATER:
            stream._wake()
        if sent and self._recv_window < self._half:
            self._credit(None)

    def _flush_blocked(self) -> None:
        for stream in list(self._blocked.values()):
            if self._paused:
                return
            if self.send_window <= 0 and stream._out and stream._head is None:
                continue  # it waits for window
            del self._blocked[stream.id]
            self.flush(stream)

    def stream_done(self, stream: Stream) -> None:
        """Forget a stream both sides have finished (or that was reset)."""
        if stream.local_closed and stream.remote_closed:
            if self.streams.pop(stream.id, None) is not None:
                if stream.work == 1:  # reset while its handler runs: counted until it ends
                    stream.work = 2
                    self._detached += 1
                if not self.streams and self._idle_timer is not None:
                    self._idle_since = self._loop.time()
                self._granted -= stream.recv_window
                stream.recv_window = 0
            self._blocked.pop(stream.id, None)
            if stream is self._overdraft:
                self._overdraft = None
                if self._starved:
                    self._refill_starved()
            if self._starved:
                self._starved.pop(stream.id, None)
            if stream._queued or stream.held:
                if stream._queued:  # reset with a response still queued: dropped
                    self._held -= stream._queued
                    stream._queued = 0
                    stream._out.clear()
                stream.release()
            stream._wake()
            self._close_if_idle()

    # -- lifetime --------------------------------------------------------------------

    def shutdown(self, reason: bytes = b"") -> None:
        """Graceful GOAWAY (RFC 9113 6.8): first with the largest stream id and a
        PING, so streams the client is sending now are still taken; at the PING's
        ack (or after a second) the final one with the last stream taken. The
        connection closes once its streams have finished. ``reason``: the GOAWAYs'
        debug data (grpc core's "max_idle", "max_age")."""
        if self.closed or self._shutting_down:
            return
        self._shutting_down = True
        self._goaway_reason = reason
        goaway = MAX_WINDOW.to_bytes(4, "big") + NO_ERROR.to_bytes(4, "big") + reason
        self._write(frame(GOAWAY, 0, 0, goaway) + frame(PING, 0, 0, _GOAWAY_PING))
        self._goaway_timer = self._loop.call_later(1.0, self._final_goaway)

    def _final_goaway(self) -> None:
        if self._goaway_timer is not None:
            self._goaway_timer.cancel()
            self._goaway_timer = None
        if self.closed or self._going_away:
            return
        self._going_away = True
        goaway = self._last_stream.to_bytes(4, "big") + NO_ERROR.to_bytes(4, "big") + self._goaway_reason
        self._write(frame(GOAWAY, 0, 0, goaway))
        self._close_if_idle()

    def fail(self, code: int, message: str) -> None:
        """A connection error: GOAWAY with ``code`` and ``message``, then close."""
        if self.closed:
            return
        log.info("closing a gRPC connection: %s", message)
        goaway = self._last_stream.to_bytes(4, "big") + code.to_bytes(4, "big") + message.encode()
        self._write(frame(GOAWAY, 0, 0, goaway))
        transport = self.transport
        self._close_state()  # nothing more is read or answered; calls are cancelled
        if transport is None:
            return
        # Closing with the peer's bytes unread would send RST, and a RST can discard
        # the GOAWAY before the peer reads it: end our side, read and drop for a
        # moment, then close.
        if self._paused:  # reading was paused with writing: drop what comes, as below
            transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self._loop.call_later(_LINGER, transport.close)

    def abort(self, graceful: bool = False) -> None:
        """Close now; calls still running are cancelled."""
        if self.transport is not None:
            if not graceful:
                self.transport.abort()
            elif not self.transport.is_closing():
                self.transport.close()
        self._close_state()

    def _check_idle(self) -> None:
        """grpc core's max_connection_idle: no stream for that long, a graceful GOAWAY."""
        self._idle_timer = None
        if self.closed or self._shutting_down:
            return
        idle = self.config.max_connection_idle
        now = self._loop.time()
        at = now + idle if self.streams else self._idle_since + idle
        if at <= now:
            log.info("closing a gRPC connection: idle for %g s", idle)
            self.shutdown(b"max_idle")
            return
        self._idle_timer = self._loop.call_at(at, self._check_idle)

    def _too_old(self) -> None:
        """grpc core's max_connection_age: a graceful GOAWAY, then, after the grace
        (if any), close with the calls still running cancelled."""
        self._age_timer = None
        if self.closed:
            return
        log.info("closing a gRPC connection: older than %g s", self.config.max_connection_age)
        self.shutdown(b"max_age")
        if self.config.max_connection_age_grace > 0:
            self._age_timer = self._loop.call_later(self.config.max_connection_age_grace, self.abort)

    def _close_if_idle(self) -> None:
        if (self._going_away or self._peer_going_away) and not self.streams and not self.closed:
            self.abort(graceful=True)

    def _close_state(self) -> None:
        if self.closed:
            return
        self.closed = True
        handles = (
            self._keepalive,
            self._ping_timeout,
            self._preface_timer,
            self._goaway_timer,
            self._idle_timer,
            self._age_timer,
        )
        for handle in handles:
            if handle is not None:
                handle.cancel()
        streams, self.streams = self.streams, {}
        self._blocked.clear()
        self._starved.clear()
        self._overdraft = self._rest_stream = None
        self._granted = 0
        for stream in streams.values():
            stream.local_closed = stream.remote_closed = True
            stream._wake()
            if stream.receiver is not None:
                stream.receiver.reset(CANCEL)
        self._buf = bytearray()
        self.closed_event.set()

    # -- keepalive -------------------------------------------------------------------

    def _schedule_keepalive(self) -> None:
        if self.config.keepalive_time > 0:
            self._keepalive = self._loop.call_later(self.config.keepalive_time, self._send_keepalive)

    def _send_keepalive(self) -> None:
        if self.closed:
            return
        config = self.config
        # grpc core's --grpc-http2-max-pings-without-data: no more pings until data is sent.
        limit = config.max_pings_without_data
        quiet = limit > 0 and self._pings_without_data >= limit
        if (self.streams or config.keepalive_permit_without_calls) and not quiet:
            self._pings_without_data += 1
            self._write(frame(PING, 0, 0, b"tpkeepal"))
            if self._ping_timeout is None:
                self._ping_timeout = self._loop.call_later(self.config.keepalive_timeout, self._unresponsive)
        self._schedule_keepalive()

    def _unresponsive(self) -> None:
        self._ping_timeout = None
        log.info("closing a gRPC connection: no keepalive ping ack")
        self.abort()
