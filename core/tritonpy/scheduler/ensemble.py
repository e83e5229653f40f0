"""The ensemble scheduler: runs a request through its ensemble's steps, as events.

An ensemble has no instances of its own. Each request becomes a ``_Run`` that
holds the request's tensors by ensemble name; a step fires as soon as every
tensor it reads exists, by submitting an internal request to its member model
(through the server, so the member's own scheduler batches it with whatever
else it serves, and a reloaded member is found again); each member response
adds the step's outputs to the run's tensors, which fires the steps that were
waiting for them. Independent steps are in flight together. No thread waits:
everything happens in the callbacks of the member responses (on the members'
worker threads) and on the thread that submitted the request.

Tensors flow by reference: a member's output array becomes the next member's
input array, renamed, never copied. Only the steps the requested outputs need
run (as Triton prunes its step graph per request).

A step's response that fails fails the whole request with the step's error
("in ensemble '<name>', <error>") and cancels the steps still in flight;
cancelling the request cancels them too.

``ensemble_scheduling.max_inflight_requests`` bounds, per step, the requests in
flight at its member across all of the ensemble's requests (as Triton does). A
step request over the bound waits in that step's queue (``_Gate``), in order,
until one in flight at that step ends; nothing blocks the thread that made it
(a member's answer may come on the event loop).

Decoupled members: each response of a decoupled step forks the run's tensors
(a new "generation" that shares what existed before the step), the steps
downstream run once per response, and each generation that has every
requested output is one response of the ensemble, which is then decoupled
itself; its FINAL flag follows once no step is in flight.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    SEQUENCE_END,
    SEQUENCE_START,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    OnResponse,
    ParameterValue,
    RequestedOutput,
    Tensor,
    TritonError,
)

from ..runtime.responses import reshaped
from ..runtime.spec import IOSpec
from ..runtime.statistics import ExecutionTimes, ModelStatistics
from ._job import Job, internal_error, remaining, stopped
from .contract import Scheduler

log = logging.getLogger(__name__)


class Submit(Protocol):
    """Submits an internal request to a member model (``Server.submit(..., internal=True)``);
    under model namespacing, ``namespace`` is the ensemble's repository, where its
    members are looked up first."""

    def __call__(self, request: InferenceRequest, done: OnResponse, namespace: str = "") -> None: ...


#: How many requested-output subsets keep their pruned step list.
_PRUNED_CACHE = 64


@dataclass(frozen=True, slots=True)
class Step:
    """One step of an ensemble: its member and how tensors map in and out of it."""

    index: int
    model_name: str
    #: The member's version (-1: its latest ready version at each request).
    model_version: int
    #: ``(member input, ensemble tensor)`` pairs.
    inputs: tuple[tuple[str, str], ...]
    #: ``(member output, ensemble tensor)`` pairs.
    outputs: tuple[tuple[str, str], ...]
    #: For each of ``outputs``, where each later step that reads its tensor takes its
    #: inputs: a GPU id (every instance of that member takes device inputs there) or
    #: None (host memory). Empty: not known (a step made without a plan).
    readers: tuple[tuple[int | None, ...], ...] = ()
    #: Whether some reader in ``readers`` takes its inputs on a GPU.
    device_readers: bool = False
    #: Whether the member batches (``max_batch_size > 0``).
    batching: bool = True
    #: For each of ``inputs``, the member input's config ``dims`` (empty: not known).
    input_dims: tuple[tuple[int, ...], ...] = ()


class EnsembleModel(Protocol):
    """What the scheduler needs of the ensemble's own model version."""

    name: str
    version: int
    decoupled: bool
    stats: ModelStatistics
    #: Its config's inputs and outputs: which inputs are optional, whether it batches,
    #: and its outputs' dims.
    spec: IOSpec

    def finish_ensemble_response(
        self, request: InferenceRequest, response: InferenceResponse
    ) -> InferenceResponse:
        """Shape a response for the client (requested outputs, classification)."""
        ...

    def cache_response(self, job: Job, response: InferenceResponse) -> None:
        """Keep the response in the response cache when the ensemble uses one."""
        ...


class _Gate:
    """One step's bound on its requests in flight across the ensemble's requests
    (``max_inflight_requests``): a step request over it waits here, in order, until
    one in flight at that step ends. A waiting request whose run has finished (failed
    or cancelled) is dropped, never sent."""

    __slots__ = ("_inflight", "_limit", "_lock", "_waiting")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._inflight = 0
        self._waiting: deque[tuple[_Run, _Call]] = deque()
        self._lock = threading.Lock()

    def admit(self, run: _Run, call: _Call) -> bool:
        """Whether ``call`` may be sent now (then it counts as in flight); else it waits."""
        with self._lock:
            if self._inflight < self._limit and not self._waiting:
                self._inflight += 1
                return True
            self._waiting.append((run, call))
            return False

    def release(self) -> list[tuple[_Run, _Call]]:
        """One request in flight at this step ended: the waiting ones to send now."""
        ready: list[tuple[_Run, _Call]] = []
        with self._lock:
            self._inflight -= 1
            while self._waiting and self._inflight < self._limit:
                run, call = self._waiting.popleft()
                if run.finished:
                    continue
                self._inflight += 1
                ready.append((run, call))
        return ready

    @property
    def waiting(self) -> int:
        return len(self._waiting)


#: Per thread, the step requests a gate released that wait to be sent (None: none is
#: being sent on this thread).
_releasing = threading.local()


def _send_released(gate: _Gate) -> None:
    """Release a slot of ``gate`` and send what it lets go. A send that fails at once
    answers its step with the error, which releases a slot again: what that lets go is
    sent by the loop below, not by a nested one, so a long queue of failing sends does
    not deepen the stack."""
    ready = gate.release()
    queued: deque[tuple[_Run, _Call]] | None = getattr(_releasing, "queued", None)
    if queued is not None:
        queued.extend(ready)
        return
    _releasing.queued = queued = deque(ready)
    try:
        while queued:
            run, call = queued.popleft()
            run._send(call)
    finally:
        _releasing.queued = None


class EnsembleScheduler(Scheduler):
    """Drives each request of one ensemble version through its steps."""

    def __init__(
        self,
        model: EnsembleModel,
        steps: Sequence[Step],
        outputs: Sequence[str],
        submit: Submit,
        max_inflight: int = 0,
    ):
        """``max_inflight``: ``max_inflight_requests``, each step's bound (0: none)."""
        self.model = model
        self.steps = tuple(steps)
        self.outputs = tuple(outputs)
        spec = model.spec
        #: The ensemble's inputs that a request may leave out.
        self.optional_inputs = tuple(n for n in spec.inputs if n not in spec.required_inputs)
        self.batching = spec.batching
        #: Its outputs' config dims (``reshape.shape`` where given), for answers made by
        #: members of the other kind (``batch_reshape``).
        self.output_dims = {
            name: t.reshape if t.reshape is not None else t.dims for name, t in spec.outputs.items()
        }
        self.submit = submit
        self._writer = {tensor: step for step in self.steps for _, tensor in step.outputs}
        self._pruned: dict[frozenset[str], tuple[Step, ...]] = {}
        self._open = False
        self._active = 0
        self._idle = threading.Condition()
        #: Each step's ``_Gate``, by step index (None: no bound).
        self.gates: dict[int, _Gate] | None = (
            {s.index: _Gate(max_inflight) for s in self.steps} if max_inflight > 0 else None
        )

    def start(self) -> None:
        self._open = True

    def enqueue(self, job: Job) -> None:
        """Start ``job``'s run now (its first steps are submitted before this returns)."""
        with self._idle:
            if not self._open:
                raise stopped(self.model.name)
            self._active += 1
        run = _Run(self, job)
        try:
            run.begin()
        except Exception as exc:  # never leave a request unanswered
            run.fail(internal_error(f"starting a request of ensemble '{self.model.name}' failed", exc))

    def stop(self, deadline: float | None = None) -> None:
        """Take no more requests; wait (until ``deadline``) for the runs in flight."""
        with self._idle:
            self._open = False
            self._idle.wait_for(lambda: self._active == 0, remaining(deadline))

    def ended(self) -> None:
        with self._idle:
            self._active -= 1
            if self._active == 0:
                self._idle.notify_all()

    def pruned(self, wanted: frozenset[str]) -> tuple[Step, ...]:
        """The steps that the tensors ``wanted`` depend on, in config order."""
        steps = self._pruned.get(wanted)
        if steps is not None:
            return steps
        needed: set[int] = set()
        todo = list(wanted)
        while todo:
            step = self._writer.get(todo.pop())
            if step is not None and step.index not in needed:
                needed.add(step.index)
                todo.extend(tensor for _, tensor in step.inputs)
        steps = tuple(s for s in self.steps if s.index in needed)
        if len(self._pruned) < _PRUNED_CACHE:
            self._pruned[wanted] = steps
        return steps


def _fits(config_dims: Sequence[int], dims: Sequence[int]) -> bool:
    """Triton's ``CompareDimsWithWildcard``: as many dims, each equal or -1 in the config."""
    return len(config_dims) == len(dims) and all(c in (-1, d) for c, d in zip(config_dims, dims))


def batch_reshape(
    config_dims: Sequence[int], batching: bool, batch_size: int, shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """The shape a tensor of ``shape`` takes for a model (or the ensemble's answer) whose
    config has ``config_dims`` and ``batching``, when it was made where requests batch
    (``batch_size`` its batch, > 0) or not (0); None: as it is. Triton's
    ``ReshapeTensorDims``: a batching model gets a batch of 1 in front of a tensor that
    fits its dims; a model that does not batch gets a batch of 1 without its batch
    dimension, where the tensor does not fit its dims as it is."""
    if not config_dims or batching == (batch_size != 0):
        return None
    if batching:
        return (1, *shape) if _fits(config_dims, shape) else None
    if batch_size == 1 and not _fits(config_dims, shape):
        return shape[1:]
    return None


class _Scope:
    """One generation of a run's tensors: what exists, which steps fired on it,
    and whether it was answered.

    A tensor that is there without data is None, as Triton's placeholders: an optional
    ensemble input the request left out, or an output a step's response did not hold.
    A step reading it fires without that input (its model must take it as optional),
    and an ensemble output without data is left out of the answer."""

    __slots__ = ("answered", "batch", "fired", "tensors")

    def __init__(
        self, tensors: dict[str, Tensor | None], fired: set[int], answered: bool, batch: dict[str, int]
    ) -> None:
        self.tensors = tensors
        self.fired = fired
        self.answered = answered
        #: The batch size of the request that made each tensor (0: one that does not batch),
        #: where it is not the ensemble request's (``_Run.batch``).
        self.batch = batch

    def fork(self) -> _Scope:
        return _Scope(dict(self.tensors), set(self.fired), self.answered, dict(self.batch))


class _Call:
    """One step request in flight: its scope, whether it has answered with data, and the
    batch size its outputs are made with (0: its member does not batch)."""

    __slots__ = ("batch", "request", "scope", "step", "with_data")

    def __init__(self, scope: _Scope, step: Step, request: InferenceRequest) -> None:
        self.scope = scope
        self.step = step
        self.request = request
        self.with_data = False
        self.batch = 0


class _Run:
    """One request going through the ensemble. Its lock guards the state below.
    Answers are queued under it and delivered outside it, by one thread at a time
    and in order; member requests are submitted and cancelled outside it too (an
    answer or a cancellation may reach another run, a nested ensemble's, on this
    thread)."""

    def __init__(self, scheduler: EnsembleScheduler, job: Job) -> None:
        self.scheduler = scheduler
        self.model = scheduler.model
        self.job = job
        request = job.request
        self.wanted = tuple(o.name for o in request.requested_outputs) or scheduler.outputs
        #: The ensemble outputs the client wants on a GPU (a CUDA shared-memory region), by name.
        self.on_device: dict[str, int] | None = {
            o.name: o.device_id for o in request.requested_outputs if o.device_id is not None
        } or None
        self.steps = scheduler.pruned(frozenset(self.wanted))
        self.lock = threading.Lock()
        self.pending = 0
        self.finished = False
        self.in_flight: set[_Call] = set()
        tensors: dict[str, Tensor | None] = dict(request.inputs)
        for name in scheduler.optional_inputs:
            tensors.setdefault(name, None)
        #: The ensemble request's batch size (0 when the ensemble does not batch).
        self.batch = _batch_size(tensors.values()) if scheduler.batching else 0
        self.root = _Scope(tensors, set(), False, {})
        self.start_ns = time.monotonic_ns()
        self.infer_start_ns = 0
        self.infer_end_ns = 0
        self.outbox: list[tuple[InferenceResponse | None, int]] = []
        self.delivering = False

    def begin(self) -> None:
        self.model.stats.dequeued(1)
        request = self.job.request
        with self.lock:
            calls = self._progress(self.root)
            self.infer_start_ns = time.monotonic_ns()
            if not calls and self.pending == 0 and not self.finished:
                self._complete()
        self._flush()
        request.on_cancel(self.cancel)
        self._submit(calls)

    # -- events ----------------------------------------------------------------------

    def on_response(self, call: _Call, response: InferenceResponse | None, flags: int) -> None:
        """A response of one step (any thread). Never raises."""
        try:
            self._on_response(call, response, flags)
        except Exception as exc:
            self.fail(internal_error(f"a step of ensemble '{self.model.name}' failed", exc))

    def _on_response(self, call: _Call, response: InferenceResponse | None, flags: int) -> None:
        final = bool(flags & RESPONSE_COMPLETE_FINAL)
        gates = self.scheduler.gates
        if final and gates is not None:
            # The step's request ended: the next waiting at its gate goes (maybe another run's).
            _send_released(gates[call.step.index])
        calls: list[_Call] = []
        cancel: list[_Call] = []
        with self.lock:
            if final:
                self.in_flight.discard(call)
                self.pending -= 1
            if self.finished:
                return
            if response is not None and response.error is not None:
                cancel = self._fail(_step_error(self.model.name, response.error))
            else:
                if response is not None:  # its outputs, and those it lacks without data
                    calls = self._take_outputs(call, response, final)
                if self.pending == 0 and not calls and not self.finished:
                    self._complete()
        self._flush()
        self._cancel(cancel)
        self._submit(calls)

    def cancel(self) -> None:
        """The client cancelled the request: answer CANCELLED, cancel the steps in flight."""
        with self.lock:
            if self.finished:
                return
            calls = self._fail(TritonError("Request was cancelled", ErrorCode.CANCELLED))
        self._flush()
        self._cancel(calls)

    def fail(self, error: TritonError) -> None:
        """Fail the request with ``error`` unless it is answered already."""
        with self.lock:
            if self.finished:
                return
            calls = self._fail(error)
        self._flush()
        self._cancel(calls)

    # -- under the lock ----------------------------------------------------------------

    def _take_outputs(self, call: _Call, response: InferenceResponse, final: bool) -> list[_Call]:
        produced = response.outputs
        if final and not call.with_data:
            scope = call.scope  # the one response of a step: its tensors join the scope
        else:
            scope = call.scope.fork()  # one of several: a generation of its own
        call.with_data = True
        batch = call.batch
        for member_name, tensor_name in call.step.outputs:
            tensor = produced.get(member_name)
            # One the response did not hold is there without data (Triton's placeholder).
            scope.tensors[tensor_name] = tensor.renamed(tensor_name) if tensor is not None else None
            scope.batch[tensor_name] = batch
        return self._progress(scope)

    def _progress(self, scope: _Scope) -> list[_Call]:
        """Fire the steps ``scope`` can now run; answer when it has every output."""
        tensors = scope.tensors
        calls: list[_Call] = []
        request = self.job.request
        for step in self.steps:
            if step.index in scope.fired or not all(t in tensors for _, t in step.inputs):
                continue
            scope.fired.add(step.index)
            member_request = _step_request(
                request, step, tensors, self.wanted, self.on_device, scope.batch, self.batch
            )
            call = _Call(scope, step, member_request)
            if step.batching:  # what its outputs are batched as (Triton's request batch size)
                call.batch = _batch_size(member_request.inputs.values())
            calls.append(call)
            self.in_flight.add(call)
        self.pending += len(calls)
        if not scope.answered and all(name in tensors for name in self.wanted):
            scope.answered = True
            answer: dict[str, Tensor] = {}
            dims, batching = self.scheduler.output_dims, self.scheduler.batching
            for name in self.wanted:
                tensor = tensors[name]
                if tensor is None:  # without data: left out of the answer (Triton's verbose line)
                    log.debug("Composing models did not output tensor %s", name)
                    continue
                made = scope.batch.get(name, self.batch)
                shape = batch_reshape(dims.get(name, ()), batching, made, tensor.shape)
                answer[name] = tensor if shape is None else reshaped(tensor, shape, name)
            response = InferenceResponse(answer, parameters=_sequence_parameters(request))
            response = self.model.finish_ensemble_response(request, response)
            if self.model.decoupled:
                self._deliver(response, 0)
            else:
                self.model.cache_response(self.job, response)
                self._finish(response, True)
        return calls

    def _complete(self) -> None:
        """No step is in flight and none can fire: the request is done."""
        if self.model.decoupled:
            self._finish(None, True)
            return
        missing = [name for name in self.wanted if name not in self.root.tensors]
        self._finish(
            self._error_response(
                TritonError.internal(
                    f"in ensemble '{self.model.name}', no data was written to output(s) "
                    f"{', '.join(repr(n) for n in missing)}"
                )
            ),
            False,
        )

    def _fail(self, error: TritonError) -> list[_Call]:
        calls = list(self.in_flight)
        self._finish(self._error_response(error), False)
        return calls

    def _finish(self, response: InferenceResponse | None, ok: bool) -> None:
        self.finished = True
        self.infer_end_ns = time.monotonic_ns()
        outbox = self.outbox
        if response is None and outbox and outbox[-1][0] is not None and not outbox[-1][1]:
            # As Triton's ensemble: the last answer, not sent yet, carries the FINAL flag (a
            # stream client without empty final responses sees the request end).
            outbox[-1] = (outbox[-1][0], RESPONSE_COMPLETE_FINAL)
        else:
            self._deliver(response, RESPONSE_COMPLETE_FINAL)
        end = time.monotonic_ns()
        request = self.job.request
        if ok:
            times = ExecutionTimes(
                self.start_ns, self.infer_start_ns or self.start_ns, self.infer_end_ns, end
            )
            self.model.stats.record_execution(times, [self.job.arrival_ns], [request.batch_size], [True])
        else:
            # As Triton (its metrics guide): no execution, reason OTHER, counted twice, "1
            # from the internally failed request ... as well as 1 from the failed top-level
            # request".
            self.model.stats.record_rejection(self.job.arrival_ns, "OTHER", count=2)
        self.scheduler.ended()

    def _deliver(self, response: InferenceResponse | None, flags: int) -> None:
        self.outbox.append((response, flags))

    def _error_response(self, error: TritonError) -> InferenceResponse:
        response = InferenceResponse.from_error(error)
        request = self.job.request
        response.model_name, response.model_version, response.id = (
            self.model.name,
            self.model.version,
            request.id,
        )
        return response

    # -- outside the lock ----------------------------------------------------------------

    def _flush(self) -> None:
        """Deliver the queued answers, in order; a thread that finds another one
        delivering leaves its answers to it."""
        while True:
            with self.lock:
                if self.delivering or not self.outbox:
                    return
                self.delivering = True
                answers, self.outbox = self.outbox, []
            try:
                for response, flags in answers:
                    self.job.answer(response, flags)  # never raises
            finally:
                with self.lock:
                    self.delivering = False

    def _submit(self, calls: list[_Call]) -> None:
        gates = self.scheduler.gates
        for call in calls:
            if gates is None or gates[call.step.index].admit(self, call):
                self._send(call)

    def _send(self, call: _Call) -> None:
        """Submit ``call`` to its member; its answers come to ``on_response``."""
        try:
            self.scheduler.submit(call.request, functools.partial(self.on_response, call))
        except TritonError as exc:  # refused before queueing: that step's error
            self.on_response(call, InferenceResponse.from_error(exc), RESPONSE_COMPLETE_FINAL)
        except Exception as exc:
            error = internal_error(f"submitting a step of ensemble '{self.model.name}' failed", exc)
            self.on_response(call, InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL)

    @staticmethod
    def _cancel(calls: list[_Call]) -> None:
        for call in calls:
            call.request.cancel()


def _batch_size(tensors: Iterable[Tensor | None]) -> int:
    """A batching request's batch size: the first dimension of its first input with data."""
    for tensor in tensors:
        if tensor is not None:
            shape = tensor.shape
            return int(shape[0]) if shape else 0
    return 0


def _sequence_parameters(request: InferenceRequest) -> dict[str, ParameterValue]:
    """The parameters of an ensemble's response, as Triton 2.51 gives them: the
    request's sequence settings (``0``, ``false``, ``false`` outside a sequence)."""
    flags = request.flags
    return {
        "sequence_id": request.correlation_id,
        "sequence_start": bool(flags & SEQUENCE_START),
        "sequence_end": bool(flags & SEQUENCE_END),
    }


def _step_request(
    parent: InferenceRequest,
    step: Step,
    tensors: dict[str, Tensor | None],
    wanted: Sequence[str] = (),
    on_device: dict[str, int] | None = None,
    batches: Mapping[str, int] | None = None,
    batch: int = 0,
) -> InferenceRequest:
    """The member request of ``step``: its inputs renamed (same arrays; a tensor without
    data left out; a batch dimension added or taken off where the member batches and
    the tensor's maker did not, or the other way round: ``batch_reshape``, with each
    tensor's batch size in ``batches``, else ``batch``), its outputs asked for where
    their readers want them (``step_outputs``), and the parent's id, parameters,
    priority, timeout and sequence settings."""
    inputs: dict[str, Tensor] = {}
    dims = step.input_dims
    for index, (member, name) in enumerate(step.inputs):
        tensor = tensors[name]
        if tensor is None:
            continue
        made = batches.get(name, batch) if batches else batch
        shape = batch_reshape(dims[index], step.batching, made, tensor.shape) if dims else None
        inputs[member] = tensor.renamed(member) if shape is None else reshaped(tensor, shape, member)
    return InferenceRequest(
        model_name=step.model_name,
        model_version=step.model_version,
        inputs=inputs,
        requested_outputs=step_outputs(step, wanted, on_device),
        id=parent.id,
        parameters=dict(parent.parameters),
        correlation_id=parent.correlation_id,
        flags=parent.flags,
        priority=parent.priority,
        timeout_us=parent.timeout_us,
        trace_context=parent.trace_context,  # the step's span is a child of the ensemble's
    )


def step_outputs(
    step: Step, wanted: Sequence[str], on_device: dict[str, int] | None
) -> list[RequestedOutput]:
    """The outputs of ``step``'s member request, each with the GPU on which every one
    of its readers takes it (``RequestedOutput.device_id``): the later steps that read
    it (``Step.readers``) and, when it is one of the ensemble's outputs the client
    wants (``wanted``), the client (its CUDA shared-memory region's GPU in
    ``on_device``, or host memory). None wherever one reader takes host memory or
    two readers want different GPUs, and for a tensor nobody reads."""
    if not step.device_readers and on_device is None:  # the common case: nobody reads on a device
        return [RequestedOutput(member) for member, _ in step.outputs]
    outputs: list[RequestedOutput] = []
    for index, (member, tensor) in enumerate(step.outputs):
        devices: tuple[int | None, ...] = step.readers[index] if step.readers else ()
        if tensor in wanted:
            devices = (*devices, on_device.get(tensor) if on_device else None)
        first = devices[0] if devices else None
        device = first if first is not None and all(d == first for d in devices) else None
        outputs.append(RequestedOutput(member, device_id=device))
    return outputs


def _step_error(ensemble: str, error: TritonError) -> TritonError:
    """A step's error as the ensemble's (Triton's wording). A member that is not
    found (unloaded since) makes the ensemble UNAVAILABLE, not a 404 of the ensemble."""
    code = ErrorCode.UNAVAILABLE if error.code is ErrorCode.NOT_FOUND else error.code
    return TritonError(f"in ensemble '{ensemble}', {error.message}", code)
