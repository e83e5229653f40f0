"""The ``Scheduler`` protocol: what a model version needs of its scheduler.

Every scheduler takes ``Job`` objects from any thread (``enqueue``), hands lists
of them to a ``Runner`` on an instance's worker thread, and stops by a deadline.
Two capabilities are optional; each is declared here with a default that means
"not this one", and a scheduler that has it says so with its flag:

- ``can_run_here`` / ``run_here``: a caller that blocks for the answer anyway may
  run its request on its own thread (``DefaultScheduler``);
- ``can_reschedule`` / ``reschedule``: requests their backend hands back
  (``request.reschedule()``) are taken back to run again (``SequenceBatcher`` with
  ``iterative_sequence``, as in Triton).

Schedulers subclass the protocol, so they inherit the defaults. A model version
reads the flags once, when it is built (``runtime.model.LoadedVersion``), never per
request.
"""

from __future__ import annotations

from typing import Protocol

from tritonpy_sdk import TritonError

from ._job import Job, reschedule_refused


class Scheduler(Protocol):
    """What a model version needs of its scheduler (see the module docstring)."""

    #: Whether ``run_here`` may run a job on the calling thread (False: it never does).
    can_run_here: bool = False
    #: Whether ``reschedule`` takes jobs back (False: it refuses every one).
    can_reschedule: bool = False

    def start(self) -> None:
        """Start the worker threads; ``enqueue`` works from now on."""
        ...

    def enqueue(self, job: Job) -> None:
        """Queue ``job``, or raise TritonError (UNAVAILABLE when stopped or full,
        INVALID_ARG for a request the scheduler cannot take); never blocks."""
        ...

    def stop(self, deadline: float | None = None) -> None:
        """Take no more jobs; finish the queued ones until ``deadline`` (``time.monotonic()``)."""
        ...

    def run_here(self, job: Job) -> bool:
        """Run ``job`` on the calling thread now if the scheduler can (an instance is
        free, nothing waits); whether it did. When it did not, the caller ``enqueue``s
        it. Called only when ``can_run_here``; by default it never does."""
        return False

    def reschedule(self, job: Job) -> None:
        """Queue ``job`` again (just executed, handed back by its backend) to run after
        what its sequence already queued, or raise TritonError (the scheduler stopped,
        the sequence ended meanwhile). Called on the worker thread that ran ``job``,
        after its execute returned, only when ``can_reschedule``; never blocks. By
        default every job is refused, in Triton's words."""
        raise reschedule_refused()


class NoInstances(Scheduler):
    """The scheduler of a model whose every instance group is ``passive``: its
    instances are loaded but take no requests, so each request is refused at once
    (Triton queues it where no instance will ever take it)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def start(self) -> None:
        pass

    def enqueue(self, job: Job) -> None:
        raise TritonError.unavailable(
            f"model '{self._name}' takes no requests: every instance group of it is passive"
        )

    def stop(self, deadline: float | None = None) -> None:
        pass
