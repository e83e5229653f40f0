"""CPU of the native gRPC path on the event loop, per ModelInfer, in one process.

    python bench/grpc_stages.py                 # add_sub (Python backend, its stub)
    python bench/grpc_stages.py --profile 25    # and cProfile's top 25 through the transport
    python bench/grpc_stages.py --streaming     # ModelStreamInfer: the task path, then the callback path

As ``bench/http_stages.py`` for HTTP: a real server (the Python add_sub model,
its stub process) runs on a loop as under ``tritonpy serve``, and an HTTP/2
connection of the native transport (``grpc/http2.py``, ``native.py``) without
a socket is fed perf_analyzer's frames for one ModelInfer (HEADERS, DATA, its
WINDOW_UPDATEs) each time it answers the previous one. ``time.thread_time`` of
the loop thread divided by the calls is the loop's share of an inference through
the transport ("served"); the same with every request answered at once (no
model, no stub) is what the transport and the protobuf conversions cost on
their own ("answered at once").

``--streaming``: the same message sent on one ModelStreamInfer stream, the next
when the previous one's response comes (perf_analyzer ``--streaming`` at
concurrency 1), through the general path (a task, ``Method.stream_start`` off)
and through the callback path (bench/grpc_stream.md).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: perf_analyzer's ModelInferRequest for add_sub (two FP32 [4] raw inputs, two outputs).
MESSAGE = bytes.fromhex(
    "0a076164645f73756222280a22747269746f6e5f656e61626c655f656d7074795f66696e616c5f726573706f6e7365"
    "120208012a110a06494e505554301204465033321a01042a110a06494e505554311204465033321a010432090a074f"
    "55545055543032090a074f5554505554313a1067c6697351ff4aec29cdbaabf2fbe3463a1067c6697351ff4aec29cd"
    "baabf2fbe346"
)
STREAM_PATH = "/inference.GRPCInferenceService/ModelStreamInfer"
#: Its request headers (grpc C++'s, as perf_analyzer sends them).
HEADERS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"),
    (":authority", "127.0.0.1:8001"),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("user-agent", "grpc-c++/1.67.1 grpc-c/44.0.0 (linux; chttp2)"),
    ("grpc-accept-encoding", "identity, deflate, gzip"),
]


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream_id.to_bytes(4, "big") + payload


class _Transport(asyncio.Transport):
    """A client connection without a socket: each answer's trailers send the next call."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        import hpack

        super().__init__()
        self.loop = loop
        self.protocol: Any = None
        self.left = 0
        self.done: asyncio.Future[None] | None = None
        self.stream_id = 1
        self.encoder = hpack.Encoder()
        self.written = 0
        self.streaming = False  # one ModelStreamInfer stream: a message per response
        self._opened = False
        # The first block fills the server's table; the next, all indexed, are the same.
        self._blocks = [self.encoder.encode(HEADERS)]
        self._blocks.insert(0, self.encoder.encode(HEADERS))
        stream_headers = [(k, STREAM_PATH if k == ":path" else v) for k, v in HEADERS]
        self._stream_block = hpack.Encoder().encode(stream_headers)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8001), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def request(self) -> bytes:
        """The next call's frames (made here, not with the server's http2.frame: an A/B of
        the transport measures the server's code only)."""
        sid = self.stream_id
        self.stream_id += 2
        block = self._blocks.pop() if len(self._blocks) > 1 else self._blocks[0]
        body = len(MESSAGE).to_bytes(5, "big") + MESSAGE
        return (
            _frame(0x1, 0x4, sid, block)  # HEADERS, END_HEADERS
            + _frame(0x8, 0, sid, (5).to_bytes(4, "big"))  # WINDOW_UPDATE
            + _frame(0x0, 0x1, sid, body)  # DATA, END_STREAM
            + _frame(0x8, 0, 0, (93).to_bytes(4, "big"))
        )

    def stream_request(self) -> bytes:
        """The stream's next message (its HEADERS before the first), and the window
        its response used, given back."""
        body = len(MESSAGE).to_bytes(5, "big") + MESSAGE
        head = b""
        if not self._opened:
            self._opened = True
            head = _frame(0x1, 0x4, 1, self._stream_block)  # HEADERS, END_HEADERS
        grant = (256).to_bytes(4, "big")
        return head + _frame(0x0, 0, 1, body) + _frame(0x8, 0, 1, grant) + _frame(0x8, 0, 0, grant)

    def write(self, data: Any) -> None:
        self.written += 1
        if self.streaming:
            if self.protocol is None or data[3] > 1:
                return  # not a response's HEADERS or DATA: SETTINGS, a window update
            self.left -= 1
            if self.left > 0:
                self.loop.call_soon(self.protocol.data_received, self.stream_request())
            elif self.done is not None:
                self.done.set_result(None)
            return
        if self.protocol is None or b"grpc-status" not in data:
            return  # the server's SETTINGS, a window update
        self.left -= 1
        if self.left > 0:
            self.loop.call_soon(self.protocol.data_received, self.request())
        elif self.done is not None:
            self.done.set_result(None)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _AnsweredAtOnce:
    """The server as the gRPC servicer sees it, except that inference answers at once
    with add_sub's outputs: what the transport costs without a model."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._outputs = np.arange(4, dtype=np.float32)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def _response(self, request: Any) -> Any:
        from tritonpy_sdk import InferenceResponse, Tensor

        datatype = request.inputs["INPUT0"].datatype
        outputs = {k: Tensor(k, self._outputs, datatype) for k in ("OUTPUT0", "OUTPUT1")}
        return InferenceResponse(outputs, model_name=request.model_name, model_version=1)

    async def infer_async(self, request: Any, *args: Any, **kw: Any) -> Any:
        return self._response(request)

    def start_infer(self, request: Any, on_response: Callable[[Any], None], *args: Any, **kw: Any) -> None:
        on_response(self._response(request))

    def stream_flags_async(self, request: Any) -> Any:
        """The server's, through this ``submit`` (what ModelStreamInfer's task path calls)."""
        from tritonpy.server import Server

        return Server.stream_flags_async(self, request)  # type: ignore[arg-type]

    def submit(self, request: Any, done: Callable[[Any, int], None], *args: Any, **kw: Any) -> None:
        from tritonpy_sdk import RESPONSE_COMPLETE_FINAL

        done(self._response(request), RESPONSE_COMPLETE_FINAL)


def _chain(
    server: Any, loop: asyncio.AbstractEventLoop, stream: str = ""
) -> tuple[Callable[[int], float], Callable[[], None]]:
    """µs of the loop thread per ModelInfer through the native transport; ``stream``
    "task" or "callback": per message of one ModelStreamInfer stream, that way. With
    what ends the stream (its call answered)."""
    import dataclasses

    from tritonpy.grpc import http2, native

    nat = native.NativeServer.__new__(native.NativeServer)
    nat.options = server.options
    nat.methods = native.methods(server)
    if stream == "task":
        key = STREAM_PATH.encode()
        nat.methods[key] = dataclasses.replace(nat.methods[key], stream_start=None)
    nat.config = native.config_of(server.options)
    nat._tasks = set()
    transport = _Transport(loop)
    transport.streaming = bool(stream)
    request = transport.stream_request if stream else transport.request

    async def connect() -> http2.Connection:  # made on the loop, as the listener does
        conn = http2.Connection(nat._dispatch, nat.config, lambda c: None)
        conn.connection_made(transport)
        settings = http2.frame(http2.SETTINGS, 0, 0) + http2.frame(http2.SETTINGS, http2.ACK, 0)
        conn.data_received(http2.PREFACE + settings)
        return conn

    conn = loop.run_until_complete(connect())
    transport.protocol = conn

    def run(n: int) -> float:
        transport.left = n
        transport.done = loop.create_future()
        t0 = time.thread_time()
        loop.call_soon(conn.data_received, request())
        loop.run_until_complete(transport.done)
        return (time.thread_time() - t0) / n * 1e6

    def finish() -> None:
        if stream:  # END_STREAM: the call ends with its trailers
            transport.left = 1
            transport.done = loop.create_future()
            loop.call_soon(conn.data_received, _frame(0x0, 0x1, 1, b""))
            loop.run_until_complete(transport.done)

    return run, finish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="calls per round")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N through the transport")
    parser.add_argument(
        "--streaming", action="store_true", help="ModelStreamInfer (task path, then callback path)"
    )
    args = parser.parse_args()

    from http_stages import served_add_sub  # bench/, this script's folder

    with served_add_sub("tritonpy-grpc-stages-") as (loop, server):
        rows: list[tuple[str, Any, int, str]] = [
            ("served (transport, model and stub)", server, args.n, ""),
            ("answered at once (no model, no stub)", _AnsweredAtOnce(server), args.n * 4, ""),
        ]
        if args.streaming:
            rows = [
                (f"{label}, stream {way}", target, n, way)
                for label, target, n, _ in rows
                for way in ("task", "callback")
            ]
        for name, target, n, stream in rows:
            run, finish = _chain(target, loop, stream)
            run(500)
            rounds = [run(n) for _ in range(3)]
            each = ", ".join(f"{r:.1f}" for r in rounds)
            print(f"{name}: {min(rounds):.1f} µs per call (rounds {each})")
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                run(args.n)
                profile.disable()
                pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
            finish()


if __name__ == "__main__":
    main()
