"""Helpers of the fuzz and corpus tests (tests/fuzz): the servers they use, a valid request."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from tritonpy_testservers import GrpcServer, LiveServer

#: Every fuzz test: derandomized (CI runs the same examples each time) and bounded.
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Servers:
    def __init__(self, http: LiveServer, grpc: GrpcServer) -> None:
        self.http = http
        self.grpc = grpc


ADDSUB_BODY = {
    "inputs": [
        {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [1, 1, 1, 1]},
    ]
}


def assert_serves(url: str) -> None:
    """A valid request still gets the right answer."""
    import httpx

    for model in ("addsub", "batched"):
        resp = httpx.post(f"http://{url}/v2/models/{model}/infer", json=ADDSUB_BODY, timeout=10)
        assert resp.status_code == 200, resp.text
        assert resp.json()["outputs"][0]["data"] == [2, 3, 4, 5]
