"""gRPC's floor: the CPU one unary ModelInfer call costs the transport itself, with no model.

A server that answers every ``ModelInfer`` with a canned ``add_sub`` response
(the bytes made once; the request is not even parsed) runs in a process of its
own, on grpcio's synchronous server (a thread pool), on grpc.aio (on uvloop
when installed), and on tritonpy's own transport (``native``: its HTTP/2
connection and call layer on uvloop, as ``--grpc-implementation tritonpy``).
Its other RPCs (metadata, config, statistics) are forwarded to
a real ``tritonpy serve`` of ``add_sub``, so perf_analyzer sets up as usual.
Over a fixed window the script reads that process's CPU time from /proc and
divides it by the calls perf_analyzer counted: what no server built on that
transport can go below, whatever its own work costs. Writes ``bench/grpc_floor.md``.

    .venv/bin/python bench/grpc_floor.py [--window 6] [--concurrency 1 8]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HZ = os.sysconf("SC_CLK_TCK")
MODES = ("sync", "aio", "native")


def canned_response() -> bytes:
    """``add_sub``'s answer to any request: two FP32 [16] outputs of zeros."""
    from tritonpy.grpc import grpc_service_pb2 as pb

    response = pb.ModelInferResponse(model_name="add_sub", model_version="1")
    for name in ("OUTPUT0", "OUTPUT1"):
        response.outputs.add(name=name, datatype="FP32", shape=[16])
        response.raw_output_contents.append(bytes(64))
    return response.SerializeToString()


def serve(mode: str, port: int, upstream: str) -> None:
    """Run the canned server (in the child process) until killed."""
    import grpc

    answer = canned_response()
    channel = grpc.insecure_channel(upstream)

    def same(data: bytes) -> bytes:
        return data

    def forward(method: str) -> Any:
        call = channel.unary_unary(method, request_serializer=same, response_deserializer=same)
        return grpc.unary_unary_rpc_method_handler(lambda request, context: call(request))

    if mode == "sync":

        class SyncHandler(grpc.GenericRpcHandler):
            def service(self, details: Any) -> Any:
                if details.method.endswith("/ModelInfer"):
                    return grpc.unary_unary_rpc_method_handler(lambda request, context: answer)
                return forward(details.method)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        server.add_generic_rpc_handlers((SyncHandler(),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        server.wait_for_termination()
        return

    import asyncio

    if mode == "native":
        serve_native(answer, port, upstream)
        return

    async def infer(request: bytes, context: Any) -> bytes:
        return answer

    class AioHandler(grpc.GenericRpcHandler):
        def service(self, details: Any) -> Any:
            if details.method.endswith("/ModelInfer"):
                return grpc.unary_unary_rpc_method_handler(infer)
            return forward(details.method)

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((AioHandler(),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def serve_native(answer: bytes, port: int, upstream: str) -> None:
    """The canned server on tritonpy's HTTP/2 transport: ModelInfer answered by a handler
    through the real call layer (a task per call), the rest forwarded with grpc.aio."""
    import asyncio

    import grpc
    from tritonpy.grpc import http2
    from tritonpy.grpc.calls import Call, Method

    class Canned:
        def SerializeToString(self) -> bytes:  # noqa: N802  # protobuf's name
            return answer

    canned = Canned()

    async def infer(request: bytes, context: Any) -> Canned:
        return canned

    def same(data: bytes) -> bytes:
        return data

    async def main() -> None:
        channel = grpc.aio.insecure_channel(upstream)
        tasks: set[asyncio.Task[None]] = set()
        table: dict[bytes, Method] = {}

        def method(path: bytes) -> Method:
            if path not in table:
                if path.endswith(b"/ModelInfer"):
                    table[path] = Method("ModelInfer", infer, same, False)
                else:
                    call = channel.unary_unary(
                        path.decode(), request_serializer=same, response_deserializer=same
                    )

                    class Raw(bytes):
                        def SerializeToString(self) -> bytes:  # noqa: N802
                            return bytes(self)

                    async def forward(request: bytes, context: Any) -> Raw:
                        return Raw(await call(request))

                    table[path] = Method(path.decode(), forward, same, False)
            return table[path]

        def dispatch(stream: http2.Stream) -> http2.Receiver:
            path = next(value for name, value in stream.headers if name == b":path")
            return Call(stream, method(path), 2**31 - 1, None, None, tasks)

        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: http2.Connection(dispatch, http2.Config(), lambda conn: None), "127.0.0.1", port
        )
        await server.serve_forever()

    import uvloop

    uvloop.run(main())


def ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def measure(pa: Path, mode: str, upstream: str, concurrency: int, window: float) -> tuple[float, float]:
    """(calls per second, server CPU µs per call) of one mode at one concurrency."""
    sys.path.insert(0, str(ROOT / "bench"))
    from run import free_port

    port = free_port()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, str(port), upstream],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.5)
        load = subprocess.Popen(
            [
                str(pa),
                "-m",
                "add_sub",
                "-x",
                "1",  # the canned answers change no statistics: name the version
                "-i",
                "grpc",
                "-u",
                f"127.0.0.1:{port}",
                "--concurrency-range",
                f"{concurrency}:{concurrency}",
                "--measurement-interval",  # three windows span the one measured here
                str(int((window + 6) * 1000 / 3)),
                "--stability-percentage",
                "999",
                "--max-trials",
                "3",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(3)
        start, t0 = time.monotonic(), ticks(child.pid)
        time.sleep(window)
        spent, elapsed = ticks(child.pid) - t0, time.monotonic() - start
        out, _ = load.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    found = re.search(r"throughput: ([\d.]+) infer/sec", out)
    if found is None:
        raise RuntimeError(f"perf_analyzer failed ({mode}, concurrency {concurrency}):\n{out[-2000:]}")
    rate = float(found.group(1))
    return rate, spent / HZ / (rate * elapsed) * 1e6


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--window", type=float, default=6.0, help="seconds measured per cell")
    parser.add_argument("--out", default=str(ROOT / "bench" / "grpc_floor.md"))
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]
    from get_perf_analyzer import provision
    from run import Served

    pa = provision()
    work = Path(tempfile.mkdtemp(prefix="tritonpy-grpc-floor-"))
    repo = work / "repo"
    shutil.copytree(ROOT / "plugins" / "python" / "tests" / "models" / "add_sub", repo / "add_sub")
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), {args.window:g} s per cell: "
        "a canned ModelInfer answer, server process CPU per call.",
        "",
        "| server | concurrency | calls/s | CPU µs per call |",
        "|---|---|---|---|",
    ]
    upstream = Served(repo)
    try:
        for concurrency in args.concurrency:
            for mode in MODES:
                rate, cost = measure(pa, mode, f"127.0.0.1:{upstream.grpc}", concurrency, args.window)
                lines.append(f"| {mode} | {concurrency} | {rate:.0f} | {cost:.0f} |")
                print(lines[-1], flush=True)
    finally:
        upstream.stop()
        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
