"""The httptools protocol's own request cycles (``http/protocol.py``, ``http/direct.py``),
on a protocol object fed bytes through a transport without a socket: which requests the
protocol answers as their own cycle, which take uvicorn's scope and cycle (and then the
protocol or ASGI), the same bytes on the wire either way, uvicorn's scope for the rest,
and the keep-alive timeout kept with one timer."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tritonpy
import uvicorn
from tritonpy.http import create_app, direct, protocol
from tritonpy.http.protocol import HAVE_HTTPTOOLS, direct_frontend, http_protocol
from tritonpy_testbackend import TestBackend, write_model
from uvicorn.server import ServerState

pytestmark = pytest.mark.skipif(not HAVE_HTTPTOOLS, reason="the direct path is httptools' protocol")

ADD = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 4], "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 4], "data": [1, 1, 1, 1]},
        ],
    }
).encode()

HEADER = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 4], "parameters": {"binary_data_size": 16}},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 4], "parameters": {"binary_data_size": 16}},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
    }
).encode()
BINARY = HEADER + bytes(range(32))


def _post(path: str, body: bytes = ADD, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"POST {path} HTTP/{version}", "Host: t", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


CLOSE = "Connection: close"
INFER = "/v2/models/addsub/infer"

#: request bytes -> how the protocol takes it: "own" (answered as its own cycle), "uvicorn"
#: (uvicorn's scope and cycle, then answered by the protocol), "asgi" (the ASGI application).
PATHS: dict[str, tuple[bytes, str]] = {
    "infer": (_post(INFER, ADD, CLOSE), "own"),
    "versioned": (_post("/v2/models/addsub/versions/1/infer", ADD, CLOSE), "own"),
    "http/1.0": (_post(INFER, ADD, version="1.0"), "own"),
    "unknown model": (_post("/v2/models/nope/infer", ADD, CLOSE), "own"),
    "malformed json": (_post(INFER, b'{"inputs": [}', CLOSE), "own"),
    "declared too large": (_post(INFER, b"x" * 5000, CLOSE), "own"),
    "gzip asked": (_post(INFER, ADD, "Accept-Encoding: gzip", CLOSE), "own"),
    "a header twice": (_post(INFER, ADD, "Accept-Encoding: gzip", "accept-encoding: identity", CLOSE), "own"),
    "binary": (_post(INFER, BINARY, f"Inference-Header-Content-Length: {len(HEADER)}", CLOSE), "own"),
    "binary, bad length": (_post(INFER, BINARY, "Inference-Header-Content-Length: 9999", CLOSE), "own"),
    "chunked body": (
        b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n" + b"%x\r\n" % len(ADD) + ADD + b"\r\n0\r\n\r\n",
        "own",
    ),
    "query string": (_post(INFER + "?x=1", ADD, CLOSE), "uvicorn"),
    "percent-encoded": (_post("/v2/models/add%73ub/infer", ADD, CLOSE), "uvicorn"),
    "fragment": (_post(INFER + "#f", ADD, CLOSE), "uvicorn"),
    "absolute form": (_post("http://t" + INFER, ADD, CLOSE), "uvicorn"),
    "expect 100-continue": (_post(INFER, ADD, "Expect: 100-continue", CLOSE), "asgi"),
    "not an inference": (_post("/v2/models/addsub/infer/x", ADD, CLOSE), "asgi"),
    "bad version": (_post("/v2/models/addsub/versions/x/infer", ADD, CLOSE), "asgi"),
    "not POST": (b"GET " + INFER.encode() + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", "asgi"),
    "health": (b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", "asgi"),
}


class _Transport(asyncio.Transport):
    """A connection without a socket: what the protocol writes, and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False
        self.upgraded: Any = None  # the protocol after an upgrade

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: Any) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def set_protocol(self, protocol: Any) -> None:
        self.upgraded = protocol

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tritonpy.Server]:
    repo = tmp_path_factory.mktemp("cycle_repo")
    write_model(repo, "addsub")
    server = tritonpy.Server(model_repository=[repo], http_max_input_size=4096)
    server.backends.register("testbk", TestBackend())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


def _connection(
    loop: asyncio.AbstractEventLoop, app: Any, direct_to: Any, **config: Any
) -> tuple[Any, _Transport]:
    cls = http_protocol(tritonpy.ServerOptions(), "httptools", direct_to)
    uconfig = uvicorn.Config(app, http=cls, log_config=None, lifespan="off", proxy_headers=False, **config)
    uconfig.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Thu, 26 Nov 2026 00:00:00 GMT"), (b"server", b"uvicorn")]
    conn = cls(uconfig, state, {"k": "v"}, loop)
    transport = _Transport()
    conn.connection_made(transport)
    return conn, transport


def _run_until(loop: asyncio.AbstractEventLoop, done: Callable[[], bool], limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not done():
        assert time.monotonic() < deadline, "no answer"
        loop.run_until_complete(asyncio.sleep(0.002))


def _answer(
    loop: asyncio.AbstractEventLoop, server: tritonpy.Server, data: bytes, direct_path: bool
) -> bytes:
    app = create_app(server)
    conn, transport = _connection(loop, app, direct_frontend(app, server.options) if direct_path else None)
    conn.data_received(data)
    _run_until(loop, lambda: transport.closed)
    conn.connection_lost(None)
    return bytes(transport.out)


@pytest.mark.parametrize("case", list(PATHS))
def test_each_request_takes_its_path_and_answers_as_asgi_does(
    case: str, server: tritonpy.Server, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, path = PATHS[case]
    taken: list[str] = []

    class Recorded(direct.DirectInfer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            taken.append("own" if args[2] is None else "uvicorn")

    monkeypatch.setattr(protocol, "DirectInfer", Recorded)
    got = _answer(loop, server, data, direct_path=True)
    assert taken == ([] if path == "asgi" else [path])
    taken.clear()
    want = _answer(loop, server, data, direct_path=False)
    assert taken == []
    assert got == want  # every byte: status line, headers (the same date), body
    assert got.startswith(b"HTTP/1.1 ")


def test_pipelined_requests_after_an_own_cycle_take_uvicorns_and_answer_in_order(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[str] = []

    class Recorded(direct.DirectInfer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            taken.append("own" if args[2] is None else "uvicorn")

    monkeypatch.setattr(protocol, "DirectInfer", Recorded)
    health = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
    data = _post(INFER) + _post("/v2/models/nope/infer") + health + _post(INFER, ADD, CLOSE)
    got = _answer(loop, server, data, direct_path=True)
    assert taken == ["own", "uvicorn", "uvicorn"]
    assert got == _answer(loop, server, data, direct_path=False)
    assert [int(m) for m in re.findall(rb"HTTP/1.1 (\d+)", got)] == [200, 404, 200, 200]


def test_one_request_after_another_on_a_connection(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop
) -> None:
    app = create_app(server)
    conn, transport = _connection(loop, app, direct_frontend(app, server.options))
    for _ in range(3):
        size = len(transport.out)
        conn.data_received(_post(INFER))
        _run_until(loop, lambda size=size: transport.out.endswith(b"]}]}") and len(transport.out) > size)
        assert transport.out[size:].startswith(b"HTTP/1.1 200 OK\r\n")
        assert conn.cycle.response_complete and not transport.closed
    assert conn.server_state.total_requests == 3
    conn.connection_lost(None)


class _Recording:
    """An ASGI application that keeps each scope and answers 200 after ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.scopes: list[dict[str, Any]] = []
        self.delay = delay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(scope)
        while (await receive())["more_body"]:
            pass
        if self.delay:
            await asyncio.sleep(self.delay)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def test_other_requests_get_uvicorns_scope(loop: asyncio.AbstractEventLoop) -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    requests = [
        b"GET /v2/health/live?x=%41 HTTP/1.1\r\nHost: t\r\nX-One: 1\r\nx-one: 2\r\n\r\n",
        b"POST /v2/models/m/infer/x?q HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /v2/models/m/load HTTP/1.0\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}",  # closes
    ]
    scopes = []
    for direct_to in (_Refusing(), None, "uvicorn"):
        app = _Recording()
        if direct_to == "uvicorn":
            config = uvicorn.Config(
                app, http=HttpToolsProtocol, log_config=None, lifespan="off", proxy_headers=False
            )
            config.load()
            conn: Any = HttpToolsProtocol(config, ServerState(), {"k": "v"}, loop)
            transport = _Transport()
            conn.connection_made(transport)
        else:
            conn, transport = _connection(loop, app, direct_to)
        for request in requests:
            n = len(app.scopes)
            conn.data_received(request)
            _run_until(loop, lambda a=app, n=n, c=conn: len(a.scopes) > n and c.cycle.response_complete)
        scopes.append(app.scopes)
    assert scopes[0] == scopes[1] == scopes[2]
    assert scopes[0][0]["headers"] == [(b"host", b"t"), (b"x-one", b"1"), (b"x-one", b"2")]


class _Refusing:
    """A front end for requests that must never reach it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the direct path was taken ({name})")


def test_keep_alive_closes_an_idle_connection_once_per_timeout(loop: asyncio.AbstractEventLoop) -> None:
    timeout = 0.3
    app = _Recording()
    conn, transport = _connection(loop, app, None, timeout_keep_alive=timeout)
    health = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
    conn.data_received(health)
    _run_until(loop, lambda: conn.cycle.response_complete)
    loop.run_until_complete(asyncio.sleep(timeout * 0.6))
    conn.data_received(health)  # a second request before the timeout: the clock starts again
    _run_until(loop, lambda: len(app.scopes) == 2 and conn.cycle.response_complete)
    loop.run_until_complete(asyncio.sleep(timeout * 0.6))
    assert not transport.closed  # the first timer ran out, the connection was idle for less
    _run_until(loop, lambda: transport.closed)
    conn.connection_lost(None)


def test_keep_alive_timer_closes_only_a_connection_idle_for_the_whole_timeout(
    loop: asyncio.AbstractEventLoop,
) -> None:
    # The timer's decision, with the idle time set rather than waited for.
    timeout = 5.0
    conn, transport = _connection(loop, _Recording(), None, timeout_keep_alive=timeout)
    conn._idle_since = loop.time() - timeout / 2  # idle for half the timeout: it waits on
    conn._keepalive_expired()
    assert not transport.closed and conn._keepalive is not None
    conn._keepalive.cancel()
    conn._idle_since = None  # busy: the timer is dropped (the next response arms it again)
    conn._keepalive_expired()
    assert not transport.closed and conn._keepalive is None
    conn._idle_since = loop.time() - timeout  # idle for the whole timeout: closed
    conn._keepalive_expired()
    assert transport.closed
    conn.connection_lost(None)


def test_keep_alive_leaves_a_busy_connection_open(loop: asyncio.AbstractEventLoop) -> None:
    timeout = 0.2
    app = _Recording()
    conn, transport = _connection(loop, app, None, timeout_keep_alive=timeout)
    health = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
    conn.data_received(health)  # answered at once: the timer is armed
    _run_until(loop, lambda: conn.cycle.response_complete)
    app.delay = 2 * timeout
    loop.run_until_complete(asyncio.sleep(timeout * 0.5))
    conn.data_received(health)  # busy across the timer's end
    _run_until(loop, lambda: len(app.scopes) == 2 and conn.cycle.response_complete)
    assert not transport.closed
    _run_until(loop, lambda: transport.closed)
    conn.connection_lost(None)
    assert conn._keepalive is None


def test_an_own_cycle_has_every_field_uvicorn_reads_of_a_cycle() -> None:
    """uvicorn's protocol reads and sets fields of ``self.cycle``; a request that is its
    own cycle (``DirectInfer``) must have each of them."""
    from uvicorn.protocols.http import httptools_impl

    source = inspect.getsource(httptools_impl.HttpToolsProtocol)
    fields = set(re.findall(r"(?:self\.cycle|existing_cycle)\.(\w+)", source))
    fields |= set(re.findall(r"\bcycle\.(\w+)", inspect.getsource(protocol)))
    fields -= {"scope", "body", "run_asgi"}  # read only of uvicorn's cycles (pipelined, ASGI)
    assert fields
    assert fields <= set(direct.DirectInfer.__slots__), fields - set(direct.DirectInfer.__slots__)


def _head_as_joined(
    status: int, length: int, extra: dict[str, str], media: str, defaults: list[Any], keep_alive: bool
) -> bytes:
    """A response head line by line, as uvicorn's cycle writes one."""
    from http import HTTPStatus

    lines = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
    lines += [name + b": " + value + b"\r\n" for name, value in defaults]
    lines.append(b"content-type: " + media.encode() + b"\r\n")
    lines.append(b"content-length: " + str(length).encode() + b"\r\n")
    lines += [k.lower().encode() + b": " + v.encode() + b"\r\n" for k, v in extra.items()]
    if not keep_alive:
        lines.append(b"connection: close\r\n")
    return b"".join(lines) + b"\r\n"


def test_encode_head_from_its_caches_is_the_head_line_by_line() -> None:
    from tritonpy.http.direct import encode_head

    parts: list[bytes | memoryview] = [b'{"a":1}', memoryview(b"\x00" * 16)]
    extras = [
        {},
        {"Inference-Header-Content-Length": "7"},
        {"Inference-Header-Content-Length": "7", "Content-Encoding": "gzip"},
    ]
    for defaults in (
        [(b"date", b"Thu, 26 Nov 2026 00:00:00 GMT"), (b"server", b"uvicorn")],
        [(b"date", b"Thu, 26 Nov 2026 00:00:01 GMT"), (b"server", b"uvicorn")],  # the next second's list
        [],
    ):
        for _ in range(2):  # made, then from the caches
            for status in (200, 400, 404, 503):
                for extra in extras:
                    for media in ("application/json", "application/octet-stream"):
                        for keep_alive in (True, False):
                            head, length = encode_head(status, parts, extra, media, defaults, keep_alive)
                            assert length == 23
                            assert b"".join(head) == _head_as_joined(
                                status, 23, extra, media, defaults, keep_alive
                            )


class _Read(dict[str, str]):
    """Request headers that remember which of them were read."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def test_the_direct_path_keeps_every_header_an_inference_reads(server: tritonpy.Server) -> None:
    """``DirectInfer`` hands ``decode`` only ``REQUEST_HEADERS``; decoding any request
    reads no other."""
    import gzip

    from tritonpy.http.inference import REQUEST_HEADERS, HttpInference

    http = HttpInference(server)
    header = (
        b'{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}},'
    )
    header += b'{"name":"INPUT1","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}}]}'
    binary = header + bytes(32)
    bodies = [
        (ADD, {}),
        (gzip.compress(ADD), {"content-encoding": "gzip"}),
        (binary, {"inference-header-content-length": str(len(header))}),
        (bytes(16), {"inference-header-content-length": "0"}),
        (ADD, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
        (b"{", {}),
    ]
    read: set[str] = set()
    for body, headers in bodies:
        every = _Read({"host": "t", "content-length": str(len(body)), "accept-encoding": "gzip", **headers})
        try:
            http.decode("addsub", "", [body], every)
        except Exception:
            pass
        read |= every.read
    assert read <= REQUEST_HEADERS, read - REQUEST_HEADERS
    assert {"content-encoding", "inference-header-content-length", "traceparent"} <= read


def test_a_plain_inference_url_is_its_own_path_and_target() -> None:
    """The URLs the protocol takes at once: uvicorn's ``parse_url`` gives each back as its
    path (nothing to unquote), and ``infer_target`` the same model and version; every plain
    URL that ``infer_target`` takes is one of them."""
    import random

    import httptools
    from tritonpy.http.fastpath import infer_target
    from tritonpy.http.protocol import _plain_infer_url

    rnd = random.Random(7)
    pieces = [bytes([c]) for c in range(0x21, 0x7F)] + [b"/"] * 8 + [b"versions", b"infer", b"1", b"%41"]
    tails = [b"/infer", b"", b"/versions/12/infer", b"/versions//infer", b"/versions/x/infer"]
    taken = 0
    for _ in range(20000):
        url = (
            b"/v2/models/"
            + b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
            + rnd.choice(tails)
        )
        match = _plain_infer_url(url)
        if match is None:
            plain = not any(c in url for c in b"%?#")
            assert not (plain and infer_target(url.decode()) is not None), url
            continue
        taken += 1
        parsed = httptools.parse_url(url)
        assert (parsed.path, parsed.query, parsed.fragment) == (url, None, None), url
        assert infer_target(url.decode()) == tuple(g.decode() for g in match.groups(b"")), url
    assert taken > 1000


def test_with_the_access_log_on_inference_takes_the_asgi_cycle(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    taken: list[object] = []

    class Recorded(direct.DirectInfer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            taken.append(args[2])

    monkeypatch.setattr(protocol, "DirectInfer", Recorded)
    access = logging.getLogger("uvicorn.access")
    monkeypatch.setattr(access, "level", logging.INFO)
    access.manager._clear_cache()  # type: ignore[attr-defined]
    try:
        got = _answer(loop, server, _post(INFER, ADD, CLOSE), direct_path=True)
    finally:
        monkeypatch.undo()
        access.manager._clear_cache()  # type: ignore[attr-defined]
    assert taken == [] and got.startswith(b"HTTP/1.1 200 OK\r\n")


class _HeldServer:
    """A server whose ``start_infer`` keeps each request's callback for the test to call
    (or calls it at once, inside ``start_infer``, with ``at_once``)."""

    def __init__(self, real: tritonpy.Server, at_once: bool = False) -> None:
        self._real = real
        self.at_once = at_once
        self.callbacks: list[Callable[[Any], None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_infer(self, request: Any, on_response: Callable[[Any], None], *args: Any, **kw: Any) -> None:
        if self.at_once:
            on_response(_response())
        else:
            self.callbacks.append(on_response)


def _response() -> Any:
    import numpy as np
    from tritonpy_sdk import DataType, InferenceResponse, Tensor

    arr = np.arange(4, dtype=np.int32).reshape(1, 4)
    outputs = {k: Tensor(k, arr, DataType.INT32) for k in ("OUTPUT0", "OUTPUT1")}
    return InferenceResponse(outputs, model_name="addsub", model_version=1)


def _held(
    loop: asyncio.AbstractEventLoop, server: tritonpy.Server, at_once: bool = False
) -> tuple[Any, Any, _Transport]:
    from tritonpy.http.inference import HttpInference

    held = _HeldServer(server, at_once)
    conn, transport = _connection(loop, object(), HttpInference(held))  # type: ignore[arg-type]
    return held, conn, transport


def test_an_answer_is_written_on_the_loops_next_turn_with_the_same_bytes_from_any_thread(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop
) -> None:
    import threading

    answers = []
    for thread in ("loop", "worker", "inside start_infer"):
        held, conn, transport = _held(loop, server, at_once=thread == "inside start_infer")
        conn.data_received(_post(INFER))
        if thread == "inside start_infer":
            assert not transport.out  # never from inside the parser's callbacks
        elif thread == "loop":
            (callback,) = held.callbacks
            callback(_response())
            assert not transport.out  # the model's next request goes first (``_on_response``)
        else:
            (callback,) = held.callbacks
            worker = threading.Thread(target=callback, args=(_response(),))
            worker.start()
            worker.join()
            assert not transport.out  # handed to the loop
        _run_until(loop, lambda t=transport: t.out.endswith(b"]}"))
        answers.append(bytes(transport.out))
        assert conn.cycle.response_complete and not transport.closed
        conn.connection_lost(None)
    assert answers[0] == answers[1] == answers[2]
    assert answers[0].startswith(b"HTTP/1.1 200 OK\r\n")


def test_pipelined_answers_each_wait_a_turn(server: tritonpy.Server, loop: asyncio.AbstractEventLoop) -> None:
    held, conn, transport = _held(loop, server)
    conn.data_received(_post(INFER) + _post(INFER))
    assert len(conn.pipeline) == 1
    held.callbacks.pop()(_response())
    assert not transport.out  # the next request starts on the loop's turn, not inside this call
    _run_until(loop, lambda: len(held.callbacks) == 1)
    held.callbacks.pop()(_response())
    _run_until(loop, lambda: transport.out.count(b"HTTP/1.1 200 OK\r\n") == 2)
    conn.connection_lost(None)


def test_an_exception_answering_on_the_loops_thread_goes_to_the_loop_not_the_caller(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    held, conn, transport = _held(loop, server)
    conn.data_received(_post(INFER))
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    def broken(*args: Any) -> None:
        raise ValueError("broken")

    monkeypatch.setattr(direct, "encode_head", broken)
    held.callbacks.pop()(_response())  # does not raise
    _run_until(loop, lambda: bool(reported))
    assert [type(c["exception"]) for c in reported] == [ValueError]
    conn.connection_lost(None)


UPGRADES = {
    # Not a WebSocket: uvicorn runs the request (whose body the parser then never hands
    # over) and warns; the protocol does not take it as its own cycle.
    "inference, h2c": _post(INFER, ADD, "Connection: Upgrade", "Upgrade: h2c"),
    "websocket": b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
}


@pytest.mark.parametrize("case", list(UPGRADES))
def test_an_upgrade_takes_uvicorns_way_as_without_the_direct_path(
    case: str, server: tritonpy.Server, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[object] = []

    class Recorded(direct.DirectInfer):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            taken.append(args[2])

    monkeypatch.setattr(protocol, "DirectInfer", Recorded)
    outs = []
    for direct_path in (True, False):
        app = create_app(server)
        conn, transport = _connection(
            loop, app, direct_frontend(app, server.options) if direct_path else None
        )
        conn.data_received(UPGRADES[case])
        loop.run_until_complete(asyncio.sleep(0.2))
        # The WebSocket protocol's refusal carries a date of its own, not uvicorn's.
        outs.append(re.sub(rb"(?im)^date: .*\r\n", b"", bytes(transport.out)))
        (transport.upgraded or conn).connection_lost(None)
        loop.run_until_complete(asyncio.sleep(0.05))
    assert None not in taken  # never its own cycle
    assert outs[0] == outs[1]
    if case == "websocket":
        assert outs[0].startswith(b"HTTP/1.1 4")  # refused by uvicorn's WebSocket protocol: no such route


def test_a_client_gone_before_the_answer_gets_nothing(
    server: tritonpy.Server, loop: asyncio.AbstractEventLoop
) -> None:
    held, conn, transport = _held(loop, server)
    conn.data_received(_post(INFER))
    conn.connection_lost(None)
    assert conn.cycle.disconnected
    held.callbacks.pop()(_response())
    loop.run_until_complete(asyncio.sleep(0.01))
    assert not transport.out
