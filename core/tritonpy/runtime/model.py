"""A loaded model version: its final config, backend hooks, instances and scheduler.

``submit`` is the hot path shared by every front end: validate the request
against the config, then queue it. ``run`` executes a batch of jobs on one
instance (on that instance's worker thread) and answers each job.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DirectCall,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    OnResponse,
    Tensor,
    TritonError,
)
from tritonpy_sdk.cache import ResponseCache
from tritonpy_sdk.host import BackendHooks, call_hook

from ..bridges import Answer
from ..config import ModelConfig
from ..failures import report
from ..hostpolicy import HostPolicy, ThreadBinder
from ..inputs import NUMERIC
from ..memory.placement import place_inputs
from ..repository.namespaces import model_key
from ..scheduler import (
    DefaultScheduler,
    Job,
    NoInstances,
    Scheduler,
    SequenceBatcher,
    create_scheduler,
    fail_unfinished,
    internal_error,
    reschedule_refused,
)
from ..scheduler.ratelimiter import Need, RateLimiter
from .cache import cache_key
from .instance_update import HandOver
from .responses import finish_response
from .senders import SenderBatch
from .spec import IOSpec
from .statistics import ExecutionTimes, ModelStatistics
from .validation import direct_batch_size, take_reserved_parameters, validate_request

# The name it had before runtime/ existed: log lines and users' logging filters name it.
log = logging.getLogger("tritonpy.model")


_STAMPS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")


class ModelState(enum.Enum):
    """Triton's model readiness states."""

    UNKNOWN = "UNKNOWN"
    LOADING = "LOADING"
    READY = "READY"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


class VersionRetired(TritonError):
    """A request reached a version just as it stopped serving (a reload replaced it,
    or it is unloading). The server looks the model up again: what serves now takes
    the request, so a reload under traffic fails no request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.UNAVAILABLE)


@dataclass(eq=False)
class LoadedVersion:
    """One version of one model, built complete by the loader; ``start`` opens it.

    Every field is final once constructed (the scheduler is made here too); the
    only changes after that are the state (``start``, ``retire``, ``unload``) and,
    during a model update, the hand-overs of the instances it shares with the
    version it replaces (``start_sharing``, ``handed_over``, ``step_down``).
    """

    name: str
    version: int
    config: ModelConfig
    config_dict: dict[str, Any]
    spec: IOSpec
    hooks: BackendHooks
    model: Model
    #: The instances the scheduler hands requests to.
    instances: list[ModelInstance]
    labels: dict[str, list[str]] = field(default_factory=dict)
    #: Instances of ``passive`` instance groups: initialized and finalized, never scheduled.
    passive_instances: list[ModelInstance] = field(default_factory=list)
    #: Seconds its load took (``nv_model_load_duration_secs``).
    load_seconds: float = 0.0
    #: The server's response cache when this model enables ``response_cache``.
    cache: ResponseCache | None = None
    #: The server's rate limiter (``--rate-limit execution_count``) and each instance's
    #: needs; the scheduler asks the limiter which instance runs next.
    rate_limiter: RateLimiter | None = None
    needs: dict[str, Need] = field(default_factory=dict)
    #: Whether requests may carry device-resident inputs (the host has a GPU): each
    #: batch's inputs are then placed for its instance before ``execute``.
    device_tensors: bool = False
    #: The ``--host-policy`` binding each instance (by name), for those that have one:
    #: their worker threads bind themselves, and no request runs on a caller's thread.
    host_policies: dict[str, HostPolicy] = field(default_factory=dict)
    #: Its repository under model namespacing ("" without): metrics label it ``namespace``.
    namespace: str = ""
    #: Each instance's signature (``instance_update.signature``), by instance name: what a
    #: model update keeps of it.
    signatures: dict[str, bytes] = field(default_factory=dict)
    state: ModelState = ModelState.LOADING
    reason: str = ""
    stats: ModelStatistics = field(default_factory=ModelStatistics)
    _scheduler: Scheduler | None = None
    #: Makes the scheduler of a version that is not run by instances (an ensemble's).
    scheduler_factory: Callable[[LoadedVersion], Scheduler] | None = None
    #: Whether the model may send any number of responses per request (read once).
    decoupled: bool = field(init=False)
    #: Whether the sequence batcher schedules it (its batches may hold null requests).
    sequence: bool = field(init=False)
    #: The scheduler's ``run_here`` when it has one (``Scheduler.can_run_here``), else None.
    _run_here: Callable[[Job], bool] | None = field(init=False, default=None)
    #: The scheduler's ``reschedule`` when it takes jobs back (``can_reschedule``), else None.
    _reschedule: Callable[[Job], None] | None = field(init=False, default=None)
    #: The backend's ``execute``, bound once (``BackendHooks.execute_function``).
    _execute: Callable[
        [ModelInstance, Sequence[InferenceRequest]], Sequence[InferenceResponse | None] | None
    ] = field(init=False, repr=False)
    #: The backend's ``execute_nowait``, bound once (``BackendHooks.nowait_function``);
    #: called with keywords.
    _execute_nowait: Callable[..., Any] | None = field(init=False, repr=False, default=None)
    #: Per instance that pipelines (``ModelInstance.pipeline_depth`` above 1), its
    #: batches started through ``execute_nowait`` and not yet completed, oldest first:
    #: a batch behind another starts running when the one before it ends, and its
    #: statistics count the wait as queueing. None when no instance pipelines.
    _lines: dict[int, collections.deque[SenderBatch]] | None = field(init=False, repr=False, default=None)
    #: The backend's ``execute_direct`` when a ``predict`` may take the direct lane
    #: (``run_direct``): nothing between the caller and ``execute`` would change its
    #: request or its answer. None: every request goes through ``submit``.
    _execute_direct: Callable[[ModelInstance, DirectCall], Any] | None = field(
        init=False, repr=False, default=None
    )
    #: Binds worker threads by ``host_policies`` (None: no instance has a policy).
    _binder: ThreadBinder | None = field(init=False, repr=False, default=None)
    #: Whether ``run_direct`` may take requests (``_execute_direct`` is set).
    direct: bool = field(init=False, default=False)
    #: ``DefaultScheduler.hold`` of the direct lane's scheduler.
    _hold: Callable[[], tuple[ModelInstance, threading.Lock] | None] | None = field(
        init=False, repr=False, default=None
    )
    #: During a model update, the instances the replaced version may still run, by id
    #: (``start_sharing``); None otherwise (one check per batch).
    _handovers: dict[int, HandOver] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self._execute = self.hooks.execute_function()
        self._execute_nowait = self.hooks.nowait_function()
        self.decoupled = self.config.model_transaction_policy.decoupled
        self.stats.single_response = not self.decoupled
        self.sequence = self.config.WhichOneof("scheduling_choice") == "sequence_batching"
        if self.scheduler_factory is not None:
            scheduler = self.scheduler_factory(self)
        elif not self.instances:  # every instance group is passive
            scheduler = NoInstances(self.name)
        else:
            limiter, needs = self.rate_limiter, []
            if limiter is not None:  # instances of groups without resources need nothing
                needs = [self.needs.get(i.name) or Need((), i.device_id) for i in self.instances]
            nowait = self.hooks.execute_nowait is not None and all(i.nowait for i in self.instances)
            if nowait and any(i.pipeline_depth > 1 for i in self.instances):
                self._lines = {id(i): collections.deque() for i in self.instances if i.pipeline_depth > 1}
            scheduler = create_scheduler(
                self.name,
                self.config,
                self.instances,
                self.run,
                self._rejected,
                limiter,
                needs,
                self.run_nowait if nowait else None,
                self.model.repository_path,
                self.model.backend.server.event_loop if self.model.backend.server is not None else None,
            )
        self._scheduler = scheduler
        self._binder = ThreadBinder(self.host_policies) if self.host_policies else None
        # The scheduler's optional capabilities, read once here rather than per request.
        # A bound instance runs on its own (bound) thread only: no caller's thread, no direct lane.
        bound = self._binder is not None
        self._run_here = scheduler.run_here if scheduler.can_run_here and not bound else None
        self._reschedule = scheduler.reschedule if scheduler.can_reschedule else None
        direct = self.hooks.direct_function()
        if (
            direct is not None
            and not bound
            and type(scheduler) is DefaultScheduler  # no batcher, sequences, rate limiter
            and self.instances
            and all(i.direct for i in self.instances)
            and self.cache is None
            and not self.decoupled
            and not self.device_tensors
            and not self.spec.reshaped_outputs
        ):
            self._execute_direct = direct
            self._hold = scheduler.hold
            self.direct = True

    @property
    def key(self) -> str:
        """Its model's key (``namespaces.model_key``): the name, or ``<namespace>::<name>``."""
        return model_key(self.namespace, self.name)

    def start(self) -> None:
        """Start the scheduler's workers; the version serves from now on."""
        assert self._scheduler is not None
        self._scheduler.start()
        self.state = ModelState.READY

    def start_sharing(self, shared: Sequence[ModelInstance]) -> None:
        """Start serving (a model update) while the version it replaces still runs the
        ``shared`` instances: a batch for one of them waits until ``handed_over``; the
        others serve at once."""
        self._handovers = {id(inst): HandOver() for inst in shared}
        self.start()

    def handed_over(self) -> None:
        """The version this one replaces no longer runs any instance (``start_sharing``)."""
        handovers, self._handovers = self._handovers, None
        for handover in (handovers or {}).values():
            handover.done()

    def step_down(self, removed: Sequence[ModelInstance], deadline: float | None = None) -> None:
        """Give way to the version that updates this one: take no new requests, finish
        what was queued (until ``deadline``, a ``time.monotonic()`` value), and finalize
        the ``removed`` instances; the model and the other instances go on in the new version."""
        self.retire()
        if self._scheduler is not None:
            self._scheduler.stop(deadline)
            self._scheduler = None
            self._run_here = self._reschedule = None
        for inst in removed:
            finalize_quietly(self.hooks, "instance_finalize", instance=inst)
        self.release_needs()  # the new version registered what it runs
        self.state = ModelState.UNAVAILABLE
        self.reason = "unloaded"

    def release_needs(self) -> None:
        """Let the rate limiter's pools shrink to the needs of the instances left (it is
        unloaded, replaced by an update, or an update that made it did not go ahead)."""
        if self.rate_limiter is not None:
            for need in self.needs.values():
                self.rate_limiter.unregister(need)

    def has_sequences(self) -> bool:
        """Whether its sequence batcher holds any sequence (False without one)."""
        scheduler = self._scheduler
        return isinstance(scheduler, SequenceBatcher) and scheduler.has_sequences()

    def _handover(self, instance: ModelInstance) -> HandOver | None:
        """The hand-over a batch on ``instance`` must wait for, if any (``start_sharing``)."""
        handovers = self._handovers
        if handovers is None:
            return None
        handover = handovers.get(id(instance))
        return handover if handover is not None and not handover.is_done else None

    def _rejected(self, job: Job, reason: str) -> None:
        """A queued request the scheduler gave up on (timeout): count it as a failure."""
        self.stats.dequeued(1)
        self.stats.record_rejection(job.arrival_ns, reason)

    @property
    def ready(self) -> bool:
        return self.state is ModelState.READY

    def instances_ready(self) -> bool:
        """Whether every instance can serve now, as the backend's ``instance_ready`` says
        (True without that hook). Blocking: it may ask the backend's processes."""
        hook = self.hooks.instance_ready
        if hook is None:
            return True
        for instance in self.instances:
            try:
                if not hook(instance=instance):
                    return False
            except Exception as exc:  # a failing check is a "no", never an error
                log.warning("readiness check of '%s' failed: %s", instance.name, exc)
                return False
        return True

    def submit(
        self, request: InferenceRequest, done: OnResponse, trace: Any = None, here: bool = False
    ) -> None:
        """Validate ``request`` and queue it; ``done(response, flags)`` gets its responses.
        ``here``: the caller blocks for the answer anyway, so the request may run on its
        thread when an instance is free (schedulers with ``run_here``).

        Raises ``TritonError`` for an invalid request (before anything is
        queued); every queued request is answered through ``done``, the last
        call with ``RESPONSE_COMPLETE_FINAL`` (exactly one call unless the
        model is decoupled; a decoupled model's FINAL may come without a response).
        """
        scheduler = self._scheduler  # once: an unload may clear it meanwhile
        if scheduler is None or self.state is not ModelState.READY:
            raise self._not_ready()
        if request.parameters:
            take_reserved_parameters(request)
        validate_request(self.spec, request)  # its errors in Triton's words and order
        arrival = time.monotonic_ns()
        key = None
        lookup_ns = 0
        if self.cache is not None:
            key = cache_key(request)
            cached = self.cache.lookup(key)
            lookup_ns = time.monotonic_ns() - arrival
            if cached is not None:
                response = InferenceResponse(
                    dict(cached.outputs),
                    parameters=dict(cached.parameters),
                    model_name=self.name,
                    model_version=self.version,
                    id=request.id,
                )
                self.stats.record_cache_hit(arrival, lookup_ns)
                done(response, RESPONSE_COMPLETE_FINAL)
                return
        if trace is not None:
            trace.stamp("QUEUE_START", arrival)
            if trace.tensors is not None and not self.sequence:  # as Triton's batcher enqueues
                trace.record_tensors("TENSOR_QUEUE_INPUT", request.inputs.values())
        job = Job(request, done, arrival, trace, key, lookup_ns)
        if here:
            # Run by the caller, the job never waits in a queue: not counted as pending.
            run_here = self._run_here
            if run_here is not None:
                job.queued = False
                if run_here(job):
                    return
                job.queued = True
        self.stats.queued()
        try:
            scheduler.enqueue(job)
        except TritonError:
            self.stats.dequeued(1)
            if self.retired:  # replaced between lookup and queueing
                raise self._not_ready() from None
            # As Triton: a request refused here (a full queue) never entered the
            # model, so no statistic counts it (a queue timeout is a failure).
            raise

    def run_direct(self, inputs: dict[str, Any]) -> dict[str, Any] | Answer | None:
        """Run a ``predict`` of ``inputs`` on the calling thread through the backend's
        ``execute_direct``, when it can take them as they are (``direct_batch_size``)
        and an instance is free; None (nothing done) otherwise: then ``submit`` it.

        Returns the outputs, or, when the backend answered as ``execute`` does, the
        ``Answer`` that gets the response ``_finish`` makes of it (an error response
        included; it may come later, through a response sender): the caller waits for
        it once the instance is free. Statistics are recorded as ``submit`` and
        ``run`` record them."""
        execute = self._execute_direct
        if execute is None or self.state is not ModelState.READY or self._handovers is not None:
            return None
        batch = direct_batch_size(self.spec, inputs)
        if not batch:
            return None
        assert self._hold is not None
        arrival = time.monotonic_ns()
        held = self._hold()
        if held is None:
            return None
        instance, lock = held
        try:
            start = time.monotonic_ns()
            call = _Direct(self, batch, inputs, arrival, start)
            call.infer_start = infer_start = time.monotonic_ns()
            try:
                result = execute(instance, call)
            except Exception as exc:
                return self._direct_finish(instance, call, None, exc)
            if type(result) is dict and call.made is None:
                call.done = True  # a request made from now on is done with (``_make``)
                infer_end = time.monotonic_ns()
                times = ExecutionTimes(start, infer_start, infer_end, time.monotonic_ns())
                self.stats.record_one(times, arrival, batch, True)
                return result
            return self._direct_finish(instance, call, result, None)
        finally:
            lock.release()

    def _direct_finish(
        self, instance: ModelInstance, call: _Direct, result: Any, error: BaseException | None
    ) -> Answer:
        """What ``run`` does after ``execute`` for a direct call the backend answered as
        ``execute`` does; the caller waits for the answer (it may come later, from a
        response sender)."""
        request = call.request()
        job = call.job
        assert job is not None and call.senders is not None and call.answer is not None
        if type(result) is dict:  # outputs, though the request was made: as a response
            result = [InferenceResponse({n: Tensor.from_numpy(n, a) for n, a in result.items()})]
        try:
            self._finish(instance, (job,), (request,), call.senders, call.start, result, error)
        except Exception as exc:
            message = report(log, f"running a batch of model '{self.name}' failed", exc)
            fail_unfinished((job,), TritonError.internal(message))
        return call.answer

    def _not_ready(self) -> TritonError:
        message = f"Request for unknown model: '{self.name}' version {self.version} is not at ready state"
        if self.retired:
            return VersionRetired(message)
        return TritonError.unavailable(message)

    def run(self, instance: ModelInstance, jobs: Sequence[Job]) -> None:
        """Execute ``jobs`` on ``instance``, record statistics, answer every job.

        Never raises: whatever escapes any stage, each job without its FINAL
        answer gets an error (jobs answered through senders keep theirs).
        """
        try:
            if self._binder is not None:
                self._binder.bind(instance.name)
            if self._handovers is not None:  # a model update: the instance may still be busy
                handover = self._handover(instance)
                if handover is not None:
                    handover.wait()
            start = time.monotonic_ns()
            if len(jobs) == 1 and not self.sequence:  # ``_begin`` of the common case, inlined
                job = jobs[0]
                if job.queued:
                    self.stats.dequeued(1)
                if job.request._cancelled:
                    jobs = self._drop_cancelled(jobs, start)
                    if not jobs:
                        return
                requests = [job.request]
            else:
                jobs = self._begin(jobs, start)
                if not jobs:
                    return
                requests = [j.request for j in jobs]
            senders = SenderBatch(self, jobs, start, self.decoupled)
            senders.infer_start = time.monotonic_ns()
            try:
                if self.device_tensors:
                    place_inputs(instance, requests)
                responses = self._execute(instance, requests)
            except Exception as exc:  # a backend bug must not kill the worker or the server
                self._finish(instance, jobs, requests, senders, start, None, exc)
            else:
                self._finish(instance, jobs, requests, senders, start, responses, None)
        except Exception as exc:
            message = report(log, f"running a batch of model '{self.name}' failed", exc)
            fail_unfinished(jobs, TritonError.internal(message))

    def run_nowait(self, instance: ModelInstance, jobs: Sequence[Job], release: Callable[[], None]) -> None:
        """Start ``jobs`` on ``instance`` through the backend's ``execute_nowait`` and
        return; ``release()`` follows once the batch is done and every job answered
        (possibly on another thread, possibly before this returns). Never raises."""
        hook = self._execute_nowait
        assert hook is not None
        if self._handovers is not None:  # a model update: started once the instance is free
            handover = self._handover(instance)
            if handover is not None and handover.then(lambda: self.run_nowait(instance, jobs, release)):
                return
        start = time.monotonic_ns()
        try:
            jobs = self._begin(jobs, start)
        except Exception as exc:
            fail_unfinished(jobs, internal_error(f"starting a batch of model '{self.name}' failed", exc))
            jobs = []
        if not jobs:
            release()
            return
        requests = [j.request for j in jobs]
        senders = SenderBatch(self, jobs, start, self.decoupled)
        ended = threading.Lock()
        line = None if self._lines is None else self._lines.get(id(instance))
        if line is not None:
            line.append(senders)

        def complete(
            responses: Sequence[InferenceResponse] | None, error: BaseException | None = None
        ) -> None:
            if not ended.acquire(blocking=False):
                log.warning("backend '%s' completed a batch of model '%s' twice", self.hooks.name, self.name)
                return
            try:
                if line is not None:
                    _ended(line, senders)
                self._finish(instance, jobs, requests, senders, senders.start_ns, responses, error)
            except Exception as exc:
                message = report(log, f"finishing a batch of model '{self.name}' failed", exc)
                fail_unfinished(jobs, TritonError.internal(message))
            finally:
                release()

        senders.infer_start = time.monotonic_ns()
        try:
            if self.device_tensors:
                place_inputs(instance, requests)
            hook(instance=instance, requests=requests, complete=complete)
        except Exception as exc:
            if ended.locked():  # it completed the batch, then raised: the batch stands
                log.warning("execute_nowait of model '%s' raised after completing: %s", self.name, exc)
            else:
                complete(None, exc)

    def _begin(self, jobs: Sequence[Job], start: int) -> Sequence[Job]:
        """Count ``jobs`` as dequeued; answer the cancelled ones; the jobs left to run."""
        if self.sequence:
            # Null requests were never queued; a cancelled request keeps its batch
            # position (the sequence batcher answered those it saw cancelled).
            self.stats.dequeued(sum(not j.null for j in jobs))
            return jobs
        if len(jobs) == 1:  # the common case, without the loop
            job = jobs[0]
            if job.queued:
                self.stats.dequeued(1)
            if job.request.is_cancelled():
                return self._drop_cancelled(jobs, start)
            return jobs
        self.stats.dequeued(len(jobs))
        for job in jobs:
            if job.request.is_cancelled():
                return self._drop_cancelled(jobs, start)
        return jobs

    def _finish(
        self,
        instance: ModelInstance,
        jobs: Sequence[Job],
        requests: Sequence[InferenceRequest],
        senders: SenderBatch,
        start: int,
        responses: Sequence[InferenceResponse | None] | None,
        error: BaseException | None,
    ) -> None:
        """What the backend's execution gave: record it and answer every job
        (``requests`` are the jobs' requests, as the backend got them); jobs the
        backend handed back (``request.reschedule()``) go back to the scheduler."""
        if (
            error is None
            and responses is not None
            and len(responses) == 1
            and len(jobs) == 1
            and responses[0] is not None
            and not requests[0]._rescheduled
            and not self.sequence
        ):
            # One request answered (the common case): what the rest of this method does
            # for it, without the loops and the branches for batches, errors, requests
            # handed back and null requests.
            job = jobs[0]
            infer_end = time.monotonic_ns()
            out = self._prepared(job, responses[0])
            senders.close()
            times = ExecutionTimes(start, senders.infer_start, infer_end, time.monotonic_ns())
            self.stats.record_one(times, job.arrival_ns, requests[0].batch_size, out.error is None)
            self._deliver(job, out, times)
            return
        if error is not None:
            back: Sequence[int] = ()
        elif len(requests) == 1:  # ``_handed_back`` of the common case, inlined
            back = _FIRST if requests[0]._rescheduled else ()
        else:
            back = _handed_back(requests)
        if error is None:
            if responses is None:
                if back:
                    senders.handed_back(back)
                    self._requeue([jobs[i] for i in back])
                senders.execute_returned()
                return
            if len(responses) != len(requests):
                error = TritonError.internal(
                    f"backend '{self.hooks.name}' returned {len(responses)} responses for "
                    f"{len(requests)} requests of model '{self.name}'"
                )
        if error is not None:
            if not isinstance(error, TritonError):
                log.error("execute of model '%s' on '%s' raised", self.name, instance.name, exc_info=error)
                error = TritonError.internal(f"{type(error).__name__}: {error}")
            if senders.any_sent():
                # Part of the batch was already answered through senders.
                senders.fail_open(error)
                senders.execute_returned()
                return
            infer_end = time.monotonic_ns()
            outs = [self.error_response(job, error) for job in jobs]
        else:
            assert responses is not None
            if back and any(responses[i] is not None for i in back):
                # A response for a request handed back: the response stands, as if it
                # had not been handed back (the SDK asks for None in its place).
                log.warning("model '%s' answered a request it handed back; not run again", self.name)
                back = [i for i in back if responses[i] is None]
            infer_end = time.monotonic_ns()
            outs = []
            for job, response in zip(jobs, responses):
                if response is None and job.request._rescheduled:
                    # Its execution counts (as Triton counts it); its answer comes later.
                    outs.append(InferenceResponse(model_name=self.name, model_version=self.version))
                    continue
                if response is None:
                    missing = TritonError.internal(
                        f"backend '{self.hooks.name}' returned no response for request "
                        f"'{job.request.id}' of model '{self.name}'"
                    )
                    outs.append(self.error_response(job, missing))
                else:
                    outs.append(self._prepared(job, response))
        senders.close()  # every job is answered below, not through its sender
        times = ExecutionTimes(start, senders.infer_start, infer_end, time.monotonic_ns())
        if self.sequence and any(j.null for j in jobs):
            # As Triton: null requests count in the batch size, not as inferences.
            real = [i for i, j in enumerate(jobs) if not j.null]
            self.stats.record_execution(
                times,
                [jobs[i].arrival_ns for i in real],
                [requests[i].batch_size for i in real],
                [outs[i].error is None for i in real],
                padding=len(jobs) - len(real),
            )
        elif len(jobs) == 1:  # the common case (no batching): tuples, not comprehensions
            self.stats.record_one(times, jobs[0].arrival_ns, requests[0].batch_size, outs[0].error is None)
        else:
            self.stats.record_execution(
                times,
                [j.arrival_ns for j in jobs],
                [r.batch_size for r in requests],
                [o.error is None for o in outs],
            )
        if back:
            kept = [i for i in range(len(jobs)) if i not in back]
            again = [jobs[i] for i in back]
            jobs, outs = [jobs[i] for i in kept], [outs[i] for i in kept]
            self._requeue(again)
        for job, out in zip(jobs, outs):
            self._deliver(job, out, times)

    def _prepared(self, job: Job, response: InferenceResponse) -> InferenceResponse:
        """The backend's ``response`` to ``job`` as the client gets it (``finish_response``),
        or the error response when it cannot be: this request's response is bad, not the
        batch's."""
        try:
            return finish_response(self.spec, self.labels, job.request, response)
        except Exception as exc:
            if not isinstance(exc, TritonError):
                where = f"the response of model '{self.name}' could not be prepared"
                exc = TritonError.internal(report(log, where, exc))
            return self.error_response(job, exc)

    def _deliver(self, job: Job, out: InferenceResponse, times: ExecutionTimes) -> None:
        """Cache ``out`` (when the model caches), stamp the job's trace, answer it."""
        if self.cache is not None:
            self.cache_response(job, out)
        if job.trace is not None:
            for name, ns in zip(_STAMPS, (times.start, times.infer_start, times.infer_end, times.end)):
                job.trace.stamp(name, ns)
        job.answer(out, RESPONSE_COMPLETE_FINAL)

    def _requeue(self, jobs: Sequence[Job]) -> None:
        """Give the scheduler back the jobs whose backend handed them back; a scheduler
        that takes none back (or cannot now) has them answered with its error."""
        reschedule = self._reschedule  # None once the scheduler stopped (``stop``)
        for job in jobs:
            job.request._rescheduled = False
            if job.finished:  # a decoupled model sent FINAL, then handed it back
                log.warning(
                    "model '%s' handed back request '%s' after its final response; not run again",
                    self.name,
                    job.request.id,
                )
                continue
            try:
                if reschedule is None:
                    raise reschedule_refused()
                self.stats.queued()
                try:
                    reschedule(job)
                except TritonError:
                    self.stats.dequeued(1)
                    raise
            except TritonError as exc:
                log.error("Failed to release request: %s", exc.message)  # Triton's log line
                job.answer(self.error_response(job, exc), RESPONSE_COMPLETE_FINAL)

    def _drop_cancelled(self, jobs: Sequence[Job], now: int) -> list[Job]:
        """Answer jobs whose client left before they ran with CANCELLED; return the rest."""
        keep = []
        for job in jobs:
            if job.request.is_cancelled():
                self.stats.record_rejection(job.arrival_ns, "CANCELED")
                job.answer(
                    self.error_response(job, TritonError("Request was cancelled", ErrorCode.CANCELLED)),
                    RESPONSE_COMPLETE_FINAL,
                )
            else:
                keep.append(job)
        return keep

    def cache_response(self, job: Job, response: InferenceResponse) -> None:
        """Keep a successful response of a request the cache missed (a model with
        ``response_cache`` enabled), and count the miss."""
        if self.cache is not None and job.cache_key is not None and response.error is None:
            t = time.monotonic_ns()
            try:
                self.cache.insert(job.cache_key, response)
            except Exception as exc:  # a response the cache cannot keep is still answered
                message = exc.message if isinstance(exc, TritonError) else repr(exc)
                log.error("Failed to insert key [%s] into response cache: %s", job.cache_key.hex(), message)
            self.stats.record_cache_miss(job.cache_lookup_ns + time.monotonic_ns() - t)

    def finish_ensemble_response(
        self, request: InferenceRequest, response: InferenceResponse
    ) -> InferenceResponse:
        """An ensemble's response shaped for its client, as ``run`` shapes a backend's."""
        return finish_response(self.spec, self.labels, request, response)

    def error_response(self, job: Job, error: TritonError) -> InferenceResponse:
        resp = InferenceResponse.from_error(error)
        resp.model_name, resp.model_version, resp.id = self.name, self.version, job.request.id
        return resp

    @staticmethod
    def log_warning(message: str) -> None:
        log.warning("%s", message)

    @property
    def retired(self) -> bool:
        """Whether a newer load replaced this version or it is unloading: a request that
        looked it up just before then is sent to what serves now instead."""
        return self.state is ModelState.UNLOADING or self.state is ModelState.UNAVAILABLE

    def retire(self) -> None:
        """Take no new requests (lookups no longer find it); ``unload`` follows."""
        self.state = ModelState.UNLOADING

    def unload(self, deadline: float | None = None) -> None:
        """Stop the scheduler (queued work finishes until ``deadline``, a
        ``time.monotonic()`` value) and finalize instances and model."""
        if self.state is ModelState.UNAVAILABLE and self._scheduler is None:
            return
        self.retire()
        if self._scheduler is not None:
            self._scheduler.stop(deadline)
            self._scheduler = None
            self._run_here = self._reschedule = None
        for inst in (*self.instances, *self.passive_instances):
            finalize_quietly(self.hooks, "instance_finalize", instance=inst)
        self.release_needs()
        finalize_quietly(self.hooks, "model_finalize", model=self.model)
        self.state = ModelState.UNAVAILABLE
        self.reason = "unloaded"


class _Direct(DirectCall):
    """A direct call whose request, once made, is a job of its model (answered through
    ``answer``) with its ``SenderBatch``: what ``run`` gives ``execute``."""

    __slots__ = ("_model", "arrival", "start", "infer_start", "done", "job", "senders", "answer")

    def __init__(
        self, model: LoadedVersion, batch_size: int, inputs: dict[str, Any], arrival: int, start: int
    ) -> None:
        # ``DirectCall.__init__``, spelt out (one call less per request)
        self.model_name = model.name
        self.model_version = model.version
        self.batch_size = batch_size
        self.inputs = inputs
        self.made = None
        self._model = model
        self.arrival = arrival
        self.start = start
        self.infer_start = start
        #: Answered with its arrays: a request made later (a model that kept it and asks
        #: for its response sender) gets a closed sender, as once ``execute`` returned.
        self.done = False
        self.job: Job | None = None
        self.senders: SenderBatch | None = None
        self.answer: Answer | None = None

    def _make(self) -> InferenceRequest:
        # The tensors ``ModelHandle.create_request`` makes of plain numeric arrays.
        request = InferenceRequest(
            self.model_name,
            self.model_version,
            {name: Tensor(name, array, NUMERIC[array.dtype]) for name, array in self.inputs.items()},
        )
        request.batch_size = self.batch_size
        self.answer = Answer()
        job = self.job = Job(request, self.answer.done, self.arrival)
        job.queued = False
        senders = self.senders = SenderBatch(self._model, (job,), self.start, False)
        senders.infer_start = self.infer_start
        if self.done:
            senders.close()
        return request


def _handed_back(requests: Sequence[InferenceRequest]) -> Sequence[int]:
    """The positions of the requests their backend handed back (``reschedule()``)."""
    if len(requests) == 1:  # the common case, without a comprehension
        return _FIRST if requests[0]._rescheduled else ()
    return [i for i, r in enumerate(requests) if r._rescheduled]


_FIRST = (0,)


def _ended(line: collections.deque[SenderBatch], batch: SenderBatch) -> None:
    """``batch`` ended on an instance whose batches queue there (``_lines``): the one
    behind it starts running now, so its time until now counts as queueing."""
    if line and line[0] is batch:
        line.popleft()
    else:  # completed out of order (a stub's restart): nothing started behind it
        try:
            line.remove(batch)
        except ValueError:
            pass
        return
    if line:
        following = line[0]
        now = time.monotonic_ns()
        if following.start_ns < now:
            following.start_ns = following.infer_start = now


def finalize_quietly(hooks: BackendHooks, name: str, **kwargs: Any) -> None:
    try:
        call_hook(hooks, name, **kwargs)
    except TritonError as exc:
        log.warning("%s failed: %s", name, exc.message)
