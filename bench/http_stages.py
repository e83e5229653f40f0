"""CPU of the HTTP inference path on the event loop, stage by stage, in one process.

    python bench/http_stages.py                   # add_sub (Python backend, its stub)
    python bench/http_stages.py --profile 20      # and cProfile's top 20 through the protocol
    python bench/http_stages.py --profile 150 --sort ncalls   # the calls each inference makes

Steadier than a whole-server measurement on a shared machine: no HTTP client
and no network. A real server (the Python add_sub model, its stub process) runs
on a loop as under ``tritonpy serve``; perf_analyzer's request body (binary
inputs, binary outputs requested) is decoded, run and encoded the way
``http/direct.py`` does, one inference after another, and ``time.thread_time``
of the loop thread is divided by the inferences: the loop's share of an
inference without httptools' parsing and the client's socket ("chain"). The
same again through uvicorn's httptools protocol as served, on a connection
without a socket whose every answer sends the next request ("protocol"): the
difference is the HTTP/1.1 parsing and uvicorn's per-request objects. The protocol once
more with every request answered at once (no model, no stub): what the HTTP layer costs
the loop per request on its own. Then each stage
alone, many times over: decoding the body, the stub message (descriptors and
pickling), the stub answer (unpickling and the response), encoding the response
and its head.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import logging
import pickle
import pstats
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

HEADER = (
    b'{"id":"","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}},'
    b'{"name":"INPUT1","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}}],'
    b'"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},'
    b'{"name":"OUTPUT1","parameters":{"binary_data":true}}]}'
)
#: perf_analyzer's request for add_sub over HTTP (its headers, as the protocol hands them over).
BODY = HEADER + struct.pack("<4f", 1, 2, 3, 4) * 2
HEADERS = {
    "host": "127.0.0.1:8000",
    "user-agent": "libcurl-agent/1.0",
    "accept": "*/*",
    "inference-header-content-length": str(len(HEADER)),
    "content-type": "application/octet-stream",
    "content-length": str(len(BODY)),
}

#: uvicorn's default headers (its ``server`` and ``date``).
DEFAULT_HEADERS = [(b"server", b"uvicorn"), (b"date", b"Tue, 24 Nov 2026 13:00:00 GMT")]


def per_call(fn: Callable[[], object], n: int) -> float:
    """µs of this thread's CPU per call of ``fn``, best of three rounds of ``n``."""
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time() - t0) / n * 1e6)
    return best


@contextlib.contextmanager
def served_add_sub(prefix: str) -> Iterator[tuple[asyncio.AbstractEventLoop, Any]]:
    """A real server with the Python ``add_sub`` model (its stub process) on a loop of
    this thread, as under ``tritonpy serve``: ``(loop, server)``; stopped at the end."""
    import tritonpy

    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    shutil.copytree(ROOT / "plugins" / "python" / "tests" / "models" / "add_sub", work / "add_sub")
    server = tritonpy.Server(model_repository=[work])
    server.event_loop = loop
    loop.run_until_complete(loop.run_in_executor(None, server.start))  # as `tritonpy serve` does
    try:
        yield loop, server
    finally:
        # Stopped off the loop while it runs: the stub's answer to 'fini' is read on it.
        loop.run_until_complete(loop.run_in_executor(None, server.stop))
        loop.close()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="inferences in the chain")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N through the protocol")
    parser.add_argument(
        "--sort", default="tottime", help="the order of --profile's table (pstats' keys: tottime, ncalls)"
    )
    args = parser.parse_args()

    from tritonpy.http.direct import encode_head
    from tritonpy.http.inference import DECOUPLED_REFUSAL, HttpInference, encode_infer
    from tritonpy_backend_python._convert import request_to_wire, response_from_wire
    from tritonpy_sdk import InferenceResponse, Tensor

    with served_add_sub("tritonpy-stages-") as (loop, server):
        http = HttpInference(server)
        done = loop.create_future()
        left = [0]

        def one() -> None:
            request, binary, flags = http.decode("add_sub", "", [BODY], HEADERS)
            server.start_infer(request, lambda r: answered(r, binary, flags), DECOUPLED_REFUSAL)

        def answered(response: InferenceResponse, binary: bool, flags: dict[str, Any]) -> None:
            assert response.error is None, response.error
            parts, extra, media = encode_infer(response, binary, flags, "")
            encode_head(200, parts, extra, media, DEFAULT_HEADERS, True)
            left[0] -= 1
            if left[0] > 0:
                loop.call_soon(one)
            else:
                done.set_result(None)

        def chain(n: int) -> float:
            nonlocal done
            done = loop.create_future()
            left[0] = n
            t0 = time.thread_time()
            loop.call_soon(one)
            loop.run_until_complete(done)
            return (time.thread_time() - t0) / n * 1e6

        chain(500)  # warm-up
        rounds = [chain(args.n) for _ in range(3)]
        each = ", ".join(f"{r:.1f}" for r in rounds)
        print(f"chain (loop thread, per inference): {min(rounds):.1f} µs (rounds {each})")
        served = _protocol_chain(server, loop)
        served(500)
        rounds = [served(args.n) for _ in range(3)]
        each = ", ".join(f"{r:.1f}" for r in rounds)
        print(f"protocol (the chain through the HTTP protocol): {min(rounds):.1f} µs (rounds {each})")
        instant = _protocol_chain(_AnsweredAtOnce(server), loop)
        instant(500)
        rounds = [instant(args.n * 4) for _ in range(3)]
        each = ", ".join(f"{r:.1f}" for r in rounds)
        print(
            f"protocol answered at once (no model, no stub: parsing, decoding, encoding, "
            f"the response head and the loop's turns): {min(rounds):.1f} µs (rounds {each})"
        )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            served(args.n)
            profile.disable()
            pstats.Stats(profile, stream=sys.stdout).sort_stats(args.sort).print_stats(args.profile)

        # -- stages alone ----------------------------------------------------------------------
        n = 20000
        request, binary, flags = http.decode("add_sub", "", [BODY], HEADERS)
        print(f"decode: {per_call(lambda: http.decode('add_sub', '', [BODY], HEADERS), n):.1f} µs")
        stub = _stub()
        link = stub._link
        outputs = stub._outputs
        print(f"request_to_wire: {per_call(lambda: request_to_wire(link, request, 7, outputs), n):.1f} µs")
        desc = request_to_wire(link, request, 7, outputs)
        msg = {"op": "exec", "b": 8, "reqs": [desc]}
        print(f"pickle exec: {per_call(lambda: pickle.dumps(msg, protocol=5), n):.1f} µs")
        arr = np.arange(4, dtype=np.float32)
        answer = {
            "op": "done",
            "b": 8,
            # One response as response_to_wire makes it: (outputs, error, parameters).
            "r": [([link.put(k, "FP32", arr) for k in ("OUTPUT0", "OUTPUT1")], None, {})],
        }
        data = pickle.dumps(answer, protocol=5)
        print(f"unpickle done: {per_call(lambda: pickle.loads(data), n):.1f} µs")
        print(f"response_from_wire: {per_call(lambda: response_from_wire(link, answer['r'][0]), n):.1f} µs")
        response = InferenceResponse(
            {k: Tensor(k, arr, request.inputs["INPUT0"].datatype) for k in ("OUTPUT0", "OUTPUT1")}
        )
        print(f"encode_infer: {per_call(lambda: encode_infer(response, binary, flags, ''), n):.1f} µs")
        parts, extra, media = encode_infer(response, binary, flags, "")
        head = per_call(lambda: encode_head(200, parts, extra, media, DEFAULT_HEADERS, True), n)
        print(f"encode_head: {head:.1f} µs")


class _Transport(asyncio.Transport):
    """A client connection without a socket: each answer sends the next request."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.protocol: Any = None
        self.left = 0
        self.done: asyncio.Future[None] | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: Any) -> None:
        self.left -= 1
        if self.left > 0:
            self.loop.call_soon(self.protocol.data_received, REQUEST)
        elif self.done is not None:
            self.done.set_result(None)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


REQUEST = (
    b"POST /v2/models/add_sub/infer HTTP/1.1\r\n"
    + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in HEADERS.items())
    + b"\r\n"
    + BODY
)


class _AnsweredAtOnce:
    """The server as the HTTP front end sees it, except that ``start_infer`` answers each
    request at once with add_sub's outputs: what the protocol costs without a model."""

    def __init__(self, server: Any) -> None:
        from tritonpy_sdk import InferenceResponse, Tensor

        # Imported once: an import per request (its ``_handle_fromlist``) was part of this row.
        self._response, self._tensor = InferenceResponse, Tensor
        self._server = server
        self._outputs = np.arange(4, dtype=np.float32)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def start_infer(self, request: Any, on_response: Callable[[Any], None], *args: Any, **kw: Any) -> None:
        datatype = request.inputs["INPUT0"].datatype
        tensor = self._tensor
        outputs = {k: tensor(k, self._outputs, datatype) for k in ("OUTPUT0", "OUTPUT1")}
        on_response(self._response(outputs, model_name=request.model_name, model_version=1))


def _protocol_chain(server: Any, loop: asyncio.AbstractEventLoop) -> Callable[[int], float]:
    """µs of the loop thread per inference through the httptools protocol, as served."""
    import uvicorn
    from tritonpy.http import create_app
    from tritonpy.http.protocol import direct_frontend, http_protocol
    from tritonpy.http.uvicorn_server import UVICORN_LOGGING
    from uvicorn.server import ServerState

    app = create_app(server)
    direct = direct_frontend(app, server.options)
    assert direct is not None
    # As the HTTP front end makes it (``http/frontend.py``), logging at verbose level 0: no
    # access log, so inference requests take the protocol's direct path, as served (uvicorn's
    # own logging set-up would turn the access log on and send each one through ASGI).
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    config = uvicorn.Config(
        app,
        http=http_protocol(server.options, direct=direct),
        **UVICORN_LOGGING,
        proxy_headers=False,
        lifespan="off",
    )
    config.load()
    protocol_class: Any = config.http_protocol_class
    protocol = protocol_class(config, ServerState(), {}, loop)
    transport = _Transport(loop)
    transport.protocol = protocol
    protocol.connection_made(transport)

    def run(n: int) -> float:
        transport.left = n
        transport.done = loop.create_future()
        t0 = time.thread_time()
        loop.call_soon(protocol.data_received, REQUEST)
        loop.run_until_complete(transport.done)
        return (time.thread_time() - t0) / n * 1e6

    return run


def _stub() -> Any:
    """The add_sub instance's stub process (``StubProcess``: its link, its output names)."""
    import gc

    for obj in gc.get_objects():
        if type(obj).__name__ == "StubProcess":
            return obj
    raise SystemExit("no stub found (the Python backend's layout changed)")


if __name__ == "__main__":
    main()
