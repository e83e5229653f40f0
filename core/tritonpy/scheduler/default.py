"""The default scheduler: each request goes to the first free instance.

Each instance owns a worker thread; all of a model's workers take jobs from one
queue, so a request waits only while every instance is busy. ``execute`` runs
on the worker thread, never on the event loop.

A caller that blocks for the answer anyway (the in-process API's ``infer``)
may run its request itself (``run_here``) when an instance is free and
nothing is queued: no hand-off to the worker and back. Each instance's lock
says who runs on it; a worker that takes a job while a caller holds its
instance puts the job back for another worker and waits.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence

from tritonpy_sdk import ModelInstance

from ._job import Job, Runner, fail_unfinished, internal_error, remaining, stopped
from .contract import Scheduler

log = logging.getLogger(__name__)

_STOP = object()


class DefaultScheduler(Scheduler):
    """One shared queue, one worker thread per instance, one request per execute."""

    can_run_here = True

    def __init__(self, model_name: str, instances: Sequence[ModelInstance], runner: Runner) -> None:
        self._model_name = model_name
        self._queue: queue.SimpleQueue[Job | object] = queue.SimpleQueue()
        self._runner = runner
        #: Who runs on each instance now: its worker, or a caller (``run_here``).
        self._instances = [(inst, threading.Lock()) for inst in instances]
        self._threads = [
            threading.Thread(target=self._work, args=pair, name=f"tritonpy-{pair[0].name}", daemon=True)
            for pair in self._instances
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
        for _, lock in self._instances:  # callers running here finish too (until the deadline)
            left = remaining(deadline)
            if lock.acquire(timeout=-1 if left is None else left):
                lock.release()
        # Jobs a worker put back behind the stop markers (its instance was a caller's):
        # queued before the stop, so they run, here, while the deadline allows.
        instance, lock = self._instances[0]
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not isinstance(job, Job):
                continue
            left = remaining(deadline)
            if left is not None and left <= 0 or not lock.acquire(timeout=-1 if left is None else left):
                fail_unfinished((job,), stopped(self._model_name))
                continue
            try:
                self._run(instance, job)
            finally:
                lock.release()

    def run_here(self, job: Job) -> bool:
        """Run ``job`` on the calling thread if an instance is free and no job waits;
        False (nothing done) otherwise: then ``enqueue`` it."""
        if not self._open or not self._queue.empty():
            return False
        for instance, lock in self._instances:
            if lock.acquire(blocking=False):
                try:
                    if not self._open:
                        return False
                    try:  # ``_run``, spelt out on the caller's path
                        self._runner(instance, (job,))
                    except BaseException as exc:
                        fail_unfinished((job,), internal_error(f"execution on {instance.name} failed", exc))
                    return True
                finally:
                    lock.release()
        return False

    def _run(self, instance: ModelInstance, job: Job) -> None:
        try:
            self._runner(instance, (job,))
        except BaseException as exc:  # the runner answers jobs itself; never lose a worker
            fail_unfinished((job,), internal_error(f"execution on {instance.name} failed", exc))

    def _work(self, instance: ModelInstance, lock: threading.Lock) -> None:
        get = self._queue.get
        while True:
            job = get()
            if job is _STOP:
                return
            assert isinstance(job, Job)
            if not lock.acquire(blocking=False):
                # A caller runs on this instance: the job goes back for a free worker
                # (never waits behind the caller, which may be waiting for it: BLS),
                # and this worker takes jobs again once its instance is free.
                self._queue.put(job)
                job = None
                with lock:
                    continue
            try:
                self._run(instance, job)
            finally:
                lock.release()
            job = None  # not kept alive while idle
