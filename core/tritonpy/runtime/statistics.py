"""Per-model-version statistics, stamped by the core for every request and execution.

Backends report nothing: the core times each stage around ``execute`` and
every front end (statistics extension, metrics) reads the same numbers.

Stages of a request, as Triton defines them:
queue (arrival at the scheduler → its execution starts), compute_input
(execution start → ``execute`` called), compute_infer (``execute`` running),
compute_output (``execute`` returned → response handed back), and the whole
request duration (arrival → response) counted as success or fail. As in Triton,
a failed request counts in ``fail`` alone (its count and duration): the stages,
the request duration metric and the latency summaries and histograms are those
of successful requests; an execution counts (``execution_count``, batch
statistics) whatever its requests' outcome.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Failure reasons, as Triton labels nv_inference_request_failure.
FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")


@dataclass(slots=True)
class Duration:
    """A count and the total nanoseconds of the events counted."""

    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns

    def as_dict(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


#: Observes one latency in microseconds (summaries and histograms subscribe).
Observer = Callable[[str, float], None]


@dataclass(slots=True)
class ExecutionTimes:
    """Timestamps (``time.monotonic_ns``) of one execution of a batch."""

    start: int
    infer_start: int
    infer_end: int
    end: int


class ModelStatistics:
    """Counters of one model version. Thread-safe: workers record, scrapes read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.success = Duration()
        self.fail = Duration()
        self.queue = Duration()
        self.compute_input = Duration()
        self.compute_infer = Duration()
        self.compute_output = Duration()
        self.cache_hit = Duration()
        self.cache_miss = Duration()
        self.failures = dict.fromkeys(FAILURE_REASONS, 0)
        self.inference_count = 0
        self.execution_count = 0
        #: ``time.monotonic_ns()`` at the end of the last inference (0: none yet); the
        #: wall-clock time is worked out when read (``last_inference_ms``), not per request.
        self.last_inference_ns = 0
        self.pending = 0
        self.batches: dict[int, BatchStats] = {}
        self.observers: list[Observer] = []
        #: Whether a request's first response is its only one (a model that is not
        #: decoupled): then "first_response" is observed with the request's duration;
        #: a decoupled model's senders call ``first_response`` instead.
        self.single_response = True

    @property
    def last_inference_ms(self) -> int:
        """Wall-clock milliseconds since the epoch of the last inference's end (0: none)."""
        last = self.last_inference_ns
        if not last:
            return 0
        return (time.time_ns() - max(0, time.monotonic_ns() - last)) // 1_000_000

    # -- recording (worker threads) ----------------------------------------------------

    def queued(self) -> None:
        with self._lock:
            self.pending += 1

    def dequeued(self, count: int) -> None:
        with self._lock:
            self.pending -= count

    def record_execution(
        self,
        times: ExecutionTimes,
        arrivals: Sequence[int],
        batch_sizes: Sequence[int],
        ok: Sequence[bool],
        reason: str = "BACKEND",
        padding: int = 0,
    ) -> None:
        """One execution of ``len(arrivals)`` requests, and each request's outcome;
        ``padding`` null requests (a sequence batcher's empty slots) ran beside them."""
        if len(arrivals) == 1 and not padding and reason == "BACKEND":
            self.record_one(times, arrivals[0], batch_sizes[0], ok[0])
            return
        compute_input = times.infer_start - times.start
        compute_infer = times.infer_end - times.infer_start
        compute_output = times.end - times.infer_end
        total_batch = sum(batch_sizes) + padding
        observed: list[tuple[str, float]] = []
        with self._lock:
            self.execution_count += 1
            self.last_inference_ns = times.end
            batch = self.batches.get(total_batch)
            if batch is None:
                batch = self.batches[total_batch] = BatchStats()
            batch.compute_input.add(compute_input)
            batch.compute_infer.add(compute_infer)
            batch.compute_output.add(compute_output)
            for arrival, size, success in zip(arrivals, batch_sizes, ok):
                total_ns = max(0, times.end - arrival)
                if not success:  # as Triton: a failure counts as one, and in no stage
                    self.fail.add(total_ns)
                    self.failures[reason] += 1
                    continue
                queue_ns = max(0, times.start - arrival)
                self.queue.add(queue_ns)
                self.compute_input.add(compute_input)
                self.compute_infer.add(compute_infer)
                self.compute_output.add(compute_output)
                self.success.add(total_ns)
                self.inference_count += size
                if self.observers:
                    if self.single_response:
                        observed.append(("first_response", total_ns / 1000))
                    observed += [
                        ("request", total_ns / 1000),
                        ("queue", queue_ns / 1000),
                        ("compute_input", compute_input / 1000),
                        ("compute_infer", compute_infer / 1000),
                        ("compute_output", compute_output / 1000),
                    ]
        for stage, us in observed:
            for observer in self.observers:
                observer(stage, us)

    def record_one(self, times: ExecutionTimes, arrival: int, batch_size: int, ok: bool) -> None:
        """``record_execution`` of one request without padding, the common case (no
        batching): the same updates, inlined (this runs once per request)."""
        compute_input = times.infer_start - times.start
        compute_infer = times.infer_end - times.infer_start
        compute_output = times.end - times.infer_end
        queue_ns = times.start - arrival
        if queue_ns < 0:
            queue_ns = 0
        total_ns = times.end - arrival
        if total_ns < 0:
            total_ns = 0
        with self._lock:
            self.execution_count += 1
            self.last_inference_ns = times.end
            batch = self.batches.get(batch_size)
            if batch is None:
                batch = self.batches[batch_size] = BatchStats()
            d = batch.compute_input
            d.count += 1
            d.ns += compute_input
            d = batch.compute_infer
            d.count += 1
            d.ns += compute_infer
            d = batch.compute_output
            d.count += 1
            d.ns += compute_output
            if not ok:  # as Triton: a failure counts as one, and in no stage
                d = self.fail
                d.count += 1
                d.ns += total_ns
                self.failures["BACKEND"] += 1
                return
            d = self.queue
            d.count += 1
            d.ns += queue_ns
            d = self.compute_input
            d.count += 1
            d.ns += compute_input
            d = self.compute_infer
            d.count += 1
            d.ns += compute_infer
            d = self.compute_output
            d.count += 1
            d.ns += compute_output
            d = self.success
            d.count += 1
            d.ns += total_ns
            self.inference_count += batch_size
            observing = bool(self.observers)
        if observing:
            observed: tuple[tuple[str, float], ...] = (
                ("request", total_ns / 1000),
                ("queue", queue_ns / 1000),
                ("compute_input", compute_input / 1000),
                ("compute_infer", compute_infer / 1000),
                ("compute_output", compute_output / 1000),
            )
            if self.single_response:
                observed += (("first_response", total_ns / 1000),)
            for stage, us in observed:
                for observer in self.observers:
                    observer(stage, us)

    def first_response(self, ns: int) -> None:
        """A decoupled model's request got its first response ``ns`` after it arrived."""
        for observer in self.observers:
            observer("first_response", ns / 1000)

    def record_cache_hit(self, arrival: int, lookup_ns: int) -> None:
        """A request answered from the response cache (no execution). As Triton
        counts it: a success, a cache hit, and a queue entry (its queue time the
        wait before the lookup, none here: the lookup starts on arrival)."""
        with self._lock:
            self.success.add(max(0, time.monotonic_ns() - arrival))
            self.queue.add(0)
            self.cache_hit.add(lookup_ns)
            self.last_inference_ns = time.monotonic_ns()

    def record_cache_miss(self, ns: int) -> None:
        """Lookup plus insertion time of a request the cache did not hold."""
        with self._lock:
            self.cache_miss.add(ns)

    def record_rejection(self, arrival: int, reason: str, count: int = 1) -> None:
        """A request that failed outside an execution of the model's own: rejected or
        cancelled in a queue, an ensemble's failed run (which Triton counts ``count=2``
        times)."""
        ns = max(0, time.monotonic_ns() - arrival)
        with self._lock:
            self.fail.add(ns * count, count)
            self.failures[reason] += count

    # -- reading -------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything, copied under the lock, in the statistics extension's shape."""
        with self._lock:
            return {
                "last_inference": self.last_inference_ms,
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "inference_stats": {
                    "success": self.success.as_dict(),
                    "fail": self.fail.as_dict(),
                    "queue": self.queue.as_dict(),
                    "compute_input": self.compute_input.as_dict(),
                    "compute_infer": self.compute_infer.as_dict(),
                    "compute_output": self.compute_output.as_dict(),
                    "cache_hit": self.cache_hit.as_dict(),
                    "cache_miss": self.cache_miss.as_dict(),
                },
                "response_stats": {},
                "batch_stats": [
                    {
                        "batch_size": size,
                        "compute_input": b.compute_input.as_dict(),
                        "compute_infer": b.compute_infer.as_dict(),
                        "compute_output": b.compute_output.as_dict(),
                    }
                    for size, b in sorted(self.batches.items())
                ],
                "memory_usage": [],
            }

    def counters(self) -> dict[str, Any]:
        """The numbers Triton's model metrics show, copied under the lock."""
        with self._lock:
            return {
                "success": self.success.count,
                "failures": dict(self.failures),
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "request_ns": self.success.ns,  # Triton's request duration: successes only
                "queue_ns": self.queue.ns,
                "compute_input_ns": self.compute_input.ns,
                "compute_infer_ns": self.compute_infer.ns,
                "compute_output_ns": self.compute_output.ns,
                "pending": self.pending,
                "cache_hits": self.cache_hit.count,
                "cache_misses": self.cache_miss.count,
                "cache_hit_ns": self.cache_hit.ns,
                "cache_miss_ns": self.cache_miss.ns,
            }


class LatencyWindow:
    """Observations of the last ``max_age`` seconds, for summary quantiles."""

    def __init__(self, max_age: float = 60.0, max_samples: int = 100_000) -> None:
        self.max_age = max_age
        self._values: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self.count = 0
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._values.append((now, value))
            self.count += 1
            self.sum += value

    def quantiles(self, qs: tuple[float, ...]) -> list[float]:
        cutoff = time.monotonic() - self.max_age
        with self._lock:
            while self._values and self._values[0][0] < cutoff:
                self._values.popleft()
            values = sorted(v for _, v in self._values)
        if not values:
            return [float("nan")] * len(qs)
        return [values[min(len(values) - 1, int(q * len(values)))] for q in qs]
