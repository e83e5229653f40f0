"""Health, readiness, metadata and the repository index when a model failed to load,
answered as the real Triton answers them."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def http(live_with_failure) -> httpx.Client:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=f"http://{live_with_failure.url}", timeout=10) as c:
        yield c


def test_health_with_a_failed_model(http: httpx.Client) -> None:
    assert http.get("/v2/health/live").status_code == 200
    ready = http.get("/v2/health/ready")  # strict readiness: Triton answers 400, empty body
    assert ready.status_code == 400 and ready.content == b""


def test_failed_model_answers(http: httpx.Client) -> None:
    no_versions = "Request for unknown model: 'broken' has no available versions"
    for resp in (
        http.get("/v2/models/broken"),
        http.get("/v2/models/broken/config"),
        http.post("/v2/models/broken/infer", json={"inputs": []}),
    ):
        assert resp.status_code == 404, resp.text
        assert resp.json() == {"error": no_versions}
    for path in ("/v2/models/broken/ready", "/v2/models/broken/versions/1/ready"):
        resp = http.get(path)
        assert resp.status_code == 400 and resp.json() == {"error": "Model version not ready"}


def test_repository_index_gives_the_reason(http: httpx.Client) -> None:
    index = {m["name"]: m for m in http.post("/v2/repository/index").json()}
    assert index["addsub"] == {"name": "addsub", "version": "1", "state": "READY"}
    broken = index["broken"]
    assert broken["state"] == "UNAVAILABLE" and broken["version"] == "1"
    assert "cannot initialize" in broken["reason"]
    assert [m["name"] for m in http.post("/v2/repository/index", json={"ready": True}).json()] == ["addsub"]


def test_other_models_keep_serving(http: httpx.Client) -> None:
    doc = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [1, 1, 1, 1]},
        ]
    }
    resp = http.post("/v2/models/addsub/infer", json=doc)
    assert resp.status_code == 200 and resp.json()["outputs"][0]["data"] == [2, 3, 4, 5]
