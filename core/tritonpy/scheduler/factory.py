"""The one place that picks a model's scheduler (the contract is ``contract.Scheduler``).

The config's ``scheduling_choice`` decides which one a model gets:
``sequence_batching`` gets the ``SequenceBatcher`` (``sequence.py``), which with
``iterative_sequence`` also takes back (``Scheduler.reschedule``) the requests their
backend hands back to run again. Ensembles
have no instances: their versions get the ``EnsembleScheduler`` (``ensemble.py``)
from the loader. A model without dynamic batching or rate limits whose instances
all execute through ``execute_nowait`` gets the ``InlineScheduler``, which needs
no threads; with dynamic or sequence batching such instances get the batcher,
which starts their batches through ``execute_nowait`` too. A rate-limited model without
``dynamic_batching`` gets the batcher with batches of one request: its batcher
thread asks the rate limiter which instance runs each request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from tritonpy_sdk import ModelInstance

from ..config import ModelConfig
from ._job import Job, Runner
from .contract import Scheduler
from .default import DefaultScheduler
from .dynamic import BatcherConfig, DynamicBatcher
from .inline import InlineScheduler, NowaitRunner
from .ratelimiter import Need, RateLimiter
from .sequence import SequenceBatcher, SequenceConfig


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
    event_loop: Callable[[], asyncio.AbstractEventLoop | None] | None = None,
) -> Scheduler:
    """The scheduler ``config`` asks for (not started); ``needs[i]`` is what
    instance ``i`` needs of ``limiter`` when the model is rate limited;
    ``nowait_runner``, when given, starts batches on instances that execute
    without a thread of their own; ``model_path`` is the model's folder (a
    sequence model's ``initial_state`` files are there); ``event_loop()`` is the
    server's event loop, where the batcher starts ``nowait`` batches at the end of
    the loop's turn."""
    if config.WhichOneof("scheduling_choice") == "sequence_batching":
        # Sequences are bound to instances, so the rate limiter has no choice to make.
        sequence = SequenceConfig.from_config(config, model_path)
        outputs = [o.name for o in config.output]
        return SequenceBatcher(name, instances, runner, sequence, on_reject, outputs, nowait_runner)
    if config.WhichOneof("scheduling_choice") == "dynamic_batching" and config.max_batch_size > 0:
        batching = BatcherConfig.from_config(config)
    elif limiter is not None:
        batching = BatcherConfig(max_batch_size=1)  # one request per execution, as without batching
    elif nowait_runner is not None:
        return InlineScheduler(name, instances, nowait_runner)
    else:
        return DefaultScheduler(name, instances, runner)
    return DynamicBatcher(
        name, instances, runner, batching, on_reject, limiter, needs, nowait_runner, event_loop
    )
