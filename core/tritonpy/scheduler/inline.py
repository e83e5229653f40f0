"""The scheduler without threads, for instances that execute through ``execute_nowait``.

When every instance of a model only waits on I/O while it executes (the Python
backend's stubs), no thread needs to wait with it: a request goes to a free
instance on the thread that queues it (the event loop, a BLS caller, an
in-process client), and the thread on which a batch completes (the stub's
reader) answers it and starts the next queued request on the same instance.
Compared with ``DefaultScheduler`` this takes two thread hand-offs out of every
request. Requests wait in one queue, in arrival order, only while every
instance is busy.

An instance with a ``pipeline_depth`` above 1 queues the batches it is handed
and runs them in order (a stub reads them from its socket): while every
instance is busy, the next request is started on one of them at once, behind
the batch it runs, up to that depth. The instance then finds its next batch
waiting when one ends instead of sleeping until the server, having read the
answer, sends the next; that wake-up and the idle gap were 15–23 % of the CPU
per request of a small stub-mode model at concurrency 8. An idle instance is always
preferred, so with fewer requests than instances nothing waits behind another.
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

from tritonpy_sdk import ModelInstance, TritonError

from ._job import Job, fail_unfinished, internal_error, stopped
from .contract import Scheduler

#: Starts a batch on an instance and calls the release callback once the instance is free.
NowaitRunner = Callable[[ModelInstance, Sequence[Job], Callable[[], None]], None]

T = TypeVar("T")


class Turns(Generic[T]):
    """Starts batches on the calling thread, one after another, never nested.

    A batch may complete before its start returns (a backend that answers at once), and
    its completion may start the next queued batch on the same thread: that one is
    then run by the outer call in turn, so a long queue never becomes a deep recursion.
    """

    def __init__(self, start: Callable[[T], None]) -> None:
        self._start = start
        self._local = threading.local()

    def run(self, items: Iterable[T]) -> None:
        """``start(item)`` for each of ``items`` on this thread, now or after the start
        this thread is inside of."""
        local = self._local
        turns: list[T] | None = getattr(local, "turns", None)
        if turns is not None:  # inside a start on this thread: it runs these next
            turns.extend(items)
            return
        turns = local.turns = list(items)
        try:
            while turns:
                self._start(turns.pop())
        finally:
            local.turns = None

    def run_one(self, item: T) -> None:
        """``run((item,))``, without making a sequence of one (once per request)."""
        local = self._local
        turns: list[T] | None = getattr(local, "turns", None)
        if turns is not None:
            turns.append(item)
            return
        turns = local.turns = [item]
        try:
            while turns:
                self._start(turns.pop())
        finally:
            local.turns = None


class InlineScheduler(Scheduler):
    """One queue, the idle instances and the busy ones with room; batches of one request; no threads."""

    def __init__(self, model_name: str, instances: Sequence[ModelInstance], runner: NowaitRunner) -> None:
        self._model_name = model_name
        self._runner = runner
        self._count = len(instances)
        self._free = list(reversed(instances))  # pop() hands out the first instance first
        #: Busy instances that may take another batch (``pipeline_depth`` above their
        #: load), in the order they came to have room; empty when no instance pipelines.
        self._room: list[ModelInstance] = []
        #: Batches started and not yet released, per instance (up to its ``pipeline_depth``).
        self._load = {id(i): 0 for i in instances}
        self._queue: collections.deque[Job] = collections.deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        #: Threads in ``stop`` waiting on ``_changed`` (a release notifies only then:
        #: ``Condition.notify_all`` costs several Python calls even with no waiter).
        self._waiting = 0
        self._open = False
        #: Each instance's release callback, made once (not a partial per request).
        self._releases = {id(i): functools.partial(self._release, i) for i in instances}
        self._turns: Turns[tuple[ModelInstance, Job]] = Turns(self._start)

    def start(self) -> None:
        self._open = True

    def enqueue(self, job: Job) -> None:
        """Start ``job`` now on an idle instance, else behind the batch of a busy one
        with room, or queue it; UNAVAILABLE once stopped."""
        with self._lock:
            if not self._open:
                raise stopped(self._model_name)
            if self._free:
                instance = self._free.pop()
            elif self._room:
                instance = self._room.pop(0)
            else:
                self._queue.append(job)
                return
            key = id(instance)
            load = self._load[key] + 1
            self._load[key] = load
            if load < instance.pipeline_depth:
                self._room.append(instance)
        self._turns.run_one((instance, job))

    def _start(self, turn: tuple[ModelInstance, Job]) -> None:
        instance, job = turn
        try:
            self._runner(instance, (job,), self._releases[id(instance)])
        except BaseException as exc:  # the runner answers jobs itself; never lose an instance
            fail_unfinished((job,), internal_error(f"execution on {instance.name} failed", exc))
            self._release(instance)

    def _release(self, instance: ModelInstance) -> None:
        """A batch on ``instance`` ended: start the oldest queued request on it (it
        keeps its load), or count one batch less on it."""
        with self._lock:
            if self._queue:
                job = self._queue.popleft()
            else:
                key = id(instance)
                load = self._load[key] - 1
                self._load[key] = load
                if load + 1 < instance.pipeline_depth:  # it had room: it leaves the busy ones
                    self._room.remove(instance)
                if load:
                    self._room.append(instance)
                else:
                    self._free.append(instance)
                    if self._waiting:
                        self._changed.notify_all()
                return
        self._turns.run_one((instance, job))

    def stop(self, deadline: float | None = None) -> None:
        """Take no more jobs; wait until the queued ones ran and every instance is
        free, until ``deadline`` (a ``time.monotonic()`` value). Jobs still queued
        then are answered UNAVAILABLE: their instances never came free."""
        with self._lock:
            self._open = False
            while self._queue or len(self._free) < self._count:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._waiting += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting -= 1
            stranded = list(self._queue)
            self._queue.clear()
        fail_unfinished(
            stranded,
            TritonError.unavailable(f"model '{self._model_name}' stopped before the request could run"),
        )
