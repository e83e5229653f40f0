"""The scheduler contract, and the one place that picks a model's scheduler.

Every scheduler takes ``Job`` objects from any thread (``enqueue``), hands
lists of them to a ``Runner`` on an instance's worker thread, and stops by a
deadline. The config's ``scheduling_choice`` decides which one a model gets:
``sequence_batching`` gets the ``SequenceBatcher`` (``sequence.py``), which with
``iterative_sequence`` is also a ``Rescheduler``: it takes back the requests their
backend hands back to run again. Ensembles
have no instances: their versions get the ``EnsembleScheduler`` (``ensemble.py``)
from the loader. A model without dynamic batching or rate limits whose instances
all execute through ``execute_nowait`` gets the ``InlineScheduler``, which needs
no threads. A rate-limited model without
``dynamic_batching`` gets the batcher with batches of one request: its batcher
thread asks the rate limiter which instance runs each request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from tritonpy_sdk import ModelInstance

from ..config import ModelConfig
from ._job import Job, Runner
from .default import DefaultScheduler
from .dynamic import BatcherConfig, DynamicBatcher
from .inline import InlineScheduler, NowaitRunner
from .ratelimiter import Need, RateLimiter
from .sequence import SequenceBatcher, SequenceConfig


class Scheduler(Protocol):
    """What a model version needs of its scheduler."""

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


class Rescheduler(Protocol):
    """A scheduler that takes requests back from their backend (``request.reschedule()``).

    Only the sequence batcher with ``iterative_sequence`` is one, as in Triton.
    ``reschedule`` is called on the worker thread that ran ``job``, after its
    execute returned, and never blocks.
    """

    def reschedule(self, job: Job) -> None:
        """Queue ``job`` again to run after what its sequence already queued, or raise
        TritonError (the scheduler stopped, the sequence ended meanwhile)."""
        ...


def create_scheduler(
    name: str,
    config: ModelConfig,
    instances: Sequence[ModelInstance],
    runner: Runner,
    on_reject: Callable[[Job, str], None],
    limiter: RateLimiter | None = None,
    needs: Sequence[Need] = (),
    nowait_runner: NowaitRunner | None = None,
    model_path: Path | None = None,
) -> Scheduler:
    """The scheduler ``config`` asks for (not started); ``needs[i]`` is what
    instance ``i`` needs of ``limiter`` when the model is rate limited;
    ``nowait_runner``, when given, starts batches on instances that execute
    without a thread of their own; ``model_path`` is the model's folder (a
    sequence model's ``initial_state`` files are there)."""
    if config.WhichOneof("scheduling_choice") == "sequence_batching":
        # Sequences are bound to instances, so the rate limiter has no choice to make.
        sequence = SequenceConfig.from_config(config, model_path)
        outputs = [o.name for o in config.output]
        return SequenceBatcher(name, instances, runner, sequence, on_reject, outputs)
    if config.WhichOneof("scheduling_choice") == "dynamic_batching" and config.max_batch_size > 0:
        batching = BatcherConfig.from_config(config)
    elif limiter is not None:
        batching = BatcherConfig(max_batch_size=1)  # one request per execution, as without batching
    elif nowait_runner is not None:
        return InlineScheduler(name, instances, nowait_runner)
    else:
        return DefaultScheduler(name, instances, runner)
    return DynamicBatcher(name, instances, runner, batching, on_reject, limiter, needs)
