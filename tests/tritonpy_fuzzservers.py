"""Helpers of the fuzz and corpus tests (tests/fuzz): the servers they use, a valid request."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from tritonpy_testservers import GrpcServer, LiveServer

#: Every fuzz test: derandomized (CI runs the same examples each time) and bounded.
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


#: Hypothesis warns when the global ``random`` state changes while it draws an example,
#: and cannot tell a strategy's use from another thread's: the servers under test run
#: in this process, on threads of their own. These strategies draw only from
#: Hypothesis (no ``random`` anywhere in tests/fuzz); the warning, made an error by the
#: suite's filters, once failed a run as a "flaky" example. Hypothesis's own tracker
#: lists such spurious warnings under threads (HypothesisWorks/hypothesis#4562).
THREADED_SERVERS = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
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
