"""Answering a batch through response senders (decoupled models, deferred answers).

When a backend's ``execute`` returns ``None`` it answers each request through
``request.response_sender``, later and from any thread. ``SenderBatch`` turns
those sends into job answers: it shapes each response for its client, holds a
non-decoupled model to exactly one response, and records the execution in the
statistics once every request of the batch sent FINAL (compute time runs until
the last one did).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    ResponseSender,
    TritonError,
)

from ..scheduler import Job, internal_error
from .responses import finish_response
from .statistics import ExecutionTimes

if TYPE_CHECKING:
    from .model import LoadedVersion

_STAMPS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")


def _refuse(response: InferenceResponse | None, flags: int) -> None:
    raise AssertionError("a closed sender delivers nothing")  # ResponseSender checks first


def _closed_sender(request: InferenceRequest, decoupled: bool) -> ResponseSender:
    sender = ResponseSender(_refuse, request, decoupled)
    sender.close()
    return sender


#: The sender source of a request its batch is done with, by ``decoupled``: a closed
#: sender for a late first read (sending raises, as on any closed sender).
_CLOSED = (
    functools.partial(_closed_sender, decoupled=False),
    functools.partial(_closed_sender, decoupled=True),
)

#: Held while a sender is made or a batch stops making them (rare, and short): one
#: lock for all batches, so that a batch whose backend reads no sender makes none.
_MAKING = threading.Lock()


class SenderBatch:
    """The jobs of one ``execute`` call whose backend answers through senders.

    A request's ``response_sender`` is made when the backend first reads it
    (``_sender_at``), and what answering through senders needs (``_live``) when
    the first one is: most backends return their responses and never read one,
    and a sender nobody made cannot have sent anything. Once the batch is done
    with a request (``close``, ``handed_back``, its FINAL) the request's sender
    source becomes ``_CLOSED``, which holds nothing of the batch: a late first
    read still gets a closed sender, as when every request got one up front, and
    the request no longer reaches its batch (no reference cycle keeps its tensors
    alive).
    """

    __slots__ = (
        "_model",
        "_jobs",
        "start_ns",
        "infer_start",
        "_decoupled",
        "_shut",
        "_closed_source",
        "_senders",
        "_answered",
        "_where",
        "_lock",
        "_open",
        "_returned",
        "_last_final",
        "_ok",
        "_held",
    )

    # Made by ``_live``, with the first sender:
    _lock: threading.Lock
    _open: int
    _returned: bool
    _last_final: int
    _ok: list[bool]
    _held: list[InferenceResponse | None]

    def __init__(self, model: LoadedVersion, jobs: Sequence[Job], start_ns: int, decoupled: bool) -> None:
        self._model = model
        self._jobs = jobs
        self.start_ns = start_ns
        self.infer_start = start_ns
        self._decoupled = decoupled
        self._shut = False  # close(): the senders are not used; any made now is closed
        self._closed_source = _CLOSED[decoupled]
        #: Each request's sender once made (a closed one for a request handed back
        #: unmade); None until the first one is.
        self._senders: list[ResponseSender | None] | None = None
        self._where: dict[int, int] | None = None  # id(request) -> index, when more than one
        source = self._sender_for
        if len(jobs) == 1:  # the common case, without the loop
            request = jobs[0].request
            request._sender = None  # a request run again gets a new sender
            request._sender_source = source
            return
        for job in jobs:
            request = job.request
            request._sender = None
            request._sender_source = source

    def _live(self) -> list[ResponseSender | None]:
        """What answering through senders needs, made once (hold ``_MAKING``)."""
        senders = self._senders
        if senders is None:
            count = len(self._jobs)
            self._lock = threading.Lock()
            self._open = count
            self._returned = False
            self._last_final = self.start_ns
            self._ok = [True] * count
            self._held = [None] * count
            self._answered = [False] * count  # a first response went (decoupled)
            senders = self._senders = [None] * count
        return senders

    def _sender_for(self, request: InferenceRequest) -> ResponseSender:
        """``request.response_sender``'s first read."""
        if len(self._jobs) == 1:
            return self._sender_at(0)
        where = self._where
        if where is None:
            where = self._where = {id(job.request): index for index, job in enumerate(self._jobs)}
        return self._sender_at(where[id(request)])

    def _sender_at(self, index: int) -> ResponseSender:
        """The sender of the request at ``index``, made now if it was not."""
        with _MAKING:
            senders = self._live()
            sender = senders[index]
            if sender is None:
                request = self._jobs[index].request
                sender = ResponseSender(functools.partial(self._deliver, index), request, self._decoupled)
                senders[index] = sender
                if self._shut:
                    # Read while or after ``close`` ran: closed, as every sender then is.
                    # Not kept on the request (``close`` gives it ``_CLOSED`` instead):
                    # one run again may meanwhile belong to another batch.
                    sender.close()
                else:
                    request._sender = sender
            return sender

    def _deliver(self, index: int, response: InferenceResponse | None, flags: int) -> None:
        job = self._jobs[index]
        model = self._model
        final = bool(flags & RESPONSE_COMPLETE_FINAL)
        if response is not None:
            try:
                response = finish_response(model.spec, model.labels, job.request, response)
            except Exception as exc:  # this request's response is bad, not the batch's
                response = model.error_response(job, internal_error("invalid response", exc))
            if response.error is not None:
                self._ok[index] = False
            if self._decoupled and not self._answered[index]:
                self._answered[index] = True
                if model.stats.observers:  # the first-response histogram
                    model.stats.first_response(time.monotonic_ns() - job.arrival_ns)
            if not self._decoupled:
                if self._held[index] is not None:
                    # Triton refuses a second response of a non-decoupled model; the first stands.
                    model.log_warning(
                        f"model '{model.name}' is not decoupled but sent more than one response "
                        f"for request '{job.request.id}'; extra responses are dropped"
                    )
                else:
                    self._held[index] = response
                response = None
        if not self._decoupled and final:
            response = self._held[index]
            self._held[index] = None
            if response is None:
                self._ok[index] = False
                response = model.error_response(
                    job,
                    TritonError.internal(
                        f"model '{model.name}' sent the FINAL flag without a response; "
                        "a model that is not decoupled must send exactly one response"
                    ),
                )
        if final:
            job.request._sender_source = self._closed_source  # done with: drop the batch
            now = time.monotonic_ns()
            if job.trace is not None:
                for name, ns in zip(_STAMPS, (self.start_ns, self.infer_start, now, now)):
                    job.trace.stamp(name, ns)
        if final:
            self._finished_one(now)  # statistics first, as on the direct path
        if response is not None or final:
            job.answer(response, RESPONSE_COMPLETE_FINAL if final else 0)

    def _finished_one(self, now: int) -> None:
        with self._lock:
            self._open -= 1
            self._last_final = max(self._last_final, now)
            complete = self._open == 0 and self._returned
        if complete:
            self._record()

    def handed_back(self, indices: Sequence[int]) -> None:
        """``execute`` returned with the requests at ``indices`` handed back to run again
        (``request.reschedule()``): their senders close (what they sent stands) and they
        count as done in this execution, which they ran in."""
        now = time.monotonic_ns()
        for index in indices:
            with _MAKING:
                senders = self._live()
                sender = senders[index]
                if sender is None:  # never read, so nothing sent: open until now
                    sender = senders[index] = _closed_sender(self._jobs[index].request, self._decoupled)
                    was_open = True
                else:
                    was_open = not sender.closed
            self._jobs[index].request._sender_source = self._closed_source
            if not was_open:
                continue  # FINAL already sent: already counted
            sender.close()
            self._held[index] = None
            self._finished_one(now)

    def execute_returned(self) -> None:
        """``execute`` returned None: the batch completes when every request sent FINAL."""
        with _MAKING:
            self._live()
        with self._lock:
            self._returned = True
            complete = self._open == 0
        if complete:
            self._record()

    def any_sent(self) -> bool:
        """Whether some request already sent a response or FINAL through its sender (one
        whose sender was never made did not)."""
        senders = self._senders
        if senders is None:
            return False
        return (
            any(sender is not None and sender.closed for sender in senders)
            or any(held is not None for held in self._held)
            or any(self._answered)
        )

    def close(self) -> None:
        """``execute`` returned the responses itself: the senders are not used."""
        with _MAKING:  # no sender is being made meanwhile
            self._shut = True
            senders = self._senders
        closed = self._closed_source
        jobs = self._jobs
        if len(jobs) == 1:  # the common case, without the loop
            jobs[0].request._sender_source = closed
        else:
            for job in jobs:
                # Made or not, the request is done with this batch: a sender never made
                # is a closed one if it is ever read.
                job.request._sender_source = closed
        if senders is not None:
            for sender in senders:  # made before ``_shut``, by a backend that then returned
                if sender is not None:
                    sender.close()

    def fail_open(self, error: TritonError) -> None:
        """``execute`` raised: end every request that has not sent FINAL with ``error``;
        a request of a model that is not decoupled that sent its one response ends with
        that response (the first response wins, as Triton's front ends keep the first)."""
        for index in range(len(self._jobs)):
            sender = self._sender_at(index)
            if not sender.closed:
                sent = not self._decoupled and self._held[index] is not None
                try:
                    sender.send(
                        None if sent else InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL
                    )
                except TritonError:  # closed by the backend meanwhile
                    pass

    def _record(self) -> None:
        end = self._last_final
        times = ExecutionTimes(self.start_ns, self.infer_start, end, end)
        jobs, ok, padding = self._jobs, self._ok, 0
        if self._model.sequence and any(j.null for j in jobs):  # null requests: batch size only
            real = [i for i, j in enumerate(jobs) if not j.null]
            jobs, ok, padding = [jobs[i] for i in real], [ok[i] for i in real], len(jobs) - len(real)
        self._model.stats.record_execution(
            times,
            [j.arrival_ns for j in jobs],
            [j.request.batch_size for j in jobs],
            ok,
            padding=padding,
        )
