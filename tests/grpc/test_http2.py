"""``http2.Connection`` in process, with a fake transport: header blocks decode to
what the client's HPACK encoder encoded, however its dynamic table moves."""

from __future__ import annotations

import asyncio
import random

import hpack
from tritonpy.grpc import http2
from tritonpy_h2 import FakeTransport


class Ignore:
    def data(self, chunk: bytes) -> None:
        pass

    def end(self) -> None:
        pass

    def reset(self, code: int) -> None:
        pass


def test_header_blocks_follow_the_dynamic_table() -> None:
    async def run() -> None:
        seen: list[list[tuple[bytes, bytes]]] = []

        def app(stream: http2.Stream) -> http2.Receiver:
            seen.append(list(stream.headers))
            stream.send_headers(b"\x88", end_stream=True)
            return Ignore()

        conn = http2.Connection(app, http2.Config(), lambda c: None)
        conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        encoder = hpack.Encoder()
        encoder.header_table_size = 256  # small: entries are evicted as new ones come
        rng = random.Random(7)
        # A request needs :method, :scheme and :path (RFC 9113 8.3.1).
        request = [(":method", "POST"), (":scheme", "http"), (":path", "/a")]
        pool = [[*request, ("x-key", f"v{i}"), ("x-other", "o" * (i % 5) * 20)] for i in range(6)]
        conn.data_received(http2.PREFACE + http2.frame(http2.SETTINGS, 0, 0))
        sent = []
        for n in range(300):
            headers = rng.choice(pool)
            sent.append([(k.encode(), v.encode()) for k, v in headers])
            block = encoder.encode(headers)
            conn.data_received(http2.frame(http2.HEADERS, 0x5, 2 * n + 1, block))
        assert seen == sent
        conn.abort()

    asyncio.run(run())


def test_only_indexed() -> None:
    assert http2._only_indexed(b"\x82\x86\x84")
    assert http2._only_indexed(b"\xff\x80\x01\x82")  # index 255: a multi-byte integer
    assert not http2._only_indexed(b"\x82\x40\x01a\x01b")  # a literal with indexing
    assert not http2._only_indexed(b"\x20")  # a table size update


def test_a_connection_without_preface_is_closed() -> None:
    async def run() -> None:
        def app(stream: http2.Stream) -> http2.Receiver:
            raise AssertionError("no stream expected")

        conn = http2.Connection(app, http2.Config(preface_timeout=0.05), lambda c: None)
        transport = FakeTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(http2.PREFACE[:10])  # a start, never finished
        await asyncio.sleep(0.2)
        assert conn.closed
        assert http2.frame(http2.GOAWAY, 0, 0, b"")[3:4] in bytes(transport.out)
        assert b"no client preface in time" in bytes(transport.out)

    asyncio.run(run())


def test_a_whole_answer_is_written_as_flush_writes_it() -> None:
    """``Stream.send`` of a whole answer within the windows and frames (``send_whole``: one
    write) puts the bytes the general ``flush`` puts on the wire, and leaves the stream and
    the windows as it does; a body over the peer's window or frame size, or a paused
    connection, takes the general path."""

    async def run() -> None:
        headers, trailers = b"\x88" + b"h" * 40, b"\x00\x0bgrpc-status\x010"
        request = hpack.Encoder().encode([(":method", "POST"), (":scheme", "http"), (":path", "/a")])

        def answer(body: bytes, whole: bool, max_frame: int = http2.DEFAULT_FRAME, paused: bool = False):  # type: ignore[no-untyped-def]
            streams: list[http2.Stream] = []

            def app(stream: http2.Stream) -> http2.Receiver:
                streams.append(stream)
                return Ignore()

            conn = http2.Connection(app, http2.Config(), lambda c: None)
            transport = FakeTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            conn.data_received(http2.PREFACE + http2.frame(http2.SETTINGS, 0, 0))
            conn.data_received(http2.frame(http2.HEADERS, 0x5, 1, request))
            conn.peer_max_frame = max_frame
            transport.out.clear()
            stream = streams[0]
            calls: list[str] = []
            real = conn.send_whole
            conn.send_whole = lambda *a: (calls.append("whole"), real(*a))[1]  # type: ignore[method-assign]
            if not whole:  # the general path: headers, data and trailers through flush
                stream._head = headers
                stream._out.append(memoryview(body))
                stream._queued += len(body)
                conn._held += len(body)
                stream._trailers = trailers
                conn.flush(stream)
            else:
                conn._paused = paused
                stream.send(body, trailers, headers)
                conn._paused = False
                if paused:
                    conn._flush_blocked()
            state = (stream.local_closed, stream.send_window, conn.send_window, conn._held, stream._queued)
            return bytes(transport.out), state, calls, conn.streams

        for size in (10, 1000, http2.DEFAULT_FRAME, http2.DEFAULT_WINDOW + 10):
            body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            general, general_state, _, _ = answer(body, whole=False)
            got, state, calls, streams = answer(body, whole=True)
            assert got == general and state == general_state, size
            assert calls == (["whole"] if size <= http2.DEFAULT_FRAME else []), size
            assert bool(streams) == (size > http2.DEFAULT_WINDOW)  # answered: forgotten
        small = b"y" * 100
        general, general_state, _, _ = answer(small, whole=False, max_frame=http2.DEFAULT_FRAME)
        got, state, calls, _ = answer(small, whole=True, paused=True)  # flushed at resume instead
        assert got == general and state == general_state and calls == []

    asyncio.run(run())
