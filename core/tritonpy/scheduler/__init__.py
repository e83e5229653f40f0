"""Schedulers decide which instance runs which requests, and when.

Every scheduler (the ``Scheduler`` protocol) takes ``Job`` objects from any
thread and hands lists of them to a ``Runner`` on an instance's worker thread (the
inline scheduler starts them on the calling thread, for instances that need no thread);
``create_scheduler`` picks a model's from its config. The default scheduler
runs one request per execution on a free instance (the one that came back last,
as the dynamic batcher does, so one instance stays warm at low load); the sequence batcher
keeps each sequence of requests on one batch slot and feeds its state. An ensemble's
``EnsembleScheduler`` runs no instance: it sends each request through its steps.
"""

from ._job import Job, Runner, fail_unfinished, internal_error, remaining, reschedule_refused
from .contract import NoInstances, Scheduler
from .default import DefaultScheduler
from .dynamic import BatcherConfig, DynamicBatcher
from .ensemble import EnsembleScheduler
from .factory import create_scheduler
from .inline import InlineScheduler
from .sequence import SequenceBatcher, SequenceConfig

__all__ = [
    "BatcherConfig",
    "DefaultScheduler",
    "InlineScheduler",
    "DynamicBatcher",
    "EnsembleScheduler",
    "Job",
    "NoInstances",
    "Runner",
    "Scheduler",
    "SequenceBatcher",
    "SequenceConfig",
    "create_scheduler",
    "fail_unfinished",
    "internal_error",
    "remaining",
    "reschedule_refused",
]
