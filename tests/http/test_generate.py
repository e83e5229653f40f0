"""Triton's generate extension (``/generate``, ``/generate_stream``) on a real HTTP server."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tritonpy_testbackend import CANCELLED, WAITING, write_model, write_sender_models
from tritonpy_testservers import LiveServer

pytestmark = pytest.mark.integration

SSE = "text/event-stream; charset=utf-8"
ONE_RESPONSE = "generate expects model to produce exactly 1 response"
AB = {"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}


@pytest.fixture(scope="module")
def test_repos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The models of this module (the shared ``live`` fixture serves them)."""
    repo = tmp_path_factory.mktemp("generate_repo")
    write_sender_models(repo)
    write_model(repo, "addsub")
    write_model(repo, "failing", extra='parameters { key: "fail" value: { string_value: "model raised" } }\n')
    write_model(repo, "text", dtype="TYPE_STRING", dims="1")
    write_model(repo, "vector", dtype="TYPE_FP32", dims="-1")
    write_model(repo, "flags", dtype="TYPE_BOOL", dims="2")
    write_model(repo, "unbatched", dtype="TYPE_INT64", dims="1")
    config = repo / "unbatched" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 8", "max_batch_size: 0"))  # shape [1]
    return [repo]


@pytest.fixture(scope="module")
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://{live.url}/v2/models", timeout=20) as client:
        yield client


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    """The SSE body as its events' JSON, checking the framing of each."""
    assert response.headers["content-type"] == SSE
    chunks = response.text.split("\n\n")
    assert chunks[-1] == ""  # every event ends with a blank line
    events = []
    for chunk in chunks[:-1]:
        assert chunk.startswith("data: ") and "\n" not in chunk
        events.append(json.loads(chunk[len("data: ") :]))
    return events


# -- generate ---------------------------------------------------------------------------


def test_generate(http: httpx.Client) -> None:
    r = http.post("/addsub/generate", json={**AB, "id": "42", "echo": "hi"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {
        "id": "42",
        "model_name": "addsub",
        "model_version": "1",
        "echo": "hi",  # a key that is no input is a request parameter; response parameters come back
        "OUTPUT0": [2, 3, 4, 5],
        "OUTPUT1": [0, 1, 2, 3],
    }


def test_generate_versioned_and_inputs_in_parameters(http: httpx.Client) -> None:
    body = {"INPUT0": [1, 2, 3, 4], "parameters": {"INPUT1": [1, 1, 1, 1], "echo": 7}}
    r = http.post("/addsub/versions/1/generate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["OUTPUT0"] == [2, 3, 4, 5] and r.json()["echo"] == 7
    assert http.post("/addsub/versions/9/generate", json=AB).status_code == 404
    r = http.post("/addsub/versions/x/generate", json=AB)
    assert (r.status_code, r.json()) == (404, {"error": "Not Found"})


def test_generate_scalars_strings_and_shapes(http: httpx.Client) -> None:
    r = http.post("/text/generate", json={"INPUT0": "hello", "INPUT1": ["world"]})
    assert r.json()["OUTPUT0"] == "hello"  # a one-element output is a value, not a list
    r = http.post("/vector/generate", json={"INPUT0": [0.5, 1.5, 2.5], "INPUT1": [1.0, 1.0, 1.0]})
    assert r.json()["OUTPUT0"] == [1.5, 2.5, 3.5]
    r = http.post("/flags/generate", json={"INPUT0": [True, False], "INPUT1": [True, True]})
    assert r.json()["OUTPUT1"] == [False, True]
    r = http.post("/unbatched/generate", json={"INPUT0": 5, "INPUT1": 2})
    assert (r.json()["OUTPUT0"], r.json()["OUTPUT1"]) == (7, 3)


def test_generate_decoupled_model(http: httpx.Client) -> None:
    body = {**AB, "responses": 1}
    r = http.post("/decoupled/generate", json=body)
    assert r.status_code == 200 and r.json()["OUTPUT0"] == [2, 3, 4, 5]
    r = http.post("/decoupled_empty_final/generate", json=body)  # one response, then a FINAL alone
    assert r.status_code == 200 and r.json()["index"] == 0
    for responses in (0, 3):
        r = http.post("/decoupled/generate", json={**AB, "responses": responses})
        assert r.status_code == 400 and ONE_RESPONSE in r.json()["error"]


def test_generate_backend_error(http: httpx.Client) -> None:
    r = http.post("/raise_after/generate", json=AB)
    assert r.status_code == 400 and ONE_RESPONSE in r.json()["error"]  # a response, then the error
    r = http.post("/sender_final_only/generate", json=AB)  # an INTERNAL error response: still 400
    assert r.status_code == 400 and "FINAL flag without a response" in r.json()["error"]
    assert r.headers["content-type"] == "application/json"


def test_a_model_error_is_400_on_both_routes(http: httpx.Client) -> None:
    """As Triton 2.51 answers (observed): an error the model answers with is 400 on
    ``generate`` (JSON) and ``generate_stream`` (the error as the one event), whatever
    its code; ``infer`` keeps the code's status (INTERNAL: 500)."""
    r = http.post("/failing/generate", json=AB)
    assert (r.status_code, r.headers["content-type"], r.json()) == (
        400,
        "application/json",
        {"error": "model raised"},
    )
    r = http.post("/failing/generate_stream", json=AB)
    assert r.status_code == 400 and _events(r) == [{"error": "model raised"}]
    body = {"inputs": [{"name": n, "shape": [1, 4], "datatype": "INT32", "data": v} for n, v in AB.items()]}
    assert http.post("/failing/infer", json=body).status_code == 500


# -- generate_stream --------------------------------------------------------------------


def test_generate_stream(http: httpx.Client) -> None:
    r = http.post("/decoupled/generate_stream", json={**AB, "id": "s", "responses": 4})
    assert r.status_code == 200
    events = _events(r)
    assert [e["index"] for e in events] == [0, 1, 2, 3]
    assert all(e["id"] == "s" and e["OUTPUT1"] == [0, 1, 2, 3] for e in events)


def test_generate_stream_other_models(http: httpx.Client) -> None:
    (event,) = _events(http.post("/addsub/generate_stream", json=AB))
    assert event["model_name"] == "addsub" and event["OUTPUT0"] == [2, 3, 4, 5]
    assert len(_events(http.post("/decoupled_empty_final/generate_stream", json=AB))) == 2
    r = http.post("/decoupled/generate_stream", json={**AB, "responses": 0})
    assert r.status_code == 200 and _events(r) == []


def test_generate_stream_errors_in_the_stream(http: httpx.Client) -> None:
    r = http.post("/raise_after/generate_stream", json=AB)
    assert r.status_code == 200  # the first response set the status
    first, error = _events(r)
    assert first["OUTPUT0"] == [2, 3, 4, 5]
    assert error == {"error": "raised after sending"}
    r = http.post("/sender_final_only/generate_stream", json=AB)
    assert r.status_code == 400  # the first response is an error: 400, as Triton answers
    (error,) = _events(r)
    assert "FINAL flag without a response" in error["error"]


def test_disconnect_cancels_the_request(http: httpx.Client) -> None:
    body = {**AB, "id": "gone", "responses": 2, "wait_cancel": True}
    with http.stream("POST", "/decoupled/generate_stream", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert json.loads(next(lines).removeprefix("data: "))["index"] == 0
    assert CANCELLED.saw("gone")
    assert http.post("/addsub/generate", json=AB).status_code == 200  # the server serves on


def test_disconnect_before_the_first_response_cancels_the_request(live: LiveServer) -> None:
    body = json.dumps({**AB, "id": "early", "responses": 0, "wait_cancel": True}).encode()
    head = (
        f"POST /v2/models/decoupled/generate_stream HTTP/1.1\r\nHost: {live.url}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    host, port = live.url.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(head + body)
        assert WAITING.saw("early")  # running, nothing sent yet
    assert CANCELLED.saw("early")


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["generate", "generate_stream"])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "failed to parse the request JSON buffer"),
        (b"[1, 2]", "attempt to get members for non-object"),  # Triton 2.51's words (observed)
        (b"", "failed to parse the request JSON buffer: The document is empty. at 0"),
        (b'{"INPUT0": [1, 2, 3, 4]}', "expected 2 inputs but got 1 inputs"),
        (
            b'{"INPUT0": [1, 2, 3, 4], "INPUT0": [1, 2, 3, 4]}',
            "[request id: <id_unknown>] input 'INPUT0' already exists in request",
        ),
        (  # Triton names the object's first id, wherever it stands
            b'{"INPUT0": [1, 2, 3, 4], "id": "a", "INPUT0": [1, 2, 3, 4], "id": "b"}',
            "[request id: a] input 'INPUT0' already exists in request",
        ),
        (
            b'{"INPUT0": ["a", 2, 3, 4], "INPUT1": [1, 1, 1, 1]}',
            "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
        ),
        (b'{"INPUT0": [1, 2, 3], "INPUT1": [1, 1, 1, 1]}', "can not convert input 'INPUT0' to tensor"),
        (
            b'{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "extra": {"a": 1}}',
            "parameter 'extra' has invalid",
        ),
        (
            b'{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "parameters": 1}',
            "Expected JSON object for keyword",
        ),
        (
            b'{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "parameters": {"n": [1]}}',
            "Converting keyword: 'parameters': parameter 'n' has invalid type",
        ),
        (b'{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "id": 5}', "Unable to parse 'id'"),
    ],
)
def test_invalid_requests(http: httpx.Client, route: str, body: bytes, message: str) -> None:
    r = http.post(f"/addsub/{route}", content=body)
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    assert message in r.json()["error"]


def test_the_first_id_given_is_the_requests(http: httpx.Client) -> None:
    body = b'{"id": "a", "INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "id": "b"}'
    r = http.post("/addsub/generate", content=body)
    assert r.status_code == 200 and r.json()["id"] == "a"  # as Triton reads it


@pytest.mark.parametrize("route", ["generate", "generate_stream"])
def test_unknown_model(http: httpx.Client, route: str) -> None:
    r = http.post(f"/nope/{route}", json={})
    assert r.status_code == 404 and "unknown model: 'nope'" in r.json()["error"]


def test_infer_on_a_decoupled_model(http: httpx.Client) -> None:
    body = {
        "inputs": [
            {"name": n, "shape": [1, 4], "datatype": "INT32", "data": d}
            for n, d in (("INPUT0", [1, 2, 3, 4]), ("INPUT1", [1, 1, 1, 1]))
        ]
    }
    for path in ("/decoupled/infer", "/decoupled/versions/1/infer"):
        r = http.post(path, json=body)
        assert r.status_code == 501
        assert r.json() == {
            "error": "HTTP end point doesn't support models with decoupled transaction policy"
        }
