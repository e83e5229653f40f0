"""Triton's Vertex AI front end served for real (``AIP_MODE=PREDICTION``): the health
and predict routes, and predict requests redirected to the KServe API, with the answers
Triton 2.51 gives them (asked of the reference server)."""

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

MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
REDIRECT = "X-Vertex-Ai-Triton-Redirect"


@pytest.fixture(scope="module")
def vertex(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("vertex")
    port = free_port()
    env = {
        "AIP_MODE": "PREDICTION",
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": "/v1/health",
        "AIP_PREDICT_ROUTE": "/v1/endpoints/[0-9]+:predict",
    }
    # HTTP stays on (off by default in this mode), for the harness to see the server start.
    proc = ServerProcess([addsub_repo(tmp / "repo")], "--allow-http=true", log=tmp / "server.log", env=env)
    proc.wait_for_output(f"Started Vertex AI HTTPService at 127.0.0.1:{port}")
    yield proc, f"http://127.0.0.1:{port}"
    proc.stop()


def test_health_and_predict(vertex: Any) -> None:
    _, url = vertex
    health = httpx.get(f"{url}/v1/health", timeout=10)
    assert (health.status_code, health.content, health.headers["content-type"]) == (200, b"", "text/plain")
    answer = httpx.post(f"{url}/v1/endpoints/42:predict", json=addsub_inputs(False), timeout=30)
    assert answer.status_code == 200, answer.text
    # The repository's only model, as none was named.
    assert answer.json()["model_name"] == "addsub"
    assert {o["name"]: o["data"] for o in answer.json()["outputs"]} == {
        "SUM": [11.0, 22.0],
        "DIFF": [-9.0, -18.0],
    }


def test_binary_data_sized_by_the_content_type(vertex: Any) -> None:
    _, url = vertex
    header = json.dumps(addsub_inputs(True)).encode()
    body = header + struct.pack("<2f", 1, 2) + struct.pack("<2f", 10, 20)
    answer = httpx.post(
        f"{url}/v1/endpoints/1:predict",
        content=body,
        headers={"content-type": f"{MIME}{len(header)}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    size = int(answer.headers["inference-header-content-length"])
    assert struct.unpack("<2f", answer.content[size:]) == (11.0, 22.0)


def test_redirects_reach_the_kserve_api(vertex: Any) -> None:
    _, url = vertex
    predict = f"{url}/v1/endpoints/7:predict"
    meta = httpx.post(predict, headers={REDIRECT: "v2/models/addsub"}, timeout=10)
    assert meta.status_code == 200 and meta.json()["name"] == "addsub"
    ready = httpx.post(predict, headers={REDIRECT: "v2/health/ready"}, timeout=10)
    assert (ready.status_code, ready.content) == (200, b"")
    index = httpx.post(predict, headers={REDIRECT: "v2/repository/index"}, timeout=10)
    assert [m["name"] for m in index.json()] == ["addsub"]
    infer = httpx.post(
        predict, json=addsub_inputs(False), headers={REDIRECT: "v2/models/addsub/infer"}, timeout=30
    )
    assert infer.status_code == 200 and infer.json()["model_name"] == "addsub"
    metrics = httpx.post(predict, headers={REDIRECT: "metrics"}, timeout=10)
    assert 'nv_inference_request_success{model="addsub",version="1"}' in metrics.text


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "body"),
    [
        ("POST", "/v1/health", {}, 405, b'{"error":"Method Not Allowed"}'),
        ("GET", "/v1/endpoints/7:predict", {}, 405, b'{"error":"Method Not Allowed"}'),
        ("POST", "/v1/endpoints/7:predict", {REDIRECT: "v2/nope"}, 400, b""),
        ("GET", "/v2/health/ready", {}, 400, b""),
        ("GET", "/v1/endpoints/x:predict", {}, 400, b""),
    ],
)
def test_answers_as_triton_gives_them(
    vertex: Any, method: str, path: str, headers: dict[str, str], status: int, body: bytes
) -> None:
    _, url = vertex
    answer = httpx.request(method, f"{url}{path}", headers=headers, timeout=10)
    assert (answer.status_code, answer.content) == (status, body)
    assert answer.headers["content-type"] == "text/plain"


def test_a_default_model_that_is_not_loaded_stops_the_server(tmp_path: Path) -> None:
    env = {
        "AIP_MODE": "PREDICTION",
        "AIP_HTTP_PORT": str(free_port()),
        "AIP_HEALTH_ROUTE": "/h",
        "AIP_PREDICT_ROUTE": "/p",
    }
    proc = ServerProcess(
        [addsub_repo(tmp_path / "repo")],
        "--vertex-ai-default-model=nope",
        log=tmp_path / "s.log",
        env=env,
        wait_ready=False,
    )
    try:
        assert proc.proc.wait(60) == 1
        assert "Expect the default model 'nope' is loaded" in proc.output()
    finally:
        proc.stop()  # closes its log


def test_restricted_groups_cover_the_vertex_routes(tmp_path: Path) -> None:
    """``--http-restricted-api`` on the Vertex AI port, as Triton applies it there since
    26.04: the health route is the health group, predict the inference group, and a
    redirected request the group of the endpoint it is redirected to."""
    port = free_port()
    env = {
        "AIP_MODE": "PREDICTION",
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": "/h",
        "AIP_PREDICT_ROUTE": "/p",
    }
    proc = ServerProcess(
        [addsub_repo(tmp_path / "repo")],
        "--allow-http=true",
        "--http-restricted-api=health,inference,model-repository:admin-key=s3cret",
        log=tmp_path / "s.log",
        env=env,
        wait_ready=False,  # its readiness check is a restricted health request
    )
    try:
        proc.wait_for_output(f"Started Vertex AI HTTPService at 127.0.0.1:{port}")
        url = f"http://127.0.0.1:{port}"
        key = {"admin-key": "s3cret"}
        refused = b'{"error":"This API is restricted, expecting header \'admin-key\'"}'
        calls: list[tuple[str, str, dict[str, str], Any]] = [
            ("GET", "/h", {}, None),
            ("POST", "/p", {}, addsub_inputs(False)),
            ("POST", "/p", {REDIRECT: "v2/repository/index"}, {}),
        ]
        for method, path, headers, body in calls:
            answer = httpx.request(method, url + path, headers=headers, json=body, timeout=30)
            assert (answer.status_code, answer.content) == (403, refused), path
            allowed = httpx.request(method, url + path, headers={**headers, **key}, json=body, timeout=30)
            assert allowed.status_code == 200, allowed.text
        # An unrestricted group stays open.
        answer = httpx.post(url + "/p", headers={REDIRECT: "v2/models/addsub/config"}, timeout=30)
        assert answer.status_code == 200 and answer.json()["name"] == "addsub"
    finally:
        proc.stop()
