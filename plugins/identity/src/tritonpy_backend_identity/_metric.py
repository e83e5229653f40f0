"""The backend's custom metric, ``input_byte_size_counter``, as Triton's identity backend defines it.

One counter family for the backend, one series per model version (labels
``model`` and ``version``), incremented by the byte size of every input the
backend answers with (BYTES counted as serialized: 4 bytes of length before
each element).

Series are counted by reference, as Triton's core counts them
(``MetricFamily::Add`` / ``Remove``): a version reloaded in place loads its new
copy before the old one unloads, and both share the series of their labels; it
leaves the report only when the last of them unloads.
"""

from __future__ import annotations

import threading

from tritonpy_sdk import Metric, MetricFamily, MetricKind, ServerApi

FAMILY = "input_byte_size_counter"
DESCRIPTION = "Cumulative input byte size of all requests received by the model"


class InputByteSize:
    """The family in the server's custom metrics, and its series by reference count."""

    def __init__(self, server: ServerApi) -> None:
        self._server = server
        self.family: MetricFamily = server.metrics.family(FAMILY, DESCRIPTION, MetricKind.COUNTER)
        self._refs: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def acquire(self, model: str, version: int) -> Metric:
        """The series of ``model`` version ``version`` (made on its first use)."""
        key = (model, str(version))
        with self._lock:
            self._refs[key] = self._refs.get(key, 0) + 1
            return self.family.metric({"model": key[0], "version": key[1]})

    def release(self, metric: Metric) -> None:
        """Let go of a series ``acquire`` gave; the last release takes it out of the report."""
        key = (metric.labels["model"], metric.labels["version"])
        with self._lock:
            left = self._refs.get(key, 0) - 1
            if left > 0:
                self._refs[key] = left
                return
            self._refs.pop(key, None)
            self.family.remove(metric)

    def close(self) -> None:
        """Take the family out of the server's metrics (the backend is finalized)."""
        self._server.metrics.remove(FAMILY)
