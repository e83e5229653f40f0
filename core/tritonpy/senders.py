"""Answering a batch through response senders (decoupled models, deferred answers).

When a backend's ``execute`` returns ``None`` it answers each request through
``request.response_sender``, later and from any thread. ``SenderBatch`` turns
those sends into job answers: it shapes each response for its client, holds a
non-decoupled model to exactly one response, and records the execution in the
statistics once every request of the batch sent FINAL (compute time runs until
the last one did).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceResponse, ResponseSender, TritonError

from .responses import finish_response
from .scheduler import Job, internal_error
from .statistics import ExecutionTimes

if TYPE_CHECKING:
    from .model import LoadedVersion

_STAMPS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")


class SenderBatch:
    """The jobs of one ``execute`` call whose backend answers through senders."""

    def __init__(self, model: LoadedVersion, jobs: Sequence[Job], start_ns: int, decoupled: bool) -> None:
        self._model = model
        self._jobs = jobs
        self._start = start_ns
        self.infer_start = start_ns
        self._decoupled = decoupled
        self._lock = threading.Lock()
        self._open = len(jobs)
        self._returned = False
        self._last_final = start_ns
        self._ok = [True] * len(jobs)
        self._held: list[InferenceResponse | None] = [None] * len(jobs)
        for index, job in enumerate(jobs):
            job.request.response_sender = ResponseSender(
                functools.partial(self._deliver, index), job.request, decoupled
            )

    def _deliver(self, index: int, response: InferenceResponse | None, flags: int) -> None:
        job = self._jobs[index]
        model = self._model
        final = bool(flags & RESPONSE_COMPLETE_FINAL)
        if response is not None:
            try:
                response = finish_response(model.spec, model.labels, job.request, response)
            except Exception as exc:  # this request's response is bad, not the batch's
                response = model.error_response(job, internal_error("invalid response", exc))
            if response.error is not None:
                self._ok[index] = False
            if not self._decoupled:
                if self._held[index] is not None:
                    # Triton refuses a second response of a non-decoupled model; the first stands.
                    model.log_warning(
                        f"model '{model.name}' is not decoupled but sent more than one response "
                        f"for request '{job.request.id}'; extra responses are dropped"
                    )
                else:
                    self._held[index] = response
                response = None
        if not self._decoupled and final:
            response = self._held[index]
            self._held[index] = None
            if response is None:
                self._ok[index] = False
                response = model.error_response(
                    job,
                    TritonError.internal(
                        f"model '{model.name}' sent the FINAL flag without a response; "
                        "a model that is not decoupled must send exactly one response"
                    ),
                )
        if final:
            now = time.monotonic_ns()
            if job.trace is not None:
                for name, ns in zip(_STAMPS, (self._start, self.infer_start, now, now)):
                    job.trace.stamp(name, ns)
        if final:
            self._finished_one(now)  # statistics first, as on the direct path
        if response is not None or final:
            job.answer(response, RESPONSE_COMPLETE_FINAL if final else 0)

    def _finished_one(self, now: int) -> None:
        with self._lock:
            self._open -= 1
            self._last_final = max(self._last_final, now)
            complete = self._open == 0 and self._returned
        if complete:
            self._record()

    def handed_back(self, indices: Sequence[int]) -> None:
        """``execute`` returned with the requests at ``indices`` handed back to run again
        (``request.reschedule()``): their senders close (what they sent stands) and they
        count as done in this execution, which they ran in."""
        now = time.monotonic_ns()
        for index in indices:
            sender = self._jobs[index].request.response_sender
            if sender is None or sender.closed:
                continue  # FINAL already sent: already counted
            sender.close()
            self._held[index] = None
            self._finished_one(now)

    def execute_returned(self) -> None:
        """``execute`` returned None: the batch completes when every request sent FINAL."""
        with self._lock:
            self._returned = True
            complete = self._open == 0
        if complete:
            self._record()

    def close(self) -> None:
        """``execute`` returned the responses itself: the senders are not used."""
        for job in self._jobs:
            sender = job.request.response_sender
            if sender is not None:
                sender.close()

    def fail_open(self, error: TritonError) -> None:
        """``execute`` raised: end every request that has not sent FINAL with ``error``."""
        for job in self._jobs:
            sender = job.request.response_sender
            if sender is not None and not sender.closed:
                try:
                    sender.send(InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL)
                except TritonError:  # closed by the backend meanwhile
                    pass

    def _record(self) -> None:
        end = self._last_final
        times = ExecutionTimes(self._start, self.infer_start, end, end)
        jobs, ok, padding = self._jobs, self._ok, 0
        if self._model.sequence and any(j.null for j in jobs):  # null requests: batch size only
            real = [i for i, j in enumerate(jobs) if not j.null]
            jobs, ok, padding = [jobs[i] for i in real], [ok[i] for i in real], len(jobs) - len(real)
        self._model.stats.record_execution(
            times,
            [j.arrival_ns for j in jobs],
            [j.request.batch_size for j in jobs],
            ok,
            padding=padding,
        )
