"""Triton's sequence batcher: every request of a sequence goes to the same batch slot.

A sequence is the run of requests that share a correlation id, from the one
flagged START to the one flagged END. Each model instance has slots
(``direct``: ``max_batch_size`` of them, one when the model does not batch;
``oldest``: ``max_candidate_sequences``). A new sequence takes a free slot,
lower slot numbers first and spread over the instances, or waits in the
backlog until a sequence ends (its END request executed) or idles out
(``max_sequence_idle_microseconds`` without a request). A request that names
no live sequence and is not flagged START is refused, in Triton's words.

Each instance has one worker thread that forms its batches from its own slots
and executes them, one at a time, so the requests of a sequence run in order
(an instance that executes without a thread waiting on it, ``execute_nowait``,
has its batch answered and ended on the thread it completes on, and its worker
forms the next batch after that):

- ``direct``: batch position = slot number; a slot without a ready request
  below the highest one that has one gets a *null* request whose READY control
  is false (Triton's null requests: zero inputs, its response dropped).
  ``max_queue_delay_microseconds`` with ``minimum_slot_utilization`` holds a
  batch until enough slots are ready or its oldest request has waited that long.
- ``oldest``: the oldest next requests of the instance's sequences, at most one
  per sequence, up to ``max_batch_size``; a preferred batch size goes at once,
  otherwise the batch waits ``max_queue_delay_microseconds`` to grow.

Before execution the core fills the control inputs (START, END, READY, CORRID)
and the implicit state inputs; a response's state outputs become the
sequence's next state (dropped from the response unless the client asked for
them). A reaper thread releases idle sequences and their state. Nothing here
waits on the event loop.

With ``iterative_sequence: true`` (Triton's iterative sequences) a request
without a correlation id starts a sequence of its own (a fresh id, flagged
START), and the backend may hand a request back (``request.reschedule()``):
``reschedule`` queues it again behind what its sequence already queued, with
its flags cleared (neither START nor END), so it runs again on the same slot
with its state. A request that ends an execution without being handed back
ends its sequence, as END does.
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    SEQUENCE_END,
    SEQUENCE_START,
    DataType,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    OnResponse,
    RequestedOutput,
    Tensor,
    TritonError,
    deserialize_bytes_tensor,
)

from ..codec import request_prefix
from ._deadline import DeadlineWait, precise_timeouts
from ._equal_inputs import EqualInputs
from ._job import Job, Runner, fail_unfinished, internal_error, remaining, reschedule_refused, stopped
from .contract import Scheduler
from .dynamic import HOLD_POLL_NS, _Ordered, held_until
from .inline import NowaitRunner

log = logging.getLogger(__name__)

#: Control kinds, by the config's ``CONTROL_SEQUENCE_*`` name.
_KINDS = {
    "CONTROL_SEQUENCE_START": "START",
    "CONTROL_SEQUENCE_END": "END",
    "CONTROL_SEQUENCE_READY": "READY",
    "CONTROL_SEQUENCE_CORRID": "CORRID",
}

#: Triton's folder for ``initial_state { data_file }`` files, beside the version folders.
INITIAL_STATE_FOLDER = "initial_state"


@dataclass(frozen=True, slots=True)
class Control:
    """One control input: its kind, data type, and the values it takes for false/true."""

    name: str
    kind: str  # START | END | READY | CORRID
    datatype: DataType
    false_true: tuple[Any, Any] = (0, 1)


@dataclass(frozen=True, slots=True)
class State:
    """One implicit state: the input the core feeds, the output the model returns."""

    input_name: str
    output_name: str
    datatype: DataType
    #: The state at START, without the batch dimension.
    initial: np.ndarray[Any, Any]


@dataclass(frozen=True)
class SequenceConfig:
    """The ``sequence_batching`` settings the batcher needs, read once from the config."""

    max_batch_size: int
    oldest: bool
    #: Slots of each instance.
    slots: int
    idle_ns: int
    controls: tuple[Control, ...] = ()
    states: tuple[State, ...] = ()
    max_queue_delay_ns: int = 0
    minimum_slot_utilization: float = 0.0
    preferred_batch_sizes: tuple[int, ...] = ()
    preserve_ordering: bool = False
    #: ``iterative_sequence``: requests without an id start their own sequence, and
    #: the backend may hand requests back to run again.
    iterative: bool = False
    #: What requests of one batch must share.
    equal: EqualInputs = EqualInputs()

    @property
    def corrid_type(self) -> DataType | None:
        return next((c.datatype for c in self.controls if c.kind == "CORRID"), None)

    @classmethod
    def from_config(cls, config: Any, model_path: Path | None = None) -> SequenceConfig:
        """From a ``ModelConfig`` message with ``sequence_batching`` set; ``model_path``
        (the model's folder) holds the ``initial_state`` data files. TritonError
        (INVALID_ARG) for settings that cannot work."""
        sb = config.sequence_batching
        name = config.name
        batch = config.max_batch_size
        oldest = sb.WhichOneof("strategy_choice") == "oldest"
        if oldest:
            slots = sb.oldest.max_candidate_sequences or max(1, batch)
            delay_us = sb.oldest.max_queue_delay_microseconds
        else:
            slots = max(1, batch)
            delay_us = sb.direct.max_queue_delay_microseconds
        return cls(
            max_batch_size=batch,
            oldest=oldest,
            slots=slots,
            idle_ns=sb.max_sequence_idle_microseconds * 1000,
            controls=tuple(_control(name, ci.name, c) for ci in sb.control_input for c in ci.control),
            states=tuple(_state(name, s, model_path) for s in sb.state),
            max_queue_delay_ns=delay_us * 1000,
            minimum_slot_utilization=sb.direct.minimum_slot_utilization if not oldest else 0.0,
            preferred_batch_sizes=tuple(sorted(sb.oldest.preferred_batch_size)) if oldest else (),
            preserve_ordering=oldest and sb.oldest.preserve_ordering,
            iterative=sb.iterative_sequence,
            equal=EqualInputs.from_config(config) if batch > 0 else EqualInputs(),
        )


def _control(model: str, name: str, control: Any) -> Control:
    kind = _KINDS[type(control).Kind.Name(control.kind)]
    if kind == "CORRID":
        dtype = DataType.from_config(_type_name(control, control.data_type))
        if dtype not in _CORRID_TYPES:
            raise TritonError.invalid_arg(
                f"sequence batching control '{name}' of model '{model}' must specify data_type "
                "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING for the correlation id"
            )
        return Control(name, kind, dtype)
    for field, dtype, cast in (
        ("int32_false_true", DataType.INT32, int),
        ("fp32_false_true", DataType.FP32, float),
        ("bool_false_true", DataType.BOOL, bool),
    ):
        values = getattr(control, field)
        if len(values) == 2:
            return Control(name, kind, dtype, (cast(values[0]), cast(values[1])))
    # Config validation refuses this first (config/_validate.py); a config built in code may not.
    raise TritonError.invalid_arg(
        f"sequence batching control '{name}' for model '{model}' must specify exactly 2 values: "
        "int32_false_true, fp32_false_true or bool_false_true"
    )


_CORRID_TYPES = (DataType.UINT64, DataType.INT64, DataType.UINT32, DataType.INT32, DataType.BYTES)


def _type_name(message: Any, value: int) -> str:
    return str(message.DESCRIPTOR.fields_by_name["data_type"].enum_type.values_by_number[value].name)


def _state(model: str, state: Any, model_path: Path | None) -> State:
    dtype = DataType.from_config(_type_name(state, state.data_type))
    if not state.initial_state:
        # As Triton: a state of the configured dims, variable dims 1, zeros.
        dims = tuple(1 if d == -1 else int(d) for d in state.dims)
        return State(state.input_name, state.output_name, dtype, _zeros(dims, dtype))
    init = state.initial_state[0]
    dims = tuple(int(d) for d in init.dims)
    if any(d < 0 for d in dims):
        raise TritonError.invalid_arg(
            f"initial state '{init.name}' of model '{model}' must have fixed dims, got {list(dims)}"
        )
    if init.WhichOneof("state_data") == "data_file":
        if model_path is None:
            raise TritonError.invalid_arg(
                f"initial state '{init.name}' of model '{model}' needs a model folder"
            )
        path = model_path / INITIAL_STATE_FOLDER / init.data_file
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise TritonError.invalid_arg(
                f"failed to read initial state file '{path}' of model '{model}': {exc.strerror}"
            ) from None
        count = math.prod(dims)
        if dtype is DataType.BYTES:
            data = deserialize_bytes_tensor(raw)
            if data.size != count:
                raise TritonError.invalid_arg(
                    f"initial_state setting expects {count} strings but file '{init.data_file}' "
                    f"of model '{model}' holds {data.size}"
                )
            initial = data.reshape(dims)
        else:
            size = count * dtype.itemsize
            if size > len(raw):
                # Triton's wording.
                raise TritonError.invalid_arg(
                    f"initial_state setting expects {size} bytes, but the data provided from "
                    f"{init.data_file} only has {len(raw)} bytes"
                )
            initial = np.frombuffer(raw[:size], dtype=dtype.numpy_dtype).reshape(dims).copy()
    else:
        initial = _zeros(dims, dtype)
    return State(state.input_name, state.output_name, dtype, initial)


def _null_data(tensor: Tensor, shape_tensor: bool) -> np.ndarray[Any, Any]:
    """A null request's data for ``tensor``: zeros, or a shape tensor's own values."""
    return tensor.data if shape_tensor else _zeros(tensor.data.shape, tensor.datatype)


def _zeros(shape: tuple[int, ...], dtype: DataType) -> np.ndarray[Any, Any]:
    if dtype is DataType.BYTES:
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype=dtype.numpy_dtype)


class _Sequence:
    """One live sequence: its queued requests, its slot, its implicit state."""

    __slots__ = ("key", "jobs", "where", "state", "last_ns", "live", "busy", "expires_ns")

    def __init__(self, key: int | str, now: int) -> None:
        self.key = key
        self.jobs: deque[Job] = deque()
        #: (instance, slot), or None while in the backlog.
        self.where: tuple[int, int] | None = None
        self.state: dict[str, np.ndarray[Any, Any]] = {}
        self.last_ns = now
        #: Still reachable by its correlation id (no END queued, not idled out).
        self.live = True
        #: One of its requests is executing.
        self.busy = False
        #: While in the backlog: when it expires, its requests' earliest ``timeout``
        #: (0: never), as Triton's backlog queues do.
        self.expires_ns = 0


#: One batch position: a sequence and its request, or None for a null request.
_Entry = tuple[_Sequence, Job] | None


def _ignore(response: InferenceResponse | None, flags: int) -> None:
    """Where a null request's response goes."""


class SequenceBatcher(Scheduler):
    """Slots per instance, a backlog, one worker thread per instance and a reaper."""

    def __init__(
        self,
        model_name: str,
        instances: Sequence[ModelInstance],
        runner: Runner,
        config: SequenceConfig,
        on_reject: Callable[[Job, str], None] | None = None,
        output_names: Sequence[str] = (),
        nowait: NowaitRunner | None = None,
    ) -> None:
        """``output_names`` are the config's outputs: what a client that names none gets;
        ``nowait``, when given, starts a batch on an instance that executes without a
        thread waiting on it: the thread the batch completes on answers it there and
        ends it (``_ended``), and the instance's worker forms the next one after that."""
        self._name = model_name
        self._instances = list(instances)
        self._runner = runner
        self.config = config
        #: Requests handed back by their backend are taken back with ``iterative_sequence``.
        self.can_reschedule = config.iterative
        self._on_reject = on_reject
        self._outputs = tuple(output_names)
        self._batching = config.max_batch_size > 0
        # One lock; each instance's worker and the reaper wait on their own condition,
        # so a request wakes only the worker of its sequence's instance.
        self._lock = threading.Lock()
        self._wakes = [threading.Condition(self._lock) for _ in self._instances]
        #: The workers' timed waits (the queue delay), ended at their deadline.
        self._waits = DeadlineWait()
        self._nowait = nowait
        #: Whether each instance runs a batch started through ``_nowait``.
        self._running = [False] * len(self._instances)
        self._reaper = threading.Condition(self._lock)
        self._table: dict[int | str, _Sequence] = {}
        self._slots: list[list[_Sequence | None]] = [[None] * config.slots for _ in self._instances]
        # Lower slots first, spread over the instances (as Triton).
        self._free: list[tuple[int, int]] = [
            (slot, inst) for slot in range(config.slots) for inst in range(len(self._instances))
        ]
        heapq.heapify(self._free)
        self._backlog: deque[_Sequence] = deque()
        #: Requests of cancelled sequences, to be answered CANCELLED once the lock is let go
        #: (``_answer_dropped``).
        self._dropped: list[Job] = []
        self._ordered = _Ordered() if config.preserve_ordering else None
        self._open = False
        self._threads: list[threading.Thread] = []
        #: The CONTROL_SEQUENCE_CORRID input (None: none).
        self._corrid = next((c for c in config.controls if c.kind == "CORRID"), None)
        corrid = self._corrid.datatype if self._corrid is not None else None
        self._numeric_corrid = corrid is not None and corrid is not DataType.BYTES
        #: The ids a numeric CORRID control can hold (None: any id).
        self._corrid_range: tuple[int, int] | None = None
        if corrid is not None and self._numeric_corrid:
            info = np.iinfo(corrid.numpy_dtype)
            # An INT64 control takes an unsigned id's 64 bits as Triton copies them: a negative
            # id a gRPC client sent (taken as its unsigned value) reaches the model as sent.
            high = 2**64 - 1 if corrid is DataType.INT64 else int(info.max)
            self._corrid_range = (int(info.min), high)
        #: The ids of iterative sequences started without one (Triton counts from 1).
        self._next_id = 1
        #: Triton's testing switches: no batch until this many requests are queued
        #: (``TRITONSERVER_DELAY_SCHEDULER``, per worker; 0: off) and, with it, this
        #: many in the backlog (``TRITONSERVER_BACKLOG_DELAY_SCHEDULER``); ``_held``.
        hold = held_until()
        self._hold = [hold] * len(self._instances)
        self._backlog_hold = held_until("TRITONSERVER_BACKLOG_DELAY_SCHEDULER") if hold else 0
        #: What each held worker last counted in its slots (``_held``).
        self._hold_counts = [0] * len(self._instances)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._open = True
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"tritonpy-{inst.name}", daemon=True)
            for i, inst in enumerate(self._instances)
        ]
        self._threads.append(
            threading.Thread(target=self._reap_loop, name=f"tritonpy-sequences-{self._name}", daemon=True)
        )
        for t in self._threads:
            t.start()

    def stop(self, deadline: float | None = None) -> None:
        """Take no more requests; queued requests of sequences in slots still run until
        ``deadline``; those left (the backlog's) are answered UNAVAILABLE."""
        with self._lock:
            self._open = False
            for cond in (*self._wakes, self._reaper):
                cond.notify_all()
        for t in self._threads:
            t.join(remaining(deadline))
        with self._lock:
            left = [job for seq in self._all_sequences() for job in seq.jobs]
            for seq in self._all_sequences():
                seq.jobs.clear()
            self._table.clear()
            self._backlog.clear()
        fail_unfinished(left, stopped(self._name))

    def has_sequences(self) -> bool:
        """Whether any sequence is live, waits in the backlog, or has requests queued."""
        with self._lock:
            return bool(self._all_sequences())

    def _all_sequences(self) -> list[_Sequence]:
        found = {id(s): s for row in self._slots for s in row if s is not None}
        found.update((id(s), s) for s in self._backlog)
        found.update((id(s), s) for s in self._table.values())
        return list(found.values())

    # -- admission (any thread) -----------------------------------------------------------

    def enqueue(self, job: Job) -> None:
        """Queue ``job`` on its sequence; TritonError (INVALID_ARG, Triton's wording) for a
        request without a correlation id, of batch size > 1, or of an unknown sequence
        without START; UNAVAILABLE once stopped."""
        request = job.request
        if request.batch_size != 1:
            raise TritonError.invalid_arg(
                f"inference request to model '{self._name}' must specify batch-size 1 due to "
                "requirements of sequence batcher"
            )
        key: int | str | None = request.correlation_id
        if (key == 0 or key == "") and self.config.iterative:
            key = None  # a sequence of its own: its id is chosen below
        elif key == 0 or key == "":
            raise TritonError.invalid_arg(
                f"inference request to model '{self._name}' must specify a non-zero or non-empty "
                "correlation ID"
            )
        corrid = self._corrid
        if corrid is not None and key is not None and isinstance(key, str) == self._numeric_corrid:
            raise TritonError.invalid_arg(  # Triton's words
                f"{request_prefix(request.id)}sequence batching control '{corrid.name}' data-type is "
                f"'{'BYTES' if isinstance(key, str) else 'UINT64'}', but model '{self._name}' expects "
                f"'{corrid.datatype.value}'"
            )
        if isinstance(key, int) and self._corrid_range is not None and corrid is not None:
            low, high = self._corrid_range
            if not low <= key <= high:
                raise TritonError.invalid_arg(
                    f"inference request to model '{self._name}' has the correlation ID {key}, which the "
                    f"model's CONTROL_SEQUENCE_CORRID input of type {corrid.datatype.config_name} cannot hold"
                )
        flags = request.flags
        now = time.monotonic_ns()
        with self._lock:
            if not self._open:
                raise stopped(self._name)
            if key is None:
                key = request.correlation_id = self._fresh_id()
                flags = request.flags = flags | SEQUENCE_START
            seq = self._table.get(key)
            if seq is None:
                if not flags & SEQUENCE_START:
                    raise TritonError.invalid_arg(
                        f"inference request for sequence {key} to model '{self._name}' must specify "
                        "the START flag on the first request of the sequence"
                    )
                seq = self._table[key] = _Sequence(key, now)
                self._place(seq)
                self._reaper.notify()
            seq.last_ns = now
            if seq.where is None and request.timeout_us:  # waits in the backlog: may expire
                expires = now + request.timeout_us * 1000
                if not seq.expires_ns or expires < seq.expires_ns:
                    seq.expires_ns = expires
                    self._reaper.notify()
            if self._ordered is not None:
                job.done = self._ordered.wrap(job.done)
            seq.jobs.append(job)
            if flags & SEQUENCE_END:
                # A later request with this id starts a new sequence (or is refused).
                del self._table[key]
                seq.live = False
            if seq.where is not None:
                self._wakes[seq.where[0]].notify()

    def _fresh_id(self) -> int:
        """An id no live sequence has, for an iterative request without one (the lock is held)."""
        key = self._next_id
        while key in self._table:
            key += 1
        self._next_id = key + 1
        return key

    def reschedule(self, job: Job) -> None:
        """Queue ``job`` (just executed, handed back by its backend) again on its
        sequence, flags cleared; TritonError when this model does not take requests
        back (no ``iterative_sequence``), when stopped, or when its sequence ended
        meanwhile (Triton's words for a request of an unknown sequence)."""
        if not self.config.iterative:
            raise reschedule_refused()
        request = job.request
        request.flags = 0  # as Triton: neither START nor END
        key = request.correlation_id
        with self._lock:
            if not self._open:
                raise stopped(self._name)
            seq = self._table.get(key)
            if seq is None:
                raise TritonError.invalid_arg(
                    f"inference request for sequence {key} to model '{self._name}' must specify "
                    "the START flag on the first request of the sequence"
                )
            job.rescheduled = True
            seq.jobs.append(job)
            seq.last_ns = time.monotonic_ns()
            if seq.where is not None:
                self._wakes[seq.where[0]].notify()

    def _place(self, seq: _Sequence) -> None:
        """Give ``seq`` a free slot, or put it in the backlog (the lock is held)."""
        if self._free:
            slot, inst = heapq.heappop(self._free)
            seq.where = (inst, slot)
            self._slots[inst][slot] = seq
        else:
            self._backlog.append(seq)

    def _release(self, seq: _Sequence) -> None:
        """Free ``seq``'s slot for the backlog's first sequence (the lock is held). A backlog
        sequence with a cancelled request is cancelled whole instead, as Triton's
        ``ReleaseSequenceSlot`` does, and the next one takes the slot."""
        if seq.where is None:
            return
        inst, slot = seq.where
        seq.where = None
        seq.state = {}
        self._slots[inst][slot] = None
        while self._backlog:
            nxt = self._backlog.popleft()
            if any(job.request.is_cancelled() for job in nxt.jobs):
                self._drop(nxt)
                continue
            nxt.expires_ns = 0  # it has a slot: its requests wait there now
            nxt.last_ns = time.monotonic_ns()  # waiting in the backlog was not idling
            nxt.where = (inst, slot)
            self._slots[inst][slot] = nxt
            self._wakes[inst].notify()
            return
        heapq.heappush(self._free, (slot, inst))

    # -- cancelled sequences -----------------------------------------------------------------

    def _drop_cancelled(self, index: int) -> None:
        """Cancel whole every sequence in instance ``index``'s slots whose next request was
        cancelled, as Triton's sequence batcher does before it forms a batch: all its queued
        requests are answered CANCELLED and its slot goes to the backlog (the lock is held;
        none of them runs, this instance's batch having ended)."""
        for seq in self._slots[index]:
            if seq is not None and seq.jobs and not seq.busy and seq.jobs[0].request.is_cancelled():
                self._drop(seq)

    def _drop(self, seq: _Sequence) -> None:
        """End ``seq`` for a cancelled request of it: its queued requests are to be answered
        CANCELLED, its id starts no request without START, its slot is freed (the lock is held)."""
        self._dropped.extend(seq.jobs)
        seq.jobs = deque()
        if seq.live and self._table.get(seq.key) is seq:
            del self._table[seq.key]
        seq.live = False
        log.debug("sequence %s of model '%s' cancelled", seq.key, self._name)
        self._release(seq)

    def _answer_dropped(self) -> None:
        """Answer the requests of cancelled sequences (the lock is held, and let go meanwhile)."""
        if not self._dropped:
            return
        jobs, self._dropped = self._dropped, []
        self._lock.release()
        try:
            for job in jobs:
                self._cancelled(job)
        finally:
            self._lock.acquire()

    # -- idle sequences (the reaper thread) -------------------------------------------------

    def _reap_loop(self) -> None:
        idle = self.config.idle_ns
        with self._lock:
            while self._open:
                now = time.monotonic_ns()
                wake = self._expire_backlog(now)
                for seq in [s for row in self._slots for s in row if s is not None]:
                    if seq.jobs or seq.busy:
                        # Not idle: its requests are waiting or running. Its last one
                        # finishes at the earliest now, so look again an idle period on.
                        due = now + idle
                        wake = due if wake is None else min(wake, due)
                        continue
                    due = seq.last_ns + idle
                    if due <= now:
                        log.info(
                            "sequence %s of model '%s' was idle for more than %d us: released",
                            seq.key,
                            self._name,
                            idle // 1000,
                        )
                        if seq.live:
                            del self._table[seq.key]
                            seq.live = False
                        self._release(seq)
                    else:
                        wake = due if wake is None else min(wake, due)
                self._answer_dropped()
                self._reaper.wait(None if wake is None else max(wake - now, 1_000_000) / 1e9)

    def _expire_backlog(self, now: int) -> int | None:
        """Reject the backlog's sequences whose requests' ``timeout`` ran out before they
        got a slot, as Triton does (UNAVAILABLE, "timeout of the corresponding sequence
        has been expired", counted as rejected; a later request of it is not START, so it
        is refused); the next expiry (None: none). The lock is held, and let go while the
        rejected requests are answered."""
        expired = [seq for seq in self._backlog if seq.expires_ns and seq.expires_ns <= now]
        rejected: list[Job] = []
        for seq in expired:
            self._backlog.remove(seq)
            if seq.live and self._table.get(seq.key) is seq:
                del self._table[seq.key]
            seq.live = False
            rejected.extend(seq.jobs)
            seq.jobs = deque()
        if rejected:
            self._lock.release()
            try:
                for job in rejected:
                    if self._on_reject is not None:
                        self._on_reject(job, "REJECTED")
                    error = TritonError.unavailable("timeout of the corresponding sequence has been expired")
                    response = InferenceResponse.from_error(error)
                    response.id = job.request.id
                    job.answer(response, RESPONSE_COMPLETE_FINAL)
            finally:
                self._lock.acquire()
        return min((seq.expires_ns for seq in self._backlog if seq.expires_ns), default=None)

    # -- batch formation and execution (instance worker threads) ---------------------------

    def _work(self, index: int) -> None:
        if self.config.max_queue_delay_ns:
            precise_timeouts()  # this worker's timed waits are the queue delay
        instance = self._instances[index]
        wake = self._wakes[index]
        while True:
            with self._lock:
                while True:
                    if self._running[index]:  # its batch is still running (``_nowait``)
                        wake.wait()
                        continue
                    if self._hold[index] and self._open and self._held(index):
                        self._waits.wait(wake, HOLD_POLL_NS / 1e9)
                        continue
                    self._drop_cancelled(index)
                    self._answer_dropped()
                    now = time.monotonic_ns()
                    batch, wait_ns = self._form(index, now)
                    if batch is not None:
                        break
                    if not self._open and wait_ns is None:
                        return
                    self._waits.wait(wake, None if wait_ns is None else wait_ns / 1e9)
                for entry in batch:
                    if entry is not None:
                        entry[0].busy = True
                if self._nowait is not None:
                    self._running[index] = True
            jobs: list[Job] = []
            started = False
            try:
                jobs = self._prepare(batch)
                if self._nowait is not None:
                    # Answered and ended on the thread it completes on (the stub's reader),
                    # not handed back to this one first.
                    self._nowait(instance, jobs, functools.partial(self._ended, index, batch))
                    started = True
                else:
                    self._runner(instance, jobs)
            except BaseException as exc:  # the runner answers jobs itself; never lose a worker
                fail_unfinished(
                    [e[1] for e in batch if e is not None],
                    internal_error(f"sequence batch execution on {instance.name} failed", exc),
                )
            if not started:
                self._ended(index, batch)
            batch = jobs = None  # type: ignore[assignment]  # not kept alive while idle

    def _held(self, index: int) -> bool:
        """Whether worker ``index`` is still held by ``TRITONSERVER_DELAY_SCHEDULER``
        (the lock is held), counted as Triton counts: ``oldest``, the requests in the
        instance's own slots (its batcher is a dynamic batcher of its own); ``direct``,
        what every worker counted in its slots when it last looked, and the backlog
        (the first worker that finds them there releases every worker). Once a worker
        is not held, it never is again."""
        queued = sum(len(seq.jobs) for seq in self._slots[index] if seq is not None)
        if self.config.oldest:
            held = queued < self._hold[index]
            if not held:
                self._hold[index] = 0
            return held
        self._hold_counts[index] = queued
        held = sum(self._hold_counts) < self._hold[index] or (
            self._backlog_hold > 0 and sum(len(seq.jobs) for seq in self._backlog) < self._backlog_hold
        )
        if not held:
            # Every worker goes: one released would soon take the backlog's sequences
            # into slots, and a worker that looked after that would wait for ever.
            self._hold = [0] * len(self._hold)
            for wake in self._wakes:
                wake.notify()
        return held

    def _ended(self, index: int, batch: list[_Entry]) -> None:
        """Instance ``index`` finished ``batch``: its sequences may go on (or end)."""
        now = time.monotonic_ns()
        overdue = False
        with self._lock:
            for entry in batch:
                if entry is None:
                    continue
                seq, job = entry
                seq.busy = False
                # Idle time counts from a sequence's last request's arrival, as Triton's
                # reaper counts it: one that ran longer than the idle time leaves a sequence
                # with nothing queued overdue, for the reaper to release now.
                overdue = overdue or (not seq.jobs and now - seq.last_ns >= self.config.idle_ns)
                if job.rescheduled:  # back in its sequence's queue
                    job.rescheduled = False
                elif job.request.flags & SEQUENCE_END:
                    self._release(seq)
                elif self.config.iterative and not seq.jobs:
                    # Released without being handed back: the sequence is over.
                    if seq.live:
                        del self._table[seq.key]
                        seq.live = False
                    self._release(seq)
            if self._running[index]:
                self._running[index] = False
                self._wakes[index].notify()
            if overdue:
                self._reaper.notify()
            self._answer_dropped()  # backlog sequences cancelled as a slot was freed

    def _form(self, index: int, now: int) -> tuple[list[_Entry] | None, int | None]:
        """The next batch of instance ``index`` (taken from its slots), or (None, ns to
        wait before one is due; None: until something changes). The lock is held."""
        slots = self._slots[index]
        ready = [k for k, s in enumerate(slots) if s is not None and s.jobs]
        if not ready:
            return None, None
        cfg = self.config
        if cfg.oldest:
            heads = sorted(ready, key=lambda k: slots[k].jobs[0].arrival_ns)  # type: ignore[union-attr]
            equal = cfg.equal
            if equal.matters:  # only those that may share the oldest one's batch
                first = equal.key(slots[heads[0]].jobs[0].request)  # type: ignore[union-attr]
                heads = [k for k in heads if equal.key(slots[k].jobs[0].request) == first]  # type: ignore[union-attr]
            # As Triton's dynamic batcher (``DynamicBatcher._form``) with requests of one:
            # the largest preferred size reached goes at once; past the oldest request's
            # delay, or when full, or with no delay, all that fit go; else they wait.
            limit = max(1, cfg.max_batch_size)
            count = min(len(heads), limit)
            preferred = [p for p in cfg.preferred_batch_sizes if p <= count]
            delay = cfg.max_queue_delay_ns
            due = slots[heads[0]].jobs[0].arrival_ns + delay  # type: ignore[union-attr]
            delay_is_up = delay != 0 and now >= due
            if preferred and not delay_is_up:
                count = preferred[-1]
            elif count < limit and delay and not delay_is_up:
                return None, due - now
            batch: list[_Entry] = []
            for k in heads[:count]:
                seq = slots[k]
                assert seq is not None
                batch.append((seq, seq.jobs.popleft()))
            return batch, None
        if cfg.max_queue_delay_ns and len(ready) < cfg.minimum_slot_utilization * len(slots):
            oldest = min(slots[k].jobs[0].arrival_ns for k in ready)  # type: ignore[union-attr]
            due = oldest + cfg.max_queue_delay_ns
            if now < due:
                return None, due - now
        # A slot whose next request cannot share the lowest ready slot's batch (its
        # shapes or shape tensor values differ) gets a null request and waits, as in Triton.
        equal = cfg.equal
        first = equal.key(slots[ready[0]].jobs[0].request)  # type: ignore[union-attr]
        batch = []
        for k in range(ready[-1] + 1):
            seq = slots[k]
            if seq is not None and seq.jobs and equal.key(seq.jobs[0].request) == first:
                batch.append((seq, seq.jobs.popleft()))
            else:
                batch.append(None)
        return batch, None

    def _prepare(self, batch: list[_Entry]) -> list[Job]:
        """The jobs to execute for ``batch``: control and state inputs filled in, null
        requests for empty slots, cancelled requests answered (a null request in
        their place, so every sequence keeps its batch position)."""
        jobs: list[Job | None] = []
        template: Job | None = None
        for entry in batch:
            if entry is None:
                jobs.append(None)
                continue
            seq, job = entry
            request = job.request
            if request.is_cancelled():
                self._cancelled(job)
                jobs.append(None)
                continue
            self._fill(request, ready=True, key=request.correlation_id)
            if self.config.states:
                self._feed_state(seq, job)
            jobs.append(job)
            template = template or job
        if template is None:  # every request of the batch was cancelled
            return []
        return [job if job is not None else self._null_job(template) for job in jobs]

    def _cancelled(self, job: Job) -> None:
        if self._on_reject is not None:
            self._on_reject(job, "CANCELED")
        response = InferenceResponse.from_error(TritonError("Request was cancelled", ErrorCode.CANCELLED))
        response.model_name = job.request.model_name
        response.model_version = job.request.model_version
        response.id = job.request.id
        job.answer(response, RESPONSE_COMPLETE_FINAL)

    def _fill(self, request: InferenceRequest, ready: bool, key: int | str) -> None:
        """Set ``request``'s control inputs."""
        flags = request.flags
        shape = (1, 1) if self._batching else (1,)
        for control in self.config.controls:
            if control.kind == "CORRID":
                if control.datatype is DataType.BYTES:
                    value: Any = str(key).encode() if key != 0 else b""
                    data = np.full(shape, value, dtype=object)
                else:
                    number = key if isinstance(key, int) else 0
                    if control.datatype is DataType.INT64 and number >= 2**63:
                        number -= 2**64  # the same 64 bits, signed
                    data = np.full(shape, number, dtype=control.datatype.numpy_dtype)
            else:
                on = (
                    ready
                    if control.kind == "READY"
                    else bool(flags & (SEQUENCE_START if control.kind == "START" else SEQUENCE_END))
                )
                data = np.full(shape, control.false_true[on], dtype=control.datatype.numpy_dtype)
            request.inputs[control.name] = Tensor(control.name, data, control.datatype)

    def _feed_state(self, seq: _Sequence, job: Job) -> None:
        """Add ``seq``'s state inputs to ``job``'s request; have its response's state
        outputs kept as the sequence's next state (and dropped unless asked for)."""
        request = job.request
        if request.flags & SEQUENCE_START or not seq.state:
            seq.state = {s.input_name: s.initial for s in self.config.states}
        for s in self.config.states:
            value = seq.state[s.input_name]
            request.inputs[s.input_name] = Tensor(
                s.input_name, value[None] if self._batching else value, s.datatype
            )
        asked = [o.name for o in request.requested_outputs] or list(self._outputs)
        drop = [s.output_name for s in self.config.states if s.output_name not in asked]
        if not request.requested_outputs:
            request.requested_outputs = [RequestedOutput(n) for n in self._outputs]
        for s in self.config.states:
            if s.output_name not in asked:
                request.requested_outputs.append(RequestedOutput(s.output_name))
        job.done = self._keep_state(seq, job.done, drop)

    def _keep_state(self, seq: _Sequence, done: OnResponse, drop: list[str]) -> OnResponse:
        states = self.config.states
        batching = self._batching

        def keep(response: InferenceResponse | None, flags: int) -> None:
            if response is not None and response.error is None:
                outputs = response.outputs
                for s in states:
                    tensor = outputs.get(s.output_name)
                    if tensor is not None:
                        # A copy: the backend's buffer (shared memory) may be reused.
                        data = np.array(tensor.data[0] if batching else tensor.data, copy=True)
                        seq.state[s.input_name] = data
                for name in drop:
                    outputs.pop(name, None)
            done(response, flags)

        return keep

    def _null_job(self, template: Job) -> Job:
        """Triton's null request for an empty slot: ``template``'s inputs as zeros (its
        shape tensors' values as they are: they hold for the whole batch), READY false,
        its response dropped."""
        source = template.request
        shape_tensors = self.config.equal.shape_tensors
        inputs = {
            name: Tensor(name, _null_data(t, name in shape_tensors), t.datatype)
            for name, t in source.inputs.items()
        }
        request = InferenceRequest(
            model_name=source.model_name,
            model_version=source.model_version,
            inputs=inputs,
            requested_outputs=list(source.requested_outputs),
        )
        self._fill(request, ready=False, key=0)
        return Job(request, _ignore, time.monotonic_ns(), null=True)
