"""Custom metrics in process, as ``tritonserver`` makes them: ``MetricFamily(kind, name,
description)`` and ``Metric(family, labels)``.

As in Triton, whose metrics registry is the process's, the families made here
belong to the process: every server started in it reports them, after its own
metrics, in ``Server.metrics()`` and on its metrics port. A ``Metric`` is one
label set of its family; deleting it (the object going away) removes that label
set from the report, as ``TRITONSERVER_MetricDelete`` does. Backends and Python
models have their own registry per server (``backend.server.metrics``,
``pb_utils.MetricFamily``).
"""

from __future__ import annotations

from tritonpy_sdk import MetricKind, TritonError

from .metrics._custom import PROCESS_METRICS


class MetricFamily:
    """A named family of counters or gauges, made once per process and name."""

    def __init__(self, kind: MetricKind, name: str, description: str) -> None:
        if kind is MetricKind.HISTOGRAM:
            raise TritonError.unsupported(
                "histogram metric families need bucket bounds, which tritonserver's Metric cannot "
                "take: make them through a backend's registry (pb_utils.MetricFamily.HISTOGRAM)"
            )
        self.kind = kind
        self.name = name
        self.description = description
        self._family = PROCESS_METRICS.family(name, description, kind)


class Metric:
    """One label set of a family: ``increment`` (counters and gauges), ``set_value``
    (gauges), ``value`` and ``kind``."""

    def __init__(self, family: MetricFamily, labels: dict[str, str] | None = None) -> None:
        self._family = family
        self._metric = family._family.metric(labels)

    @property
    def kind(self) -> MetricKind:
        return self._family.kind

    @property
    def value(self) -> float:
        return self._metric.value()

    def increment(self, value: float) -> None:
        self._metric.increment(value)

    def set_value(self, value: float) -> None:
        self._metric.set(value)

    def __del__(self) -> None:
        metric = getattr(self, "_metric", None)
        if metric is not None:
            self._family._family.remove(metric)
