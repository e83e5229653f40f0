"""Inference requests answered by the httptools protocol itself (``http/direct.py``):
byte for byte what the ASGI path answers, on raw connections, for good and bad requests."""

from __future__ import annotations

import gzip
import json
import socket
import struct
from collections.abc import Iterator

import numpy as np
import pytest
import tritonpy
from tritonpy.http.protocol import HAVE_HTTPTOOLS
from tritonpy_testbackend import TestBackend, write_model, write_sender_models
from tritonpy_testservers import LiveServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not HAVE_HTTPTOOLS, reason="the direct path is httptools' protocol"),
]

MAX_INPUT = 4096


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer]]:
    """The same server behind the direct path and behind ASGI only."""
    repo = tmp_path_factory.mktemp("direct_repo")
    write_model(repo, "addsub")
    write_model(repo, "one_input", dtype="TYPE_FP32", dims="-1", inputs=1)
    write_sender_models(repo)
    server = tritonpy.Server(model_repository=[repo], http_max_input_size=MAX_INPUT)
    server.backends.register("testbk", TestBackend())
    server.start()
    direct, asgi = LiveServer(server, "httptools"), LiveServer(server, "httptools", direct=False)
    direct.start()
    asgi.start()
    yield direct, asgi
    direct.stop()
    asgi.stop()
    server.stop()


def _post(path: str, body: bytes, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"POST {path} HTTP/{version}", "Host: t", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _exchange(live: LiveServer, data: bytes, answers: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``data`` in one write; read ``answers`` responses (content-length framed)."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(data)
        buffer, out = b"", []
        while len(out) < answers:
            head, sep, rest = buffer.partition(b"\r\n\r\n")
            if sep:
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
                n = int(headers["content-length"])
                if len(rest) >= n:
                    headers.pop("date", None)  # the only field that may differ between two answers
                    out.append((int(lines[0].split()[1]), headers, rest[:n]))
                    buffer = rest[n:]
                    continue
            chunk = sock.recv(65536)
            assert chunk, f"closed after {len(out)} answers"
            buffer += chunk
        return out


ADD = json.dumps(
    {
        "id": "r1",
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
BINARY = HEADER + struct.pack("<4i", 5, 6, 7, 8) + struct.pack("<4i", 1, 2, 3, 4)
INFER = "/v2/models/addsub/infer"

NOPE = "/v2/models/nope/infer"
#: Bad bodies to models that do not exist: Triton 2.51 reports the model first (404),
#: whatever the body holds, over JSON and binary alike.
UNKNOWN_MODEL = {
    "empty object": _post(NOPE, b"{}"),
    "malformed json": _post(NOPE, b'{"inputs": [}'),
    "no inputs": _post(NOPE, b'{"inputs": []}'),
    "bad header length": _post(NOPE, BINARY, "Inference-Header-Content-Length: 99999"),
    "binary header not json": _post(NOPE, b"{}xxxx", "Inference-Header-Content-Length: 2"),
    "raw binary": _post(NOPE, b"xxxx", "Inference-Header-Content-Length: 0"),
    "not gzip": _post(NOPE, b"not gzip", "Content-Encoding: gzip"),
}

#: A binary request whose tensor data (16 KiB) is four times --http-max-input-size.
WIDE = np.arange(4096, dtype=np.float32)
WIDE_HEADER = json.dumps(
    {
        "inputs": [
            {
                "name": "INPUT0",
                "datatype": "FP32",
                "shape": [1, WIDE.size],
                "parameters": {"binary_data_size": WIDE.nbytes},
            }
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }
).encode()
WIDE_BODY = WIDE_HEADER + WIDE.tobytes()
ONE_INPUT = "/v2/models/one_input/infer"

CASES = {
    "json": _post(INFER, ADD),
    "versioned": _post("/v2/models/addsub/versions/1/infer", ADD),
    "binary": _post(INFER, BINARY, f"Inference-Header-Content-Length: {len(HEADER)}"),
    "gzip in, gzip out": _post(INFER, gzip.compress(ADD), "Content-Encoding: gzip", "Accept-Encoding: gzip"),
    "malformed json": _post(INFER, b'{"inputs": [}'),
    "wrong shape": _post(INFER, ADD.replace(b'[1, 4], "data": [1, 2, 3, 4]', b'[1, 3], "data": [1, 2, 3]')),
    "unknown model": _post("/v2/models/nope/infer", ADD),
    "unknown version": _post("/v2/models/addsub/versions/7/infer", ADD),
    "bad header length": _post(INFER, BINARY, "Inference-Header-Content-Length: 99999"),
    "decoupled model": _post("/v2/models/decoupled/infer", ADD),
    "declared too large": _post(INFER, b"x" * (MAX_INPUT + 1)),
    "binary data past the limit": _post(
        ONE_INPUT, WIDE_BODY, f"Inference-Header-Content-Length: {len(WIDE_HEADER)}"
    ),
    "raw binary past the limit": _post(ONE_INPUT, WIDE.tobytes(), "Inference-Header-Content-Length: 0"),
    "compressed binary past the limit": _post(
        ONE_INPUT,
        gzip.compress(WIDE_BODY),
        f"Inference-Header-Content-Length: {len(WIDE_HEADER)}",
        "Content-Encoding: gzip",
    ),
    "json header past the limit": _post(
        ONE_INPUT, WIDE_BODY, f"Inference-Header-Content-Length: {MAX_INPUT + 1}"
    ),
    "http/1.0 closes": _post(INFER, ADD, version="1.0"),
    **{f"unknown model, {name}": request for name, request in UNKNOWN_MODEL.items()},
}


@pytest.mark.parametrize("case", list(CASES))
def test_direct_answers_as_asgi(pair: tuple[LiveServer, LiveServer], case: str) -> None:
    direct, asgi = pair
    (got,) = _exchange(direct, CASES[case], 1)
    (want,) = _exchange(asgi, CASES[case], 1)
    assert got == want
    if case == "json":
        assert got[0] == 200 and json.loads(got[2])["outputs"][0]["data"] == [2, 3, 4, 5]


def test_binary_tensor_data_is_not_bounded_by_the_input_size_limit(
    pair: tuple[LiveServer, LiveServer],
) -> None:
    """As in Triton, --http-max-input-size bounds a body's JSON part, a raw binary body
    and a compressed body; tensor data after a JSON header is not bounded by it."""
    for live in pair:
        ((status, headers, body),) = _exchange(live, CASES["binary data past the limit"], 1)
        assert status == 200, body
        json_size = int(headers["inference-header-content-length"])
        assert np.array_equal(np.frombuffer(body[json_size:], np.float32), WIDE + WIDE)  # testbk: IN0 + IN0
        for bounded in (
            "raw binary past the limit",
            "compressed binary past the limit",
            "declared too large",
        ):
            ((status, _, body),) = _exchange(live, CASES[bounded], 1)
            assert status == 400 and b"exceeds the maximum input size of 4096 bytes" in body, (bounded, body)
        ((status, _, body),) = _exchange(live, CASES["json header past the limit"], 1)
        assert status == 400 and b"exceeds the maximum input size of 4096 bytes" in body, body


@pytest.mark.parametrize("case", list(UNKNOWN_MODEL))
def test_an_unknown_model_is_reported_before_its_body(pair: tuple[LiveServer, LiveServer], case: str) -> None:
    for live in pair:
        ((status, _, body),) = _exchange(live, UNKNOWN_MODEL[case], 1)
        assert status == 404
        assert json.loads(body) == {"error": "Request for unknown model: 'nope' is not found"}


def test_an_unknown_version_is_reported_before_its_body(pair: tuple[LiveServer, LiveServer]) -> None:
    request = _post("/v2/models/addsub/versions/7/infer", b"{}")
    for live in pair:
        ((status, _, body),) = _exchange(live, request, 1)
        assert status == 404
        assert json.loads(body) == {"error": "Request for unknown model: 'addsub' version 7 is not found"}


def test_pipelined_requests_are_answered_in_order(pair: tuple[LiveServer, LiveServer]) -> None:
    direct, asgi = pair
    # Three inferences and a health check in one write, the second one refused.
    data = (
        CASES["json"]
        + CASES["unknown model"]
        + CASES["binary"]
        + b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    got = _exchange(direct, data, 4)
    assert [status for status, _, _ in got] == [200, 404, 200, 200]
    assert got == _exchange(asgi, data, 4)


def test_a_body_in_many_pieces_and_the_connection_serves_on(pair: tuple[LiveServer, LiveServer]) -> None:
    direct, _ = pair
    request = CASES["json"]
    with socket.create_connection(("127.0.0.1", direct.port), timeout=10) as sock:
        for i in range(0, len(request), 7):
            sock.sendall(request[i : i + 7])
        sock.sendall(request)
        answers = b""
        while answers.count(b"HTTP/1.1 200 OK") < 2 or not answers.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk
            answers += chunk
    assert answers.count(b'"data":[2,3,4,5]') == 2


def test_the_direct_path_is_the_one_taken(
    pair: tuple[LiveServer, LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through uvicorn's private ``_start_asgi_task``: a uvicorn without it would
    answer every request through ASGI, correctly and silently slower."""
    from tritonpy.http import protocol

    taken: list[str] = []

    class Counted(protocol.DirectInfer):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            taken.append(self.model)

    monkeypatch.setattr(protocol, "DirectInfer", Counted)
    direct, asgi = pair
    _exchange(asgi, CASES["json"], 1)
    assert taken == []
    ((status, _, _),) = _exchange(direct, CASES["json"], 1)
    assert status == 200 and taken == ["addsub"]
