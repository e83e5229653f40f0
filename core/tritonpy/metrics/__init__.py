"""Prometheus metrics with Triton's names, types and labels, on their own port.

Model metrics are read from the core's statistics at scrape time, so they are
exactly what the statistics extension reports; summaries and histograms
subscribe to each observation when ``--metrics-config`` enables them. CPU and
GPU gauges are polled every ``--metrics-interval-ms``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Any

from tritonpy_sdk.host import MetricRegistry

from ..runtime.model import LoadedVersion
from ..runtime.statistics import LatencyWindow
from ._config import FIRST_RESPONSE, STAGES, MetricsConfig, stage_histogram
from ._custom import PROCESS_METRICS, custom_families
from ._exposition import Family, render
from ._system import CpuSampler, Nvml

__all__ = ["Metrics", "MetricsConfig", "create_metrics_app"]

#: Triton's first-response histogram has Triton's default buckets; the per-stage
#: histograms in microseconds are tritonpy's own (``stage_histogram``).
FIRST_RESPONSE_BUCKETS_MS = (100.0, 500.0, 2000.0, 5000.0)

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes", "success"),
    (
        "nv_inference_count",
        "Number of inferences performed (does not include cached requests)",
        "inference_count",
    ),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
        "execution_count",
    ),
)
_DURATIONS = (
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        "request_ns",
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        "queue_ns",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input_ns",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        "compute_infer_ns",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        "compute_output_ns",
    ),
)


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self.count += 1
            self.sum += value
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    self.counts[i] += 1


def _labels(mv: LoadedVersion) -> dict[str, str]:
    """A version's labels: ``model``, under model namespacing ``namespace`` (its
    repository), ``version``, and each of the config's ``metric_tags`` with Triton's
    ``_`` before its name (so no tag can replace a label of Triton's own)."""
    labels = {"model": mv.name}
    if mv.namespace:
        labels["namespace"] = mv.namespace
    labels["version"] = str(mv.version)
    labels.update({f"_{key}": value for key, value in mv.config.metric_tags.items()})
    return labels


class Metrics:
    """The metrics of one server (no global registry: two servers, two Metrics)."""

    def __init__(
        self,
        versions: Iterable[LoadedVersion] | Callable[[], Iterable[LoadedVersion]],
        config: MetricsConfig | None = None,
        cpu: bool = True,
        gpu: bool = True,
        cache: Any = None,
        custom: MetricRegistry | None = None,
        pinned: Any = None,
    ) -> None:
        self.config = config or MetricsConfig()
        #: The server's pinned pool (``total_bytes``, ``used_bytes``): Triton exports
        #: its two gauges on every host, with a GPU or not.
        self._pinned = pinned
        self._custom = custom
        self._cache = cache
        # A callable (the server's ``loaded_versions``) is read at every scrape, so
        # models loaded or unloaded later show (or vanish) at once.
        self._source = versions if callable(versions) else (lambda fixed=list(versions): fixed)
        self._versions: list[LoadedVersion] = []
        self._subscribed: set[int] = set()
        self._cpu = CpuSampler() if cpu else None
        self._nvml = Nvml() if gpu else None
        self._gpus: list[Any] = []
        self._summaries: dict[tuple[int, str], LatencyWindow] = {}
        self._histograms: dict[tuple[int, str], _Histogram] = {}
        self._refresh()

    def _refresh(self) -> None:
        """Take the current versions; latency observers for new ones, none kept for gone ones."""
        self._versions = list(self._source())
        current = {id(mv) for mv in self._versions}
        for mv in self._versions:
            if id(mv) not in self._subscribed:
                self._subscribed.add(id(mv))
                self._subscribe(mv)
        gone = self._subscribed - current
        if gone:
            self._subscribed -= gone
            for store in (self._summaries, self._histograms):
                for key in [k for k in store if k[0] in gone]:
                    del store[key]

    def _subscribe(self, mv: LoadedVersion) -> None:
        if not (self.config.summary_latencies or self.config.histogram_latencies):
            return
        key = id(mv)
        custom = self._model_buckets(mv)
        for stage in STAGES:
            if self.config.summary_latencies:
                self._summaries[(key, stage)] = LatencyWindow(self.config.summary_max_age_ms / 1000)
            if self.config.histogram_latencies:
                family = stage_histogram(stage)
                self._histograms[(key, stage)] = _Histogram(
                    custom.get(family, self.config.histogram_buckets_us)
                )
        if self.config.histogram_latencies:
            # Triton's own histogram, in milliseconds.
            self._histograms[(key, "first_response")] = _Histogram(
                custom.get(FIRST_RESPONSE, FIRST_RESPONSE_BUCKETS_MS)
            )

        def observe(stage: str, us: float, key: int = key) -> None:
            if stage == "first_response":
                histogram = self._histograms.get((key, stage))
                if histogram is not None:
                    histogram.observe(us / 1000)
                return
            window = self._summaries.get((key, stage))
            if window is not None:
                window.observe(us)
            histogram = self._histograms.get((key, stage))
            if histogram is not None:
                histogram.observe(us)

        mv.stats.observers.append(observe)

    @staticmethod
    def _model_buckets(mv: LoadedVersion) -> dict[str, tuple[float, ...]]:
        """Buckets from the config's ``model_metrics { metric_control { ... } }``."""
        out: dict[str, tuple[float, ...]] = {}
        for control in mv.config.model_metrics.metric_control:
            buckets = tuple(sorted(control.histogram_options.buckets))
            if control.metric_identifier.family and buckets:
                out[control.metric_identifier.family] = buckets
        return out

    def poll(self) -> None:
        """Refresh the per-interval gauges (CPU, GPU)."""
        if self._cpu is not None:
            self._cpu.poll()
        if self._nvml is not None and self._nvml.available:
            self._gpus = self._nvml.read()

    def families(self) -> list[Family]:
        self._refresh()
        families: list[Family] = []
        counters = [(mv, _labels(mv), mv.stats.counters()) for mv in self._versions]
        for name, help_text, key in _COUNTERS[:1]:
            families.append(self._family(name, help_text, "counter", counters, key))
        failure = Family(
            "nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "counter"
        )
        for _, labels, values in counters:
            for reason, count in values["failures"].items():
                failure.add({**labels, "reason": reason}, count)
        families.append(failure)
        for name, help_text, key in _COUNTERS[1:]:
            families.append(self._family(name, help_text, "counter", counters, key))
        if self.config.counter_latencies:
            for name, help_text, key in _DURATIONS:
                family = Family(name, help_text, "counter")
                for _, labels, values in counters:
                    family.add(labels, values[key] // 1000)
                families.append(family)
        families.append(
            self._family(
                "nv_inference_pending_request_count",
                "Instantaneous number of pending requests awaiting execution per-model.",
                "gauge",
                counters,
                "pending",
            )
        )
        load = Family("nv_model_load_duration_secs", "Model load time in seconds", "gauge")
        for mv, labels, _ in counters:
            load.add(labels, mv.load_seconds)
        families.append(load)
        families += self._cache_families(counters)
        families += self._latency_families()
        families += self._pool_families()
        families += self._system_families()
        if self._custom is not None:
            families += custom_families(self._custom)
        taken = {family.name for family in families}  # a server's own family wins over the process's
        families += [f for f in custom_families(PROCESS_METRICS) if f.name not in taken]
        return families

    @staticmethod
    def _family(name: str, help_text: str, kind: str, counters: list[Any], key: str) -> Family:
        family = Family(name, help_text, kind)
        for _, labels, values in counters:
            family.add(labels, values[key])
        return family

    def _cache_families(self, counters: list[Any]) -> list[Family]:
        cached = [(labels, values) for mv, labels, values in counters if mv.cache is not None]
        out: list[Family] = []
        if cached:
            for name, help_text, key, scale in (
                ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hits", 1),
                (
                    "nv_cache_hit_duration_per_model",
                    "Total cache hit duration per model, in microseconds",
                    "cache_hit_ns",
                    1000,
                ),
                ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_misses", 1),
                (
                    "nv_cache_miss_duration_per_model",
                    "Total cache miss (insert+lookup) duration per model, in microseconds",
                    "cache_miss_ns",
                    1000,
                ),
            ):
                family = Family(name, help_text, "counter")
                for labels, values in cached:
                    family.add(labels, values[key] // scale)
                out.append(family)
        if self._cache is not None:
            stats = self._cache.stats()
            # Triton's names, order and help; every family a gauge, as Triton's are.
            for name, help_text, key in (
                ("nv_cache_util", "Cache utilization [0.0 - 1.0]", "utilization"),
                ("nv_cache_num_entries", "Number of responses stored in response cache", "entries"),
                ("nv_cache_num_hits", "Number of cache hits in response cache", "hits"),
                ("nv_cache_num_misses", "Number of cache misses in response cache", "misses"),
                ("nv_cache_num_lookups", "Number of cache lookups in response cache", "lookups"),
                ("nv_cache_num_evictions", "Number of cache evictions in response cache", "evictions"),
                (
                    "nv_cache_lookup_duration",
                    "Total cache lookup duration (hit and miss), in microseconds",
                    "lookup_duration_us",
                ),
                (
                    "nv_cache_insertion_duration",
                    "Total cache insertion duration, in microseconds",
                    "insertion_duration_us",
                ),
            ):
                out.append(Family(name, help_text, "gauge", [(name, {}, float(stats.get(key, 0)))]))
        return out

    def _latency_families(self) -> list[Family]:
        out: list[Family] = []
        if self.config.summary_latencies:
            for stage in STAGES:
                family = Family(
                    f"nv_inference_{stage}_summary_us",
                    f"Summary of {stage} durations in microseconds",
                    "summary",
                )
                for mv in self._versions:
                    window = self._summaries.get((id(mv), stage))
                    if window is None:
                        continue
                    labels = _labels(mv)
                    family.add(labels, window.count, "_count")
                    family.add(labels, window.sum, "_sum")
                    for q, v in zip(
                        self.config.summary_quantiles, window.quantiles(self.config.summary_quantiles)
                    ):
                        family.add({**labels, "quantile": _q(q)}, v)
                out.append(family)
        if self.config.histogram_latencies:
            for stage, name, help_text in [
                ("first_response", FIRST_RESPONSE, "Duration from request to first response in milliseconds"),
                *(
                    (
                        stage,
                        stage_histogram(stage),
                        f"Histogram of {stage} durations in microseconds (tritonpy's; Triton has none)",
                    )
                    for stage in STAGES
                ),
            ]:
                family = Family(name, help_text, "histogram")
                for mv in self._versions:
                    h = self._histograms.get((id(mv), stage))
                    if h is None:
                        continue
                    labels = _labels(mv)
                    for bound, count in zip(h.buckets, h.counts):
                        family.add({**labels, "le": _q(bound)}, count, "_bucket")
                    family.add({**labels, "le": "+Inf"}, h.count, "_bucket")
                    family.add(labels, h.sum, "_sum")
                    family.add(labels, h.count, "_count")
                out.append(family)
        return out

    def _pool_families(self) -> list[Family]:
        if self._pinned is None:
            return []
        return [
            Family(
                "nv_pinned_memory_pool_total_bytes",
                "Pinned memory pool total memory size, in bytes",
                "gauge",
                [("nv_pinned_memory_pool_total_bytes", {}, self._pinned.total_bytes)],
            ),
            Family(
                "nv_pinned_memory_pool_used_bytes",
                "Pinned memory pool used memory size, in bytes",
                "gauge",
                [("nv_pinned_memory_pool_used_bytes", {}, self._pinned.used_bytes)],
            ),
        ]

    def _system_families(self) -> list[Family]:
        out: list[Family] = []
        if self._cpu is not None:
            total, used = self._cpu.memory()
            out.append(
                Family(
                    "nv_cpu_utilization",
                    "CPU utilization rate [0.0 - 1.0]",
                    "gauge",
                    [("nv_cpu_utilization", {}, self._cpu.utilization)],
                )
            )
            out.append(
                Family(
                    "nv_cpu_memory_total_bytes",
                    "CPU total memory (RAM), in bytes",
                    "gauge",
                    [("nv_cpu_memory_total_bytes", {}, total)],
                )
            )
            out.append(
                Family(
                    "nv_cpu_memory_used_bytes",
                    "CPU used memory (RAM), in bytes",
                    "gauge",
                    [("nv_cpu_memory_used_bytes", {}, used)],
                )
            )
        if self._gpus:
            specs = (
                ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "utilization"),
                ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "memory_total"),
                ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "memory_used"),
                ("nv_gpu_power_usage", "GPU power usage in watts", "power_watts"),
            )
            for name, help_text, attr in specs:
                family = Family(name, help_text, "gauge")
                for gpu in self._gpus:
                    family.add({"gpu_uuid": gpu.uuid}, getattr(gpu, attr))
                out.append(family)
        return out

    def render(self) -> str:
        return render(self.families())


def _q(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and not math.isinf(value) else repr(value)


def create_metrics_app(metrics: Metrics) -> Any:
    """The ASGI app of the metrics port: ``GET /metrics`` in the Prometheus text format."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def scrape(request: Request) -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return Starlette(routes=[Route("/metrics", scrape, methods=["GET"])])
