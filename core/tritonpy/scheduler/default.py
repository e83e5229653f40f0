"""The default scheduler: each request goes to the first free instance.

Each instance owns a worker thread; all of a model's workers take jobs from one
queue, so a request waits only while every instance is busy. ``execute`` runs
on the worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from tritonpy_sdk import ModelInstance

from ._job import Job, Runner, fail_unfinished, internal_error, remaining, stopped

log = logging.getLogger(__name__)

_STOP = object()


class DefaultScheduler:
    """One shared queue, one worker thread per instance, one request per execute."""

    def __init__(self, model_name: str, instances: Sequence[ModelInstance], runner: Runner) -> None:
        self._model_name = model_name
        self._queue: queue.SimpleQueue[Job | object] = queue.SimpleQueue()
        self._runner = runner
        self._threads = [
            threading.Thread(target=self._work, args=(inst,), name=f"tritonpy-{inst.name}", daemon=True)
            for inst in instances
        ]
        self._open = False
        # Admission and stop are serialized: a job is either queued before the stop
        # markers (and runs) or refused; never stranded behind them.
        self._admission = threading.Lock()

    def start(self) -> None:
        self._open = True
        for t in self._threads:
            t.start()

    def enqueue(self, job: Job) -> None:
        """Queue ``job``; TritonError UNAVAILABLE once the scheduler is stopped."""
        with self._admission:
            if not self._open:
                raise stopped(self._model_name)
            self._queue.put(job)

    def stop(self, deadline: float | None = None) -> None:
        """Stop taking jobs, let the workers finish what is queued, join them
        (until ``deadline``, a ``time.monotonic()`` value; a worker stuck in
        ``execute`` past it is left behind, it is a daemon thread)."""
        with self._admission:
            self._open = False
            for _ in self._threads:
                self._queue.put(_STOP)
        for t in self._threads:
            if t.is_alive():
                t.join(remaining(deadline))

    def _work(self, instance: ModelInstance) -> None:
        get = self._queue.get
        run = self._runner
        while True:
            job = get()
            if job is _STOP:
                return
            assert isinstance(job, Job)
            try:
                run(instance, (job,))
            except BaseException as exc:  # the runner answers jobs itself; never lose a worker
                fail_unfinished((job,), internal_error(f"execution on {instance.name} failed", exc))
            job = None  # not kept alive while idle
