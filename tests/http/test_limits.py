"""HTTP limits and timeouts (--http-max-header-size, --http-max-header-count,
--http-header-timeout-secs, --http-read-timeout-secs), on both of uvicorn's
protocol implementations, with raw sockets where a client library would not
send such requests. Bounds on time only prove that nothing hangs."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonpy
from tritonpy.http.protocol import HAVE_HTTPTOOLS, TOO_MANY_CHUNKS
from tritonpy_sdk import InferenceRequest, InferenceResponse, ModelInstance, hookimpl
from tritonpy_testbackend import TestBackend, write_model
from tritonpy_testservers import LiveServer

pytestmark = pytest.mark.integration

MAX_HEAD = 64 * 1024  # the default --http-max-header-size
MAX_FIELDS = 32
TIMEOUT = 0.5  # both timeouts: short, so that the tests that wait for them are quick
SLOW = 0.8  # seconds the "slow" model takes: longer than either timeout
NO_HANG = 10.0  # seconds: anything slower than this is a hang

HEALTH = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"


class SlowBackend(TestBackend):
    """addsub, after sleeping for the model parameter 'sleep' (seconds)."""

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        time.sleep(float(instance.model.parameters["sleep"]))
        return super().execute(instance, requests) or []


IMPLEMENTATIONS = ["httptools", "h11"] if HAVE_HTTPTOOLS else ["h11"]


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    repo = tmp_path_factory.mktemp("limits_repo")
    write_model(repo, "addsub")
    write_model(repo, "one_input", dtype="TYPE_FP32", dims="-1", inputs=1)
    write_model(repo, "slow", extra=f'parameters {{ key: "sleep" value: {{ string_value: "{SLOW}" }} }}')
    config = repo / "slow" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "testbk"', 'backend: "slowbk"'))
    server = tritonpy.Server(
        model_repository=[repo],
        http_max_header_count=MAX_FIELDS,
        http_header_timeout_secs=TIMEOUT,
        http_read_timeout_secs=TIMEOUT,
    )
    server.backends.register("testbk", TestBackend())
    server.backends.register("slowbk", SlowBackend())
    server.start()
    live = LiveServer(server, http=request.param)
    live.start()
    yield live
    live.stop()
    server.stop()


# -- raw HTTP ---------------------------------------------------------------------------


def _connect(live: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", live.port), timeout=NO_HANG)


def _read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset after its answer counts as closed)."""
    chunks = []
    deadline = time.monotonic() + NO_HANG
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    else:
        pytest.fail("the server did not close the connection")
    return b"".join(chunks)


def _responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """(status, headers, body) of each response in ``data`` (content-length framed)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, data[:200]
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (content-length framed), the connection left open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "connection closed"
        data += chunk
    length = int(_responses(data.partition(b"\r\n\r\n")[0] + b"\r\n\r\n")[0][1]["content-length"])
    while len(data.partition(b"\r\n\r\n")[2]) < length:
        data += sock.recv(65536)
    (response,) = _responses(data)
    return response


def _send_in_background(sock: socket.socket, parts: Iterator[bytes] | Sequence[bytes]) -> threading.Thread:
    """Send ``parts`` from a thread; the server may stop reading, and close, midway."""

    def send() -> None:
        try:
            for part in parts:
                sock.sendall(part)
        except OSError:
            pass  # refused and closed before everything went out

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _refusal(data: bytes, status: int, flag: str) -> None:
    (answer,) = _responses(data)
    assert answer[0] == status, answer
    assert answer[1]["content-type"] == "application/json"
    assert answer[1]["connection"] == "close"
    assert flag in json.loads(answer[2])["error"]


def _head(size: int) -> bytes:
    """A health request whose request line and headers are exactly ``size`` bytes."""
    start = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Pad: "
    end = b"\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


def _health_ok(live: LiveServer) -> None:
    assert httpx.get(f"http://{live.url}/v2/health/live", timeout=NO_HANG).status_code == 200


# -- head size and field count ------------------------------------------------------------


@pytest.mark.parametrize("value_size", [1 << 20, 16 << 20])
def test_oversized_header_is_431_and_closed(live: LiveServer, value_size: int) -> None:
    start = time.monotonic()
    with _connect(live) as sock:
        head = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Big: "
        chunk = b"a" * (1 << 20)
        parts = [head, *[chunk] * (value_size // len(chunk)), b"\r\n\r\n"]
        sender = _send_in_background(sock, parts)
        data = _read_to_end(sock)
        sender.join(NO_HANG)
    _refusal(data, 431, "--http-max-header-size")
    assert str(MAX_HEAD) in json.loads(_responses(data)[0][2])["error"]
    assert time.monotonic() - start < NO_HANG
    _health_ok(live)


def test_head_of_exactly_the_limit_is_served(live: LiveServer) -> None:
    with _connect(live) as sock:
        sock.sendall(_head(MAX_HEAD))
        sock.sendall(HEALTH)  # and the connection stays usable
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        answers = _responses(_read_to_end(sock))
    assert [a[0] for a in answers] == [200, 200, 200]


@pytest.mark.parametrize("pieces", [1, 7])
def test_head_one_byte_over_the_limit_is_431(live: LiveServer, pieces: int) -> None:
    head = _head(MAX_HEAD + 1)
    with _connect(live) as sock:
        step = -(-len(head) // pieces)
        for i in range(0, len(head), step):
            sock.sendall(head[i : i + step])
            time.sleep(0.01 if pieces > 1 else 0)
        data = _read_to_end(sock)
    _refusal(data, 431, "--http-max-header-size")


def test_long_url_is_431(live: LiveServer) -> None:
    with _connect(live) as sock:
        _send_in_background(sock, [b"GET /" + b"u" * (2 * MAX_HEAD) + b" HTTP/1.1\r\nHost: t\r\n\r\n"])
        data = _read_to_end(sock)
    _refusal(data, 431, "--http-max-header-size")


def test_too_many_header_fields_is_431(live: LiveServer) -> None:
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(MAX_FIELDS))  # with Host: one too many
    with _connect(live) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n" + fields + b"\r\n")
        data = _read_to_end(sock)
    _refusal(data, 431, "--http-max-header-count")
    assert f"more than {MAX_FIELDS} header fields" in json.loads(_responses(data)[0][2])["error"]


def test_as_many_header_fields_as_allowed_is_served(live: LiveServer) -> None:
    fields = {f"x-f{i}": "v" for i in range(MAX_FIELDS - 5)}  # httpx adds host, accept, ...
    with httpx.Client(base_url=f"http://{live.url}", timeout=NO_HANG) as client:
        resp = client.get("/v2/health/live", headers=fields)
        assert len(resp.request.headers) == MAX_FIELDS
        assert resp.status_code == 200


def test_health_answers_during_a_200_mb_header(live: LiveServer) -> None:
    chunk = b"a" * (1 << 20)
    with _connect(live) as attacker:
        parts = [b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Big: ", *[chunk] * 200]
        sender = _send_in_background(attacker, parts)
        answered = 0
        while sender.is_alive() or answered == 0:
            _health_ok(live)  # raises (httpx timeout) on a stall
            answered += 1
        sender.join(NO_HANG)
        data = _read_to_end(attacker)
    _refusal(data, 431, "--http-max-header-size")


def test_oversized_head_behind_a_slow_request_waits_for_its_answer(live: LiveServer) -> None:
    """Pipelined: the earlier request is answered first, then the 431."""
    body = json.dumps(_addsub_doc()).encode()
    slow = b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with _connect(live) as sock:
        big = [b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Big: ", b"a" * (1 << 20)]
        sender = _send_in_background(sock, [slow, *big])
        data = _read_to_end(sock)
        sender.join(NO_HANG)
    first, second = _responses(data)
    assert first[0] == 200, first
    assert json.loads(first[2])["outputs"][0]["data"] == [2, 3, 4, 5]
    assert second[0] == 431


# -- timeouts ----------------------------------------------------------------------------


def test_silent_connection_is_closed(live: LiveServer) -> None:
    with _connect(live) as sock:
        assert _read_to_end(sock) == b""


def test_slowloris_head_is_408_and_closed(live: LiveServer) -> None:
    head = b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n" + b"X-Slow: " + b"s" * 1000
    with _connect(live) as sock:
        sock.settimeout(0.1)
        received = b""
        deadline = time.monotonic() + NO_HANG
        for byte in head:  # a byte every 0.1 s, never the end of the head
            assert time.monotonic() < deadline, "the slow head was never cut"
            try:
                sock.sendall(bytes([byte]))
                received = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if received:
                break
            _health_ok(live)  # other clients are served meanwhile
        sock.settimeout(NO_HANG)
        data = received + _read_to_end(sock)
    _refusal(data, 408, "--http-header-timeout-secs")


def test_stalled_body_is_408_and_closed(live: LiveServer) -> None:
    with _connect(live) as sock:
        sock.sendall(b"POST /v2/models/addsub/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{")
        data = _read_to_end(sock)
    _refusal(data, 408, "--http-read-timeout-secs")
    _health_ok(live)


def _chunked(path: bytes, chunks: Sequence[bytes]) -> bytes:
    """A POST to ``path`` whose body is sent as ``chunks``, then the last (empty) chunk."""
    head = b"POST %s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" % path
    return head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


@pytest.mark.parametrize("path", [b"/v2/models/addsub/infer", b"/v2/repository/index"])
def test_a_body_of_too_many_chunks_is_400_and_closed(live: LiveServer, path: bytes) -> None:
    """Triton's cap (since 26.05): more than 65536 non-empty chunks in one body."""
    with _connect(live) as sock:
        _send_in_background(sock, [_chunked(path, [b" "] * 65537)])
        data = _read_to_end(sock)
    _refusal(data, 400, "Chunked request body exceeds maximum of 65536 non-empty chunks.")
    assert json.loads(_responses(data)[0][2]) == {"error": TOO_MANY_CHUNKS}
    _health_ok(live)


def test_as_many_chunks_as_allowed_are_served(live: LiveServer) -> None:
    body = json.dumps(_addsub_doc()).encode()
    with _connect(live) as sock:
        sock.sendall(_chunked(b"/v2/models/addsub/infer", [body] + [b" "] * 65535))
        status, _, answer = _read_response(sock)
    assert status == 200, answer
    assert json.loads(answer)["outputs"][1]["data"] == [0, 1, 2, 3]


def test_slow_but_steady_body_is_served(live: LiveServer) -> None:
    """The read timeout is for a body that sends nothing, not for a slow one."""
    body = json.dumps(_addsub_doc()).encode()
    pieces = [body[i : i + len(body) // 8 + 1] for i in range(0, len(body), len(body) // 8 + 1)]
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v2/models/addsub/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        for piece in pieces:  # longer than the timeout in all, never idle that long
            time.sleep(TIMEOUT / 5)
            sock.sendall(piece)
        sock.sendall(HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        answers = _responses(_read_to_end(sock))
    assert [a[0] for a in answers] == [200, 200]
    assert json.loads(answers[0][2])["outputs"][1]["data"] == [0, 1, 2, 3]


def test_slow_request_is_not_cut_and_a_pipelined_stalled_head_is_408(live: LiveServer) -> None:
    """A request whose body arrived runs past both timeouts; the stalled head behind
    it gets its 408 only after that answer went out."""
    body = json.dumps(_addsub_doc()).encode()
    slow = b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with _connect(live) as sock:
        sock.sendall(slow + b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n")
        answers = _responses(_read_to_end(sock))
    assert [a[0] for a in answers] == [200, 408]
    assert json.loads(answers[0][2])["outputs"][0]["data"] == [2, 3, 4, 5]


# -- what must keep working --------------------------------------------------------------


def test_keep_alive_and_pipelining(live: LiveServer) -> None:
    with _connect(live) as sock:
        for _ in range(3):  # one after the other on one connection
            sock.sendall(HEALTH)
            assert _read_response(sock)[0] == 200
        time.sleep(2 * TIMEOUT)  # idle between requests: only the keep-alive timeout (5 s) applies
        body = json.dumps(_addsub_doc()).encode()
        infer = b"POST /v2/models/addsub/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
        last = HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
        sock.sendall(HEALTH + infer + body + HEALTH + infer + body + last)  # pipelined
        answers = _responses(_read_to_end(sock))
    assert [a[0] for a in answers] == [200] * 5
    assert json.loads(answers[1][2])["outputs"][0]["data"] == [2, 3, 4, 5]


def test_tritonclient_inference(live: LiveServer) -> None:
    client = httpclient.InferenceServerClient(live.url)
    try:
        a = np.arange(4, dtype=np.int32).reshape(1, 4)
        b = np.ones((1, 4), dtype=np.int32)
        for binary in (True, False):
            inputs = [httpclient.InferInput(n, [1, 4], "INT32") for n in ("INPUT0", "INPUT1")]
            inputs[0].set_data_from_numpy(a, binary_data=binary)
            inputs[1].set_data_from_numpy(b, binary_data=binary)
            outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
            result = client.infer("addsub", inputs, outputs=outputs)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        big = np.arange(1 << 20, dtype=np.float32).reshape(1, -1)  # a body of many reads
        data = httpclient.InferInput("INPUT0", list(big.shape), "FP32")
        data.set_data_from_numpy(big)
        result = client.infer("one_input", [data])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), big + big)
    finally:
        client.close()


def _addsub_doc() -> dict[str, object]:
    return {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [1, 1, 1, 1]},
        ]
    }
