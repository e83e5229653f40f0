"""Custom metrics a backend (or a model through it) exports on the metrics port.

Triton's ``TRITONSERVER_MetricFamily`` API: a family has a name, a
description and a kind; each metric of a family is one label set. The core
owns one :class:`MetricRegistry` per server and renders it with its own
metrics; backends reach it as ``backend.server.metrics``.
"""

from __future__ import annotations

import bisect
import enum
import re
import threading
from collections.abc import Mapping, Sequence

from ._errors import TritonError

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MetricKind(enum.Enum):
    """The kind of a ``MetricFamily``: a counter, a gauge or a histogram."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Metric:
    """One label set of a family; thread-safe."""

    __slots__ = ("family", "labels", "buckets", "_value", "_counts", "_sum", "_count", "_lock")

    def __init__(self, family: MetricFamily, labels: dict[str, str], buckets: Sequence[float] | None) -> None:
        self.family = family
        self.labels = labels
        self.buckets = tuple(buckets or ())
        self._value = 0.0
        self._counts = [0] * (len(self.buckets) + 1)
        self._sum = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def increment(self, value: float) -> None:
        kind = self.family.kind
        if kind is MetricKind.HISTOGRAM:
            raise TritonError.unsupported("increment is not supported for a histogram metric")
        if kind is MetricKind.COUNTER and value < 0:
            raise TritonError.invalid_arg("value must be non-negative for counter metric")
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        if self.family.kind is not MetricKind.GAUGE:
            raise TritonError.unsupported(f"set is not supported for a {self.family.kind.value} metric")
        with self._lock:
            self._value = float(value)

    def observe(self, value: float) -> None:
        if self.family.kind is not MetricKind.HISTOGRAM:
            raise TritonError.unsupported(f"observe is not supported for a {self.family.kind.value} metric")
        with self._lock:
            self._counts[bisect.bisect_left(self.buckets, value)] += 1
            self._sum += value
            self._count += 1

    def value(self) -> float:
        if self.family.kind is MetricKind.HISTOGRAM:
            raise TritonError.unsupported("value is not supported for a histogram metric")
        return self._value

    def histogram(self) -> tuple[list[tuple[float, int]], float, int]:
        """Cumulative ``(upper bound, count)`` per bucket (``+Inf`` last), sum, count."""
        with self._lock:
            counts, total, count = list(self._counts), self._sum, self._count
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.buckets, float("inf")), counts):
            running += n
            out.append((bound, running))
        return out, total, count


class MetricFamily:
    """A named family of metrics of one kind."""

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        self.name = name
        self.description = description
        self.kind = kind
        self._metrics: dict[tuple[tuple[str, str], ...], Metric] = {}
        self._lock = threading.Lock()

    def metric(
        self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None
    ) -> Metric:
        """The metric of ``labels`` (created on first use; the same object afterwards)."""
        clean = {str(k): str(v) for k, v in (labels or {}).items()}
        for label in clean:
            if not _LABEL.match(label):
                raise TritonError.invalid_arg(f"invalid metric label name '{label}'")
        if self.kind is MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonError.invalid_arg("Missing required buckets for histogram metric")
            bounds = list(buckets)
            if any(low >= high for low, high in zip(bounds, bounds[1:])):
                # prometheus-cpp's words, which Triton passes on
                raise TritonError.invalid_arg("Bucket Boundaries must be strictly sorted")
        elif buckets is not None:
            raise TritonError.invalid_arg(f"buckets are only for histogram metrics, not {self.kind.value}")
        key = tuple(sorted(clean.items()))
        with self._lock:
            found = self._metrics.get(key)
            if found is None:
                found = self._metrics[key] = Metric(self, clean, buckets)
            return found

    def remove(self, metric: Metric) -> None:
        with self._lock:
            self._metrics.pop(tuple(sorted(metric.labels.items())), None)

    def metrics(self) -> list[Metric]:
        with self._lock:
            return list(self._metrics.values())


class MetricRegistry:
    """Every custom family of one server; thread-safe."""

    def __init__(self) -> None:
        self._families: dict[str, MetricFamily] = {}
        self._lock = threading.Lock()

    def family(self, name: str, description: str, kind: MetricKind | str) -> MetricFamily:
        """The family ``name``, created on first use; an existing one must have the same kind."""
        kind = MetricKind(kind.lower()) if isinstance(kind, str) else kind
        if not _NAME.match(name):
            raise TritonError.invalid_arg(f"invalid metric family name '{name}'")
        with self._lock:
            found = self._families.get(name)
            if found is None:
                found = self._families[name] = MetricFamily(name, description, kind)
            elif found.kind is not kind:
                raise TritonError.invalid_arg(
                    f"metric family '{name}' already exists as a {found.kind.value}, not a {kind.value}"
                )
            return found

    def remove(self, name: str) -> None:
        with self._lock:
            self._families.pop(name, None)

    def families(self) -> list[MetricFamily]:
        with self._lock:
            return [self._families[n] for n in sorted(self._families)]
