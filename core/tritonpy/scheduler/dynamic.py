"""Triton's dynamic batcher: combine queued requests into batches for free instances.

Formation, as Triton does it: when an instance is free, requests are taken in
arrival order from the highest non-empty priority level (1 is highest), then
lower levels, while they may share a batch (``EqualInputs``: the same shapes
past the batch dimension unless an input allows ragged batches, the same
shape tensor values) and the batch stays within ``max_batch_size``; a request that
carries its own batch counts by its batch size. The batch is cut at its largest
preferred size, and before the request that would take it past the largest
preferred size, and sent at once; a batch that reaches the largest preferred
size or cannot grow goes at once too; any other waits until its oldest request
has waited ``max_queue_delay_microseconds``, and then everything that fits goes
(``_form``, after Triton's ``GetDynamicBatch``). Queue policies: ``max_queue_size`` rejects arrivals
into a full level, timeouts (``default_timeout_microseconds`` or, when
``allow_timeout_override``, the request's ``timeout`` parameter) either reject
expired requests (REJECT) or move them behind the rest of their level (DELAY).
``preserve_ordering`` releases responses in arrival order.

Who forms the batches: an idle instance's worker thread, the *leader*, which
then executes the batch it formed itself, so a lone request is handed from the
thread that queued it straight to the thread that runs it (one thread wake-up,
where a batcher thread handing batches to workers costs two). One worker leads
at a time; when it takes a batch, the requests left queued go to the next idle
worker, and an arrival that finds no leader wakes the idle worker that came back
last (at low load one instance stays warm). A dedicated batcher thread forms
the batches instead where queued requests must be watched while every instance
is busy (queue timeouts) and where the rate limiter chooses the instance (its
resources reserved for the execution); without an instance that may run, the
batch stays queued and can still grow.

A caller that blocks for its answer (the in-process API) runs its request itself
(``run_here``) when nothing is queued, an instance is idle and there is no queue
delay, ordering, timeout or limiter to apply: the batch would be that request
alone, formed at once. The instance is busy meanwhile; a leader whose own
instance a caller holds hands what it forms to another idle instance.

Instances that execute without a thread waiting on them (``execute_nowait``:
the Python backend's stubs) have their batch started by their worker, which
goes back to waiting; the thread the batch completes on answers it there and
frees the instance (no hand-back to the worker and from it to the front end).
Without a queue delay such instances need no worker threads at all: a batch is
due as soon as an instance is free, so it starts on the thread that queues a
request while an instance is free, and on the thread that completes a batch
while requests are queued (as ``InlineScheduler`` does with batches of one).
Nothing here waits on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceResponse, ModelInstance, OnResponse, TritonError

from ..codec import request_prefix
from ._deadline import DeadlineWait, precise_timeouts
from ._equal_inputs import EqualInputs
from ._job import Job, Runner, fail_unfinished, internal_error, remaining, stopped
from .contract import Scheduler
from .inline import NowaitRunner, Turns
from .ratelimiter import Need, RateLimiter

log = logging.getLogger(__name__)

#: ``DynamicBatcher._leader`` when a batcher thread forms the batches.
_BATCHER = -1
#: What ``DynamicBatcher._step`` decided.
_RUN, _AGAIN, _REJECT, _WAIT, _EXIT = range(5)
#: How often a held batcher (``held_until``) counts its queue, as Triton's does.
HOLD_POLL_NS = 10_000_000


def held_until(variable: str = "TRITONSERVER_DELAY_SCHEDULER") -> int:
    """``TRITONSERVER_DELAY_SCHEDULER`` (or ``variable``): Triton's switch for tests that
    need requests queued together, read as its ``atoi`` reads it (0 when unset or not a
    number)."""
    number = re.match(r"\s*[+-]?\d+", os.environ.get(variable, ""))
    return max(0, int(number.group())) if number else 0


@dataclass(frozen=True)
class QueuePolicy:
    reject_on_timeout: bool = True
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0


@dataclass(frozen=True)
class BatcherConfig:
    """The ``dynamic_batching`` settings the batcher needs, read once from the config."""

    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_ns: int = 0
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_policy: QueuePolicy = QueuePolicy()
    level_policies: dict[int, QueuePolicy] = field(default_factory=dict)
    #: What requests of one batch must share.
    equal: EqualInputs = EqualInputs()

    def policy(self, level: int) -> QueuePolicy:
        return self.level_policies.get(level, self.default_policy)

    @classmethod
    def from_config(cls, config: Any) -> BatcherConfig:
        """From a ``ModelConfig`` message with ``dynamic_batching`` set."""
        db = config.dynamic_batching

        def policy(p: Any) -> QueuePolicy:
            return QueuePolicy(
                reject_on_timeout=p.timeout_action == 0,
                default_timeout_us=p.default_timeout_microseconds,
                allow_timeout_override=p.allow_timeout_override,
                max_queue_size=p.max_queue_size,
            )

        return cls(
            max_batch_size=config.max_batch_size,
            preferred_batch_sizes=tuple(sorted(db.preferred_batch_size)),
            max_queue_delay_ns=db.max_queue_delay_microseconds * 1000,
            preserve_ordering=db.preserve_ordering,
            priority_levels=db.priority_levels,
            default_priority_level=db.default_priority_level,
            default_policy=policy(db.default_queue_policy),
            level_policies={int(k): policy(v) for k, v in db.priority_queue_policy.items()},
            equal=EqualInputs.from_config(config),
        )


@dataclass(slots=True, eq=False)
class _Entry:
    job: Job
    size: int
    level: int
    deadline_ns: int  # 0 = none
    shape_key: tuple[Any, ...]
    delayed: bool = False


class _Ordered:
    """Release responses in arrival order (``preserve_ordering``).

    A request's responses (several for a decoupled model) are held until every
    earlier request sent its FINAL one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._held: dict[int, tuple[OnResponse, list[tuple[InferenceResponse | None, int]]]] = {}
        self._counter = itertools.count()

    def wrap(self, done: OnResponse) -> OnResponse:
        seq = next(self._counter)
        with self._lock:
            self._held[seq] = (done, [])

        def release(response: InferenceResponse | None, flags: int) -> None:
            ready: list[tuple[OnResponse, InferenceResponse | None, int]] = []
            with self._lock:
                self._held[seq][1].append((response, flags))
                while self._next in self._held:
                    callback, events = self._held[self._next]
                    final = False
                    for resp, fl in events:
                        ready.append((callback, resp, fl))
                        final = final or bool(fl & RESPONSE_COMPLETE_FINAL)
                    events.clear()
                    if not final:
                        break
                    del self._held[self._next]
                    self._next += 1
            for callback, resp, fl in ready:
                callback(resp, fl)

        return release


class DynamicBatcher(Scheduler):
    """Priority queues and one worker thread per instance; batches formed by an idle
    worker (the leader) or, where requests must be watched while every instance is
    busy, by a batcher thread."""

    def __init__(
        self,
        model_name: str,
        instances: Sequence[ModelInstance],
        runner: Runner,
        config: BatcherConfig,
        on_reject: Callable[[Job, str], None] | None = None,
        limiter: RateLimiter | None = None,
        needs: Sequence[Need] = (),
        nowait: NowaitRunner | None = None,
        event_loop: Callable[[], asyncio.AbstractEventLoop | None] | None = None,
    ) -> None:
        """``needs[i]`` is what instance ``i`` needs of ``limiter`` (when rate limited);
        ``nowait``, when given, starts a batch on an instance that executes without a
        thread waiting on it (``LoadedVersion.run_nowait``): the worker goes back to
        waiting, and the thread the batch completes on answers it and frees the instance;
        ``event_loop()`` is the server's event loop (None: none), on which such batches
        start at the end of the loop's turn (``_kick``)."""
        self._name = model_name
        self._instances = list(instances)
        self._runner = runner
        self.config = config
        self._on_reject = on_reject
        levels = max(1, config.priority_levels)
        #: The queue of each priority level in use (``_level``), made as a level gets its
        #: first request and dropped when it empties: ``priority_levels`` may be 2^64 - 1.
        self._levels: dict[int, deque[_Entry]] = {1: deque()} if levels == 1 else {}
        self._limiter = limiter
        self._needs = list(needs)
        if limiter is not None and len(self._needs) != len(self._instances):
            raise ValueError("a rate-limited batcher needs one Need per instance")
        # One lock (the limiter's, when rate limited: its wake-ups come under it) and
        # conditions on it: the one the batch former waits on, and each worker's own, so
        # that one named worker is woken.
        lock = limiter.lock if limiter is not None else threading.Lock()
        self._cond = threading.Condition(lock)
        self._wakes = [threading.Condition(lock) for _ in self._instances]
        #: The batch former's timed waits (the queue delay), ended at their deadline.
        self._waits = DeadlineWait()
        #: Idle instances, the one to take next last (``_choose``): the first one at the start.
        self._idle: list[int] = list(reversed(range(len(self._instances))))
        #: The batch handed to each idle worker by the one that formed it (None: none).
        self._handed: list[list[Job] | None] = [None] * len(self._instances)
        self._nowait = nowait
        #: Whether each instance runs a batch (``_nowait``: its worker waits meanwhile).
        self._busy = [False] * len(self._instances)
        self._releases = [functools.partial(self._release, i) for i in range(len(self._instances))]
        #: Inline mode's starts (``_start``), never nested on one thread.
        self._turns: Turns[tuple[int, list[Job]]] = Turns(self._start)
        self._event_loop = event_loop
        #: Whether a ``_kick`` is queued on the event loop.
        self._kick_queued = False
        self._ordered = _Ordered() if config.preserve_ordering else None
        #: Rows queued in every level (``_Entry.size`` summed).
        self._rows = 0
        policies = (config.default_policy, *config.level_policies.values())
        timeouts = any(p.default_timeout_us for p in policies)
        #: Whether queued requests can time out (else none is ever expired or delayed).
        self._timeouts = timeouts
        #: The one queue when there is one and nothing in it is ever delayed: batches are
        #: taken from its head (``_candidates``, ``_remove`` without copies).
        self._only: deque[_Entry] | None = self._levels[1] if levels == 1 and not timeouts else None
        #: Whether an idle worker forms the batches and runs what it formed itself: a
        #: lone request costs one thread wake-up fewer than with a batcher thread handing
        #: it over. A batcher thread stays where queued requests must be watched while
        #: every instance is busy (queue timeouts) and where the limiter picks the instance.
        self._lead = limiter is None and not timeouts
        #: Who forms batches now: a worker's index, ``_BATCHER``, or None (lead mode, no
        #: idle worker leads: the next arrival makes one lead, or the next worker back).
        self._leader: int | None = None if self._lead else _BATCHER
        #: Whether batches start on the thread that queues a request or completes a batch
        #: (``_turns``), with no worker threads at all: instances that run without a thread
        #: waiting on them, and no queue delay to wait out, so that a batch is due as soon
        #: as an instance is free (and nothing else needs a thread: no timeouts, no limiter).
        self._inline = nowait is not None and self._lead and config.max_queue_delay_ns == 0
        #: Whether an arrival wakes the batch former only when it changes its decision
        #: (``enqueue``): one queue, no queue timeouts, no limiter, a delay.
        self._preferred = frozenset(config.preferred_batch_sizes)
        #: The size past which a batch is cut (``_form``): the largest preferred one (as
        #: Triton's config completion makes it, the maximum batch size when none is given).
        self._largest_preferred = max(config.preferred_batch_sizes, default=config.max_batch_size)
        self._quiet = self._lead and levels == 1 and config.max_queue_delay_ns > 0
        #: Whether a caller that blocks for its answer may run its request itself
        #: (``run_here``) when nothing is queued and an instance is idle: with no queue
        #: delay that batch would be this request alone anyway, formed at once; the
        #: hand-off to a worker thread and back is what it saves.
        self.can_run_here = (
            self._lead and not self._inline and nowait is None and config.max_queue_delay_ns == 0
        ) and not config.preserve_ordering
        #: Triton's testing switch: no batch until this many requests are queued (0: off).
        self._hold = held_until()
        if self._hold:
            log.debug("delaying the batcher of '%s' until %d queued requests", model_name, self._hold)
            self._inline = self.can_run_here = False  # every batch is formed by ``_step``
        self._open = False
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._open = True
        if self._inline:
            return
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"tritonpy-{inst.name}", daemon=True)
            for i, inst in enumerate(self._instances)
        ]
        if not self._lead:
            self._threads.append(
                threading.Thread(target=self._batch_loop, name=f"tritonpy-batcher-{self._name}", daemon=True)
            )
        for t in self._threads:
            t.start()

    def stop(self, deadline: float | None = None) -> None:
        """Stop taking requests; queued ones are still batched and executed until
        ``deadline`` (a ``time.monotonic()`` value)."""
        with self._cond:
            self._open = False
            self._cond.notify_all()
            for wake in self._wakes:
                wake.notify()
            if self._inline:
                # Queued requests start as instances come free; wait for the last to end.
                while any(self._busy) or any(self._levels.values()):
                    left = remaining(deadline)
                    if left is not None and left <= 0:
                        break
                    self._cond.wait(left)
                stranded = [e.job for q in self._levels.values() for e in q]
                for q in self._levels.values():
                    q.clear()
                self._rows = 0
        for t in self._threads:
            t.join(remaining(deadline))
        if self._inline:
            fail_unfinished(
                stranded,
                TritonError.unavailable(f"model '{self._name}' stopped before the request could run"),
            )

    # -- admission (any thread) -----------------------------------------------------------

    def _level_of(self, job: Job) -> int:
        """The queue of ``job``: its priority; as Triton, 0 or one beyond
        ``priority_levels`` is the default level."""
        priority = job.request.priority
        levels = self.config.priority_levels
        if levels == 0:
            return 1  # no priority levels configured: every request is equal
        if priority <= 0 or priority > levels:
            return self.config.default_priority_level or (levels + 1) // 2
        return priority

    def _deadline(self, job: Job, policy: QueuePolicy) -> int:
        """When ``job`` times out in the queue (0: never): the policy's default
        timeout; as Triton, a request's own ``timeout`` may only shorten it, where
        the policy allows overrides (a policy without a default timeout has none to
        shorten: the request's is ignored)."""
        timeout_us = policy.default_timeout_us
        requested = job.request.timeout_us
        if policy.allow_timeout_override and 0 < requested < timeout_us:
            timeout_us = requested
        return job.arrival_ns + timeout_us * 1000 if timeout_us > 0 else 0

    def enqueue(self, job: Job) -> None:
        """Queue ``job``; TritonError when stopped or its queue is full."""
        level = self._level_of(job)
        policy = self.config.policy(level)
        if self._ordered is not None:
            job.done = self._ordered.wrap(job.done)
        key = self.config.equal.key(job.request)
        entry = _Entry(job, job.request.batch_size, level, self._deadline(job, policy), key)
        with self._cond:
            if not self._open:
                raise stopped(self._name)
            pending = self._level(level)
            if policy.max_queue_size and len(pending) >= policy.max_queue_size:
                raise TritonError.unavailable(f"{request_prefix(job.request.id)}Exceeds maximum queue size")
            pending.append(entry)
            self._rows += entry.size
            if not self._inline:
                self._arrived(pending, entry)
                return
            if not self._idle:
                return  # the next batch to complete starts what is queued
            loop = self._event_loop() if self._event_loop is not None else None
            if loop is not None and asyncio._get_running_loop() is loop:
                if self._kick_queued:
                    return  # this loop turn's arrivals start together (``_kick``)
                self._kick_queued = True
                kick_on: asyncio.AbstractEventLoop | None = loop
                starts = []
            else:
                kick_on, starts = None, self._due()
        if kick_on is not None:
            kick_on.call_soon(self._kick)
        elif starts:
            self._turns.run(starts)

    def _kick(self) -> None:
        """On the event loop, at the end of the turn in which requests arrived: start what
        they make due. Requests read together (one socket read, one gRPC frame batch)
        thus go together, as they would to a batcher thread woken by the first of them."""
        with self._cond:
            self._kick_queued = False
            starts = self._due()
        if starts:
            self._turns.run(starts)

    def run_here(self, job: Job) -> bool:
        """Run ``job`` on the calling thread when nothing is queued and an instance is
        idle (``can_run_here``); whether it did. The instance is busy meanwhile: what
        arrives queues, and is batched once it is free again (``_returned``)."""
        with self._cond:
            if not self._open or self._rows or not self._idle:
                return False
            # The instance that came back last (often the leader's: its worker keeps
            # leading, and hands what it forms meanwhile to another idle instance).
            index = self._idle.pop()
            self._busy[index] = True
        try:
            self._execute(self._instances[index], [job])
        finally:
            with self._cond:
                self._returned(index)  # whoever leads forms a batch of what queued meanwhile
        return True

    def _execute(self, instance: ModelInstance, jobs: list[Job]) -> None:
        """Run ``jobs`` on ``instance`` on this thread (a worker's, or a caller's)."""
        try:
            self._runner(instance, jobs)
        except BaseException as exc:  # the runner answers jobs itself; never lose an instance
            fail_unfinished(jobs, internal_error(f"batch execution on {instance.name} failed", exc))

    def _arrived(self, pending: deque[_Entry], entry: _Entry) -> None:
        """Wake whoever must form batches now that ``entry`` is queued (under the lock)."""
        if self._leader is None:
            # Every worker is busy (the next one back leads), or one is idle and none
            # leads: the one that came back last leads, woken by name.
            if self._idle:
                self._promote()
            return
        # In quiet mode the batch former sleeps until the oldest request's delay is up; an
        # arrival changes that only when it opens the queue or ends the wait early: the
        # batch reaches a preferred size or passes the largest (the queue's earlier sums
        # did neither: they would have been sent), or it cannot take this request. Every other arrival
        # waking it would cost a thread switch per request.
        if not self._quiet or (
            self._idle
            and (
                len(pending) == 1
                or self._rows >= self._largest_preferred
                or self._rows in self._preferred
                or entry.shape_key != pending[0].shape_key
            )
        ):
            self._cond.notify()

    # -- batch formation (the leader, or the batcher thread; under the lock) ---------------

    def _due(self) -> list[tuple[int, list[Job]]]:
        """Inline mode, under the lock: the batches to start now, one per idle instance
        while requests are queued (each taken from the queue, its instance busy)."""
        starts = []
        while self._idle and any(self._levels.values()):
            batch, _ = self._form(time.monotonic_ns())
            if batch is None:  # with no delay a formed batch is always due
                break
            index = self._idle.pop()
            self._remove(batch)
            self._busy[index] = True
            starts.append((index, [e.job for e in batch]))
        return starts

    def _start(self, start: tuple[int, list[Job]]) -> None:
        """Start a batch, ``(instance index, jobs)``, through ``_nowait`` (the lock not held):
        the thread it completes on answers it and frees the instance (``_release``)."""
        index, jobs = start
        assert self._nowait is not None
        try:
            self._nowait(self._instances[index], jobs, self._releases[index])
        except BaseException as exc:  # it never raises; should it, never lose an instance
            fail_unfinished(
                jobs, internal_error(f"batch execution on {self._instances[index].name} failed", exc)
            )
            self._release(index)

    def _promote(self) -> None:
        """Make the idle worker that came back last the leader, and wake it."""
        index = self._idle[-1]
        self._leader = index
        self._wakes[index].notify()

    def _step(self, me: int) -> tuple[int, Any]:
        """One decision of the batch former ``me`` (a worker or ``_BATCHER``): ``(_RUN,
        jobs)`` for ``me`` to execute, ``(_AGAIN, None)`` when it handed a batch to
        another worker, ``(_REJECT, entries)`` to answer as expired, ``(_WAIT, seconds
        or None)``, or ``(_EXIT, None)``: stopped and nothing queued."""
        now = time.monotonic_ns()
        if self._timeouts:
            rejected = self._expire(now)
            if rejected:
                return _REJECT, rejected
        pending = any(self._levels.values())
        if not pending and not self._open:
            if self._limiter is not None:
                self._limiter.withdraw(self)
            return _EXIT, None
        wait_ns = None
        waits_for_resources = False
        if self._hold and pending and self._open:  # stopping: what is queued runs
            if sum(map(len, self._levels.values())) < self._hold:
                pending = False
                wait_ns = HOLD_POLL_NS
            else:
                self._hold = 0
        if pending and self._idle:
            batch, wait_ns = self._form(now)
            if batch is not None:
                chosen = self._choose(me)
                if chosen is not None:
                    self._remove(batch)
                    jobs = [e.job for e in batch]
                    if chosen == me:
                        return _RUN, jobs
                    self._handed[chosen] = jobs
                    self._wakes[chosen].notify()
                    return _AGAIN, None
                waits_for_resources = True
        if self._limiter is not None and not waits_for_resources:
            self._limiter.withdraw(self)
        deadline = self._next_deadline() if self._timeouts else None
        if deadline is not None:
            wait_ns = min(wait_ns, deadline - now) if wait_ns is not None else deadline - now
        return _WAIT, None if wait_ns is None else max(wait_ns, 0) / 1e9

    def _batch_loop(self) -> None:
        """The batcher thread's life: form batches and hand them to idle workers."""
        if self.config.max_queue_delay_ns:
            precise_timeouts()  # this thread's waits are the queue delay
        while True:
            try:
                with self._cond:
                    while True:
                        what, value = self._step(_BATCHER)
                        if what == _WAIT:
                            self._waits.wait(self._cond, value)
                        elif what != _AGAIN:
                            break
                if what == _EXIT:
                    return
                self._reject_all(value)
                value = None  # a finished request's tensors are not kept alive here
            except Exception:
                # A bug in batch formation must not strand every queued request: log it
                # and keep batching (the queues are intact; nothing was taken from them).
                log.exception("the batcher of model '%s' failed; it goes on", self._name)
                time.sleep(0.01)  # no busy loop should the failure repeat

    def _choose(self, me: int) -> int | None:
        """Take the idle instance that runs the next batch (the limiter's choice, its
        resources reserved), or None: wait for the limiter's wake-up."""
        if self._limiter is None:
            # The leader itself (awake already), else the instance that came back last: at
            # low load one instance keeps taking the batches, its thread, caches and
            # framework's threads warm (in-process ONNX MLP, 2 instances on 2 cores: +30%
            # at concurrency 1 and +8-24% at 8, against the one idle longest); at high
            # load every instance is busy either way.
            if me == _BATCHER or self._busy[me]:
                # (A leader whose instance a caller runs on, ``run_here``: to another.)
                return self._idle.pop()
            if self._idle[-1] == me:
                self._idle.pop()
            else:
                self._idle.remove(me)
            return me
        pick = self._limiter.acquire(self, [self._needs[i] for i in self._idle], self._cond.notify)
        if pick is None:
            return None
        index = self._idle[pick]
        del self._idle[pick]
        return index

    def _expire(self, now: int) -> list[_Entry]:
        """Apply timeouts: REJECT removes expired entries, DELAY moves them behind."""
        rejected: list[_Entry] = []
        for level, entries in self._levels.items():
            if not any(e.deadline_ns and not e.delayed and e.deadline_ns <= now for e in entries):
                continue
            keep: deque[_Entry] = deque()
            delayed: list[_Entry] = []
            for e in entries:
                if e.deadline_ns and not e.delayed and e.deadline_ns <= now:
                    if self.config.policy(level).reject_on_timeout:
                        rejected.append(e)
                        self._rows -= e.size
                    else:
                        e.delayed = True
                        delayed.append(e)
                else:
                    keep.append(e)
            keep.extend(delayed)
            self._levels[level] = keep
        self._prune()
        return rejected

    def _next_deadline(self) -> int | None:
        deadlines = [
            e.deadline_ns for q in self._levels.values() for e in q if e.deadline_ns and not e.delayed
        ]
        return min(deadlines) if deadlines else None

    def _candidates(self) -> Iterable[_Entry]:
        if self._only is not None:
            return self._only
        ordered: list[_Entry] = []
        for entries in self._levels.values():  # as Triton: a level's delayed requests
            ordered += [e for e in entries if not e.delayed]  # after its others, before
            ordered += [e for e in entries if e.delayed]  # the next level's
        return ordered

    def _form(self, now: int) -> tuple[list[_Entry] | None, int | None]:
        """The batch to send now (still queued: ``_remove`` takes it), or (None, ns to
        wait before it is due). Triton's ``GetDynamicBatch``, for an idle instance:

        - requests join in queue order while the batch has their shape and room;
        - the batch is cut at its largest preferred size, and before the request that
          takes it past the largest preferred size: sent at once, unless the oldest
          request's delay is up (then everything that fits goes);
        - a batch that cannot grow (the next request does not fit or has another
          shape) or has reached the largest preferred size goes at once;
        - else it waits for the oldest request's delay (none: it goes at once).
        """
        cfg = self.config
        take: list[_Entry] = []
        total = 0
        best = 0  # requests in the batch cut at a preferred size (0: none)
        cannot_grow = False
        preferred = self._preferred
        largest = self._largest_preferred
        for entry in self._candidates():
            if take:
                if total + entry.size > largest and not best:
                    best = len(take)
                if total + entry.size > cfg.max_batch_size or entry.shape_key != take[0].shape_key:
                    cannot_grow = True
                    break
            take.append(entry)
            total += entry.size
            if total in preferred:
                best = len(take)
        if not take:
            return None, None
        delay = cfg.max_queue_delay_ns
        due = min(e.job.arrival_ns for e in take) + delay
        delay_is_up = delay != 0 and now >= due
        if best and not delay_is_up:
            return take[:best], None
        if cannot_grow or total >= largest or delay == 0 or delay_is_up:
            return take, None
        return None, due - now

    def _remove(self, batch: list[_Entry]) -> list[_Entry]:
        only = self._only
        if only is not None and only[0] is batch[0]:
            # ``_form`` takes from the head of the one queue: the batch is its first entries.
            for e in batch:
                only.popleft()
                self._rows -= e.size
            return batch
        self._rows -= sum(e.size for e in batch)
        chosen = {id(e) for e in batch}
        for level, entries in self._levels.items():
            if any(id(e) in chosen for e in entries):
                self._levels[level] = deque(e for e in entries if id(e) not in chosen)
        if only is not None:
            self._only = self._levels[1]
        else:
            self._prune()
        return batch

    def _level(self, level: int) -> deque[_Entry]:
        """The queue of priority ``level``, made when it has none; the levels stay in
        priority order (``_candidates`` walks them so)."""
        pending = self._levels.get(level)
        if pending is None:
            pending = deque()
            self._levels[level] = pending
            if len(self._levels) > 1:
                self._levels = dict(sorted(self._levels.items()))
        return pending

    def _prune(self) -> None:
        """Drop the queues of levels left without requests (``_only`` keeps its own)."""
        if self._only is None:
            for level in [lv for lv, q in self._levels.items() if not q]:
                del self._levels[level]

    def _reject(self, entry: _Entry) -> None:
        if self._on_reject is not None:
            self._on_reject(entry.job, "REJECTED")
        response = InferenceResponse.from_error(TritonError.unavailable("Request timeout expired"))
        response.id = entry.job.request.id
        entry.job.answer(response, RESPONSE_COMPLETE_FINAL)

    def _reject_all(self, entries: list[_Entry]) -> None:
        for entry in entries:
            try:
                self._reject(entry)
            except Exception:  # the job is answered in _reject's last line, or by nobody
                log.exception("rejecting a request of model '%s' failed", self._name)
                fail_unfinished([entry.job], TritonError.unavailable("Request timeout expired"))

    # -- execution (instance worker threads) ------------------------------------------------

    def _work(self, index: int) -> None:
        if self._lead and self.config.max_queue_delay_ns:
            precise_timeouts()  # a leader's timed waits are the queue delay
        instance = self._instances[index]
        back = False
        while True:
            try:
                jobs = self._take(index, back)
            except Exception:  # as in _batch_loop: a bug in formation strands nobody
                log.exception("the batcher of model '%s' failed; it goes on", self._name)
                time.sleep(0.01)
                back = False
                continue
            if jobs is None:
                return
            if self._nowait is not None:
                # The batch completes on another thread (the stub's reader), which answers
                # it there and frees the instance: no hand-back to this thread and back.
                self._start((index, jobs))
                jobs = None
                continue
            self._execute(instance, jobs)
            jobs = None  # not kept alive while idle
            back = True

    def _returned(self, index: int) -> None:
        """Instance ``index`` finished its batch (under the lock)."""
        self._busy[index] = False
        if self._limiter is not None:
            self._limiter.release(self._needs[index])
        self._idle.append(index)
        if self._leader == _BATCHER:
            if self._limiter is not None or any(self._levels.values()):
                # The batcher waits for an idle instance only with requests queued (or for
                # the limiter); with none, the next enqueue wakes it.
                self._cond.notify()
        elif self._leader is None:
            if any(self._levels.values()):
                self._promote()  # it leads; awake already, unless its batch ran without it
        elif len(self._idle) == 1 and any(self._levels.values()):
            # A worker leads with no instance to form for until now: a caller held its own
            # (``run_here``). It waits on ``_cond``.
            self._cond.notify()
        if not self._open:
            self._wakes[index].notify()  # its worker may stop now

    def _release(self, index: int) -> None:
        """A batch started through ``_nowait`` is done (on the thread it completed on)."""
        with self._cond:
            if not self._inline:
                self._returned(index)
                return
            self._busy[index] = False
            self._idle.append(index)
            starts = self._due()
            if not self._open:
                self._cond.notify_all()  # ``stop`` waits for the last batch
        if starts:
            self._turns.run(starts)

    def _take(self, index: int, back: bool) -> list[Job] | None:
        """Worker ``index``'s next batch (``back``: it just finished one), or None: stop."""
        wake = self._wakes[index]
        while True:
            with self._cond:
                if back:
                    back = False
                    self._returned(index)
                while True:
                    jobs = self._handed[index]
                    if jobs is not None:
                        self._handed[index] = None
                        self._busy[index] = True
                        return jobs
                    busy = self._busy[index]
                    if self._leader is None and self._lead and not busy:
                        self._leader = index  # awake already: no wake-up to lead
                    if self._leader != index:
                        if not self._open and not busy and not any(self._levels.values()):
                            return None
                        wake.wait()
                        continue
                    what, value = self._step(index)
                    if what == _WAIT:
                        self._waits.wait(self._cond, value)
                    elif what == _RUN:
                        self._leader = None
                        self._busy[index] = True
                        # Requests left behind (the batch was full) go to the next idle worker.
                        if self._idle and any(self._levels.values()):
                            self._promote()
                        return value  # type: ignore[no-any-return]
                    elif what == _EXIT:
                        self._leader = None
                        for other in self._wakes:  # the followers stop too
                            other.notify()
                        return None
                    elif what == _REJECT:
                        break
            self._reject_all(value)
            value = None
