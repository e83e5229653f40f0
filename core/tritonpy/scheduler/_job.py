"""What a scheduler queues: a request and where its response goes."""

from __future__ import annotations

import time

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import InferenceRequest, ModelInstance, OnResponse


@dataclass(slots=True, eq=False)
class Job:
    """One request waiting for an instance; ``done(response, flags)`` receives its responses.

    ``done`` is called on the thread that answers (an instance's worker, a
    backend's own thread for decoupled models, the caller's when refused), the
    last time with ``RESPONSE_COMPLETE_FINAL``, and must not block.
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


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``time.monotonic()`` value; None: no limit)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


#: Runs a batch of jobs on an instance and calls each job's ``done``.
Runner = Callable[[ModelInstance, Sequence[Job]], None]
