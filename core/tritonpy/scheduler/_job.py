"""What a scheduler queues: a request and where its response goes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import InferenceRequest, InferenceResponse, ModelInstance


@dataclass(slots=True, eq=False)
class Job:
    """One request waiting for an instance; ``done`` receives its response.

    ``done`` is called exactly once, on the worker thread that ran the job (or
    on the caller's thread if the job is refused), and must not block.
    """

    request: InferenceRequest
    done: Callable[[InferenceResponse], None]
    #: ``time.monotonic_ns()`` when the request reached its model's scheduler.
    arrival_ns: int = 0
    #: The request's trace when it is traced (``tritonpy.trace.Trace``), else None.
    trace: Any = None
    #: The response cache key when the model caches responses and this was a miss.
    cache_key: bytes | None = None
    #: How long the (missed) cache lookup took.
    cache_lookup_ns: int = 0


#: Runs a batch of jobs on an instance and calls each job's ``done``.
Runner = Callable[[ModelInstance, Sequence[Job]], None]
