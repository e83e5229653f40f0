"""Triton's SageMaker front end served for real (``--allow-sagemaker``): the routes
SageMaker calls, with the answers Triton 2.51 gives them (asked of the reference server)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from tritonpy_addsub import addsub_inputs, addsub_repo
from tritonpy_serverprocess import ServerProcess, free_port

pytestmark = pytest.mark.integration

MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="


def _start(tmp_path: Path, env: dict[str, str], *flags: str) -> tuple[ServerProcess, str]:
    port = free_port()
    flags = ("--allow-sagemaker=true", f"--sagemaker-port={port}", *flags)
    proc = ServerProcess([addsub_repo(tmp_path / "repo")], *flags, log=tmp_path / "server.log", env=env)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sagemaker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("sagemaker")
    proc, url = _start(tmp, {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "addsub"})
    yield proc, url
    proc.stop()


def test_ping_and_json_invocations(sagemaker: Any) -> None:
    proc, url = sagemaker
    proc.wait_for_output("Started Sagemaker HTTPService at 127.0.0.1")
    ping = httpx.get(f"{url}/ping", timeout=10)
    assert (ping.status_code, ping.content, ping.headers["content-type"]) == (200, b"", "text/plain")
    answer = httpx.post(f"{url}/invocations", json=addsub_inputs(False), timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    outputs = {o["name"]: o["data"] for o in answer.json()["outputs"]}
    assert outputs == {"SUM": [11.0, 22.0], "DIFF": [-9.0, -18.0]}


def test_binary_invocations_announce_the_header_size_in_the_content_type(sagemaker: Any) -> None:
    _, url = sagemaker
    header = json.dumps(addsub_inputs(True)).encode()
    body = header + struct.pack("<2f", 1, 2) + struct.pack("<2f", 10, 20)
    answer = httpx.post(
        f"{url}/invocations", content=body, headers={"content-type": f"{MIME}{len(header)}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    content_type = answer.headers["content-type"]
    assert content_type.startswith(MIME)
    size = int(content_type[len(MIME) :])
    assert json.loads(answer.content[:size])["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert struct.unpack("<2f", answer.content[size:]) == (11.0, 22.0)
    assert "inference-header-content-length" not in answer.headers


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "body"),
    [
        ("POST", "/ping", {}, 405, b'{"error":"Method Not Allowed"}'),
        ("GET", "/invocations", {}, 405, b'{"error":"Method Not Allowed"}'),
        (
            "POST",
            "/invocations",
            {"content": b"{}", "headers": {"content-type": f"x/y;{MIME}2"}},
            400,
            json.dumps(
                {"error": f"expect MIME type for binary data starts with '{MIME}', got: x/y;{MIME}2"},
                separators=(",", ":"),
            ).encode(),
        ),
        (
            "POST",
            "/invocations",
            {"content": b"{}", "headers": {"content-type": f"{MIME}99"}},
            400,
            b'{"error":"inference header size should be in range (0, 2), got: 99"}',
        ),
        ("GET", "/models", {}, 200, b'{"models":[]}'),
        ("GET", "/v2/health/ready", {}, 400, b""),
        ("GET", "/nope", {}, 400, b""),
    ],
)
def test_answers_as_triton_gives_them(
    sagemaker: Any, method: str, path: str, kwargs: dict[str, Any], status: int, body: bytes
) -> None:
    _, url = sagemaker
    answer = httpx.request(method, f"{url}{path}", timeout=10, **kwargs)
    assert (answer.status_code, answer.content) == (status, body)
    assert answer.headers["content-type"] == "text/plain"


def test_a_bad_request_and_a_wrong_model(sagemaker: Any) -> None:
    _, url = sagemaker
    z = {"name": "Z", "datatype": "FP32", "shape": [1], "data": [1]}
    wrong = httpx.post(f"{url}/invocations", json={"inputs": [z]}, timeout=30)
    assert wrong.status_code == 400
    assert "expected 2 inputs but got 1 inputs for model 'addsub'" in wrong.json()["error"]


def test_generate_and_an_unset_model(tmp_path: Path) -> None:
    env = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "addsub", "SAGEMAKER_TRITON_INFERENCE_TYPE": "generate"}
    proc, url = _start(tmp_path / "generate", env)
    try:
        answer = httpx.post(f"{url}/invocations", json={"A": [1, 2], "B": [3, 4]}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["SUM"] == [4.0, 6.0]
    finally:
        proc.stop()
    proc, url = _start(tmp_path / "unset", {})
    try:
        answer = httpx.post(f"{url}/invocations", json=addsub_inputs(False), timeout=30)
        assert answer.status_code == 404
        assert "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in answer.json()["error"]
    finally:
        proc.stop()
