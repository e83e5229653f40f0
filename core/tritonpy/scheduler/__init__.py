"""Schedulers decide which instance runs which requests, and when.

Every scheduler takes ``Job`` objects from any thread and hands lists of them
to a ``Runner`` on an instance's worker thread. The default scheduler runs one
request per execution on the first free instance.
"""

from ._job import Job, Runner, fail_unfinished, internal_error, remaining
from .default import DefaultScheduler
from .dynamic import BatcherConfig, DynamicBatcher

__all__ = [
    "BatcherConfig",
    "DefaultScheduler",
    "DynamicBatcher",
    "Job",
    "Runner",
    "fail_unfinished",
    "internal_error",
    "remaining",
]
