"""The default scheduler: each request goes to a free instance.

Each instance owns a worker thread. A request goes to the idle worker that came
back last (at low load one instance stays warm: its thread, caches and the
framework's own threads), or, while every instance is busy, into one backlog that
the next worker to finish takes from: a request waits only while every instance
is busy. ``execute`` runs on the worker thread, never on the event loop.

A caller that blocks for the answer anyway (the in-process API's ``infer``)
may run its request itself (``run_here``) when an instance is free and
nothing is queued: no hand-off to the worker and back. Each instance's lock
says who runs on it; a worker handed a job while a caller holds its instance
passes the job on to another worker (or the backlog) and waits.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Sequence

from tritonpy_sdk import ModelInstance

from ._job import Job, Runner, fail_unfinished, internal_error, remaining, stopped
from .contract import Scheduler

log = logging.getLogger(__name__)

_STOP = object()


class DefaultScheduler(Scheduler):
    """One worker thread per instance (the idle one that came back last takes the next
    request), one backlog while all are busy, one request per execute."""

    can_run_here = True

    def __init__(self, model_name: str, instances: Sequence[ModelInstance], runner: Runner) -> None:
        self._model_name = model_name
        self._runner = runner
        #: Who runs on each instance now: its worker, or a caller (``run_here``).
        self._instances = [(inst, threading.Lock()) for inst in instances]
        #: Each worker's jobs, one at a time (or ``_STOP``).
        self._inboxes: list[queue.SimpleQueue[Job | object]] = [queue.SimpleQueue() for _ in instances]
        #: Idle workers, the one to take next last: the first one at the start.
        self._idle = list(reversed(range(len(self._instances))))
        #: Jobs that came while every worker was busy, oldest first. Never non-empty
        #: while a worker is idle (both change under ``_admission``).
        self._backlog: deque[Job] = deque()
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"tritonpy-{pair[0].name}", daemon=True)
            for i, pair in enumerate(self._instances)
        ]
        self._open = False
        # Admission, the idle workers, the backlog and stop are serialized: a job is either
        # handed to a worker or queued before the stop (and runs), or refused; never stranded.
        self._admission = threading.Lock()

    def start(self) -> None:
        self._open = True
        for t in self._threads:
            t.start()

    def enqueue(self, job: Job) -> None:
        """Hand ``job`` to a worker (or the backlog); TritonError UNAVAILABLE once the
        scheduler is stopped."""
        with self._admission:
            if not self._open:
                raise stopped(self._model_name)
            if not self._idle:
                self._backlog.append(job)
                return
            index = self._idle.pop()
        self._inboxes[index].put(job)

    def _pass_on(self, job: Job) -> None:
        """A job a worker cannot run (a caller holds its instance): to another idle worker,
        else first in the backlog (it came before what waits there)."""
        with self._admission:
            if not self._idle:
                self._backlog.appendleft(job)
                return
            index = self._idle.pop()
        self._inboxes[index].put(job)

    def stop(self, deadline: float | None = None) -> None:
        """Stop taking jobs, let the workers finish what is queued, join them
        (until ``deadline``, a ``time.monotonic()`` value; a worker stuck in
        ``execute`` past it is left behind, it is a daemon thread)."""
        with self._admission:
            self._open = False
            # Busy workers stop when they find the backlog empty; idle ones are told now.
            idle, self._idle = self._idle, []
        for index in idle:
            self._inboxes[index].put(_STOP)
        for t in self._threads:
            if t.is_alive():
                t.join(remaining(deadline))
        for _, lock in self._instances:  # callers running here finish too (until the deadline)
            left = remaining(deadline)
            if lock.acquire(timeout=-1 if left is None else left):
                lock.release()
        # Jobs still in the backlog (their workers outlived the deadline, or a job was
        # passed on as they stopped): queued before the stop, so they run, here, while
        # the deadline allows.
        instance, lock = self._instances[0]
        while True:
            with self._admission:
                job = self._backlog.popleft() if self._backlog else None
            if job is None:
                break
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
        if not self._open or self._backlog:
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

    def hold(self) -> tuple[ModelInstance, threading.Lock] | None:
        """A free instance for the calling thread to run one request on, with its lock
        held (the caller releases it), when ``run_here`` would run a job now; else None."""
        if not self._open or self._backlog:
            return None
        for pair in self._instances:
            lock = pair[1]
            if lock.acquire(blocking=False):
                if self._open:
                    return pair
                lock.release()
                return None
        return None

    def _run(self, instance: ModelInstance, job: Job) -> None:
        try:
            self._runner(instance, (job,))
        except BaseException as exc:  # the runner answers jobs itself; never lose a worker
            fail_unfinished((job,), internal_error(f"execution on {instance.name} failed", exc))

    def _work(self, index: int) -> None:
        instance, lock = self._instances[index]
        inbox = self._inboxes[index]
        job: Job | object | None = inbox.get()
        while job is not _STOP:
            assert isinstance(job, Job)
            if not lock.acquire(blocking=False):
                # A caller runs on this instance: the job goes on to a free worker (never
                # waits behind the caller, which may be waiting for it: BLS), and this
                # worker takes jobs again once its instance is free.
                self._pass_on(job)
                job = None
                with lock:
                    pass
            else:
                try:
                    self._run(instance, job)
                finally:
                    lock.release()
                job = None  # not kept alive while idle
            try:  # busy: the next job waiting, without the lock (a deque's popleft is atomic)
                job = self._backlog.popleft()
                continue
            except IndexError:
                pass
            with self._admission:  # none seen: idle, unless one came meanwhile
                if self._backlog:
                    job = self._backlog.popleft()
                    continue
                if not self._open:
                    return
                self._idle.append(index)
            job = inbox.get()
