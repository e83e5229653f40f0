"""``tritonserver``'s in-process custom metrics: ``MetricFamily(kind, name, description)`` and
``Metric(family, labels)``, the process's, reported by every server in it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonpy
from tritonpy.metrics._custom import PROCESS_METRICS
from tritonpy_sdk import ErrorCode, TritonError


@pytest.fixture(autouse=True)
def _forget_families() -> Iterator[None]:
    """The families are the process's: take this module's out again, so that the
    servers of later tests report only their own."""
    yield
    for family in PROCESS_METRICS.families():
        PROCESS_METRICS.remove(family.name)


def _samples(server: tritonpy.Server, family: str) -> list[str]:
    return [line for line in server.metrics().splitlines() if line.startswith(family)]


def test_counters_and_gauges_are_reported_by_every_server(tmp_path: Path) -> None:
    requests = tritonpy.MetricFamily(tritonpy.MetricKind.COUNTER, "app_requests_total", "requests seen")
    depth = tritonpy.MetricFamily(tritonpy.MetricKind.GAUGE, "app_queue_depth", "queued items")
    served = tritonpy.Metric(requests, {"route": "a"})
    other = tritonpy.Metric(requests, {"route": "b"})
    queue = tritonpy.Metric(depth)
    served.increment(2)
    served.increment(0.5)
    other.increment(1)
    queue.set_value(7)
    queue.increment(-2)  # a gauge goes both ways
    assert (served.kind, served.value, other.value) == (tritonpy.MetricKind.COUNTER, 2.5, 1.0)
    assert (queue.kind, queue.value) == (tritonpy.MetricKind.GAUGE, 5.0)
    tmp_path.joinpath("models").mkdir()
    with (
        tritonpy.Server(model_repository=tmp_path / "models") as one,
        tritonpy.Server(model_repository=tmp_path / "models") as two,
    ):
        for server in (one, two):
            assert _samples(server, "app_requests_total") == [
                'app_requests_total{route="a"} 2.5',
                'app_requests_total{route="b"} 1',
            ]
            assert _samples(server, "app_queue_depth") == ["app_queue_depth 5"]
            assert "# TYPE app_requests_total counter" in server.metrics()
        del other  # as TRITONSERVER_MetricDelete: its label set leaves the report
        gc.collect()
        assert _samples(one, "app_requests_total") == ['app_requests_total{route="a"} 2.5']


def test_what_a_kind_does_not_allow_is_refused() -> None:
    counter = tritonpy.Metric(tritonpy.MetricFamily(tritonpy.MetricKind.COUNTER, "app_refusals", "x"))
    with pytest.raises(TritonError) as err:
        counter.set_value(1)
    assert err.value.code is ErrorCode.UNSUPPORTED
    with pytest.raises(TritonError) as err:
        counter.increment(-1)
    assert (err.value.code, err.value.message) == (
        ErrorCode.INVALID_ARG,
        "value must be non-negative for counter metric",
    )
    with pytest.raises(TritonError, match="already exists as a counter, not a gauge"):
        tritonpy.MetricFamily(tritonpy.MetricKind.GAUGE, "app_refusals", "x")
    with pytest.raises(TritonError, match="invalid metric family name 'bad name'"):
        tritonpy.MetricFamily(tritonpy.MetricKind.GAUGE, "bad name", "x")
    with pytest.raises(TritonError) as err:
        tritonpy.MetricFamily(tritonpy.MetricKind.HISTOGRAM, "app_latency", "x")
    assert err.value.code is ErrorCode.UNSUPPORTED
