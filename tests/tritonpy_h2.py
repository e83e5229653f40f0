"""A frame-level HTTP/2 client on a blocking socket, for tests that send what a
well-behaved client (``h2``) will not: floods, resets, odd stream ids."""

from __future__ import annotations

import select
import socket
import time
from typing import Any

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x9
END_STREAM = ACK = 0x1
END_HEADERS = 0x4

Frame = tuple[int, int, int, bytes]  # type, flags, stream id, payload


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


def grpc_request(path: str, extra: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *(extra or []),
    ]


class RawH2:
    """Sends frames as given; reads and parses what the server sends."""

    def __init__(self, port: int, timeout: float = 10.0, rcvbuf: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connecting: it bounds the window the kernel offers
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.encoder = hpack.Encoder()
        self.buf = b""
        self.frames: list[Frame] = []
        self.closed = False
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))

    def close(self) -> None:
        self.sock.close()

    def send(self, *frames: bytes) -> None:
        self.sock.sendall(b"".join(frames))

    def headers(
        self,
        stream_id: int,
        headers: list[tuple[str, str]],
        end_stream: bool = False,
        flags: int = END_HEADERS,
    ) -> bytes:
        block = self.encoder.encode(headers)
        return frame(HEADERS, flags | (END_STREAM if end_stream else 0), stream_id, block)

    @staticmethod
    def message(stream_id: int, body: bytes = b"", end_stream: bool = True) -> bytes:
        """One gRPC message in one DATA frame."""
        return frame(DATA, END_STREAM if end_stream else 0, stream_id, len(body).to_bytes(5, "big") + body)

    def read(self) -> bool:
        """Read what is there (blocking for some); False once the server has closed."""
        if self.closed:
            return False
        try:
            chunk = self.sock.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        pos = 0
        while len(self.buf) - pos >= 9:
            length = int.from_bytes(self.buf[pos : pos + 3], "big")
            if len(self.buf) - pos - 9 < length:
                break
            head = self.buf[pos : pos + 9]
            stream_id = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            self.frames.append((head[3], head[4], stream_id, self.buf[pos + 9 : pos + 9 + length]))
            pos += 9 + length
        self.buf = self.buf[pos:]
        return True

    def poll(self) -> None:
        """Read what has come, if anything, without waiting."""
        while not self.closed and select.select([self.sock], [], [], 0)[0]:
            self.read()

    def seen(self, kind: int) -> bool:
        return any(got[0] == kind for got in self.frames)

    def wait_for(self, kind: int, stream_id: int | None = None, deadline: float = 10.0) -> Frame | None:
        """The first frame of ``kind`` (on ``stream_id``), reading until it comes or the
        server closes (None) or ``deadline`` seconds pass (socket.timeout)."""
        end = time.monotonic() + deadline
        seen = 0
        while True:
            for got in self.frames[seen:]:
                if got[0] == kind and (stream_id is None or got[2] == stream_id):
                    return got
            seen = len(self.frames)
            if time.monotonic() > end:
                raise TimeoutError(f"no frame of type {kind} in {deadline} s")
            if not self.read():
                return None

    def goaway(self, deadline: float = 10.0) -> tuple[int, bytes] | None:
        """The GOAWAY's (error code, debug data); None if the server closed without one."""
        got = self.wait_for(GOAWAY, deadline=deadline)
        if got is None:
            return None
        payload = got[3]
        return int.from_bytes(payload[4:8], "big"), payload[8:]

    def wait_closed(self, deadline: float = 10.0) -> None:
        end = time.monotonic() + deadline
        while self.read():
            if time.monotonic() > end:
                raise TimeoutError("the server did not close the connection")

    def resets(self, stream_id: int) -> list[int]:
        return [int.from_bytes(p, "big") for k, _, s, p in self.frames if k == RST_STREAM and s == stream_id]

    def until_ended(self, stream_id: int) -> list[tuple[int, int, bytes]]:
        """(type, flags, payload) of what the server sent on ``stream_id``, read until it
        ended or reset the stream."""
        while not self.ended(stream_id) and not self.resets(stream_id):
            assert self.read(), "the server closed the connection"
        return [(k, f, p) for k, f, s, p in self.frames if s == stream_id]

    def ended(self, stream_id: int) -> bool:
        return any(
            k in (HEADERS, DATA) and flags & END_STREAM and s == stream_id for k, flags, s, _ in self.frames
        )


def rss_kib() -> int:
    """This process's resident set (the test servers run in it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class FakeTransport:
    """What ``http2.Connection`` uses of an asyncio transport, for tests that drive a
    connection in process: what is written is kept in ``out`` and taken at once (the
    write buffer stays empty); ``reading`` follows pause_reading/resume_reading."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closing = False
        self.reading = True

    def write(self, data: bytes) -> None:
        self.out += data

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
