"""What a scheduler queues: a request and where its response goes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    OnResponse,
    TritonError,
)

from ..failures import report

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Job:
    """One request waiting for an instance; ``answer(response, flags)`` delivers its responses.

    ``answer`` is called on the thread that answers (an instance's worker, a
    backend's own thread for decoupled models, the caller's when refused), the
    last time with ``RESPONSE_COMPLETE_FINAL``; ``done`` must not block.
    """

    request: InferenceRequest
    done: OnResponse
    #: ``time.monotonic_ns()`` when the request reached its model's scheduler.
    arrival_ns: int = 0
    #: The request's trace when it is traced (``tritonpy.trace.Trace``), else None.
    trace: Any = None
    #: The response cache key when the model caches responses and this was a miss.
    cache_key: bytes | None = None
    #: How long the (missed) cache lookup took.
    cache_lookup_ns: int = 0
    #: Whether the FINAL answer went out (no answer is delivered after it).
    finished: bool = False
    #: A sequence batcher's null request (an empty slot of a batch): executed, never
    #: counted as an inference, its response dropped.
    null: bool = False
    #: Handed back by its backend (``request.reschedule()``) and queued again by the
    #: scheduler during its current execution (the sequence batcher reads and clears it).
    rescheduled: bool = False
    #: Counted as pending in its model's statistics until it starts (False: the caller
    #: runs it at once, ``DefaultScheduler.run_here``, so it never waits in a queue).
    queued: bool = True

    def answer(self, response: InferenceResponse | None, flags: int) -> None:
        """Deliver one answer. Never raises: a failing ``done`` is logged, and the
        job counts as answered once its FINAL call was made, so nothing retries it."""
        if self.finished:
            return
        if flags & RESPONSE_COMPLETE_FINAL:
            self.finished = True
        try:
            self.done(response, flags)
        except Exception:  # one caller's failing callback must not cost the batch its answers
            log.exception("delivering a response of request '%s' failed", self.request.id)


def fail_unfinished(jobs: Iterable[Job], error: TritonError) -> None:
    """Answer every job of ``jobs`` that has no FINAL answer yet with ``error``.

    The safety net under every stage after a request was queued: whatever
    escapes, each request is still answered exactly once and released.
    """
    for job in jobs:
        if not job.finished:
            request = job.request
            response = InferenceResponse.from_error(error)
            response.model_name = request.model_name
            response.model_version = request.model_version
            response.id = request.id
            job.answer(response, RESPONSE_COMPLETE_FINAL)


def internal_error(where: str, exc: BaseException) -> TritonError:
    """``exc`` when it is a TritonError, else an INTERNAL one for the client: the
    exception is logged under an incident id (``tritonpy.failures.report``)."""
    if isinstance(exc, TritonError):
        return exc
    return TritonError.internal(report(log, where, exc))


def stopped(model_name: str) -> TritonError:
    """A scheduler's refusal once it stopped taking requests (the model is unloading)."""
    return TritonError.unavailable(f"model '{model_name}' is not accepting requests")


def reschedule_refused() -> TritonError:
    """The answer to a request handed back to a scheduler that does not take requests
    back (Triton's wording; Triton logs it and leaves the request unanswered)."""
    return TritonError.invalid_arg(
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not "
        "configured to handle such a flag."
    )


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``time.monotonic()`` value; None: no limit)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


#: Runs a batch of jobs on an instance and answers each job.
Runner = Callable[[ModelInstance, Sequence[Job]], None]
