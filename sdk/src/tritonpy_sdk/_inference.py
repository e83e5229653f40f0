"""Inference requests and responses as backends see them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._errors import TritonError
from ._tensor import Tensor

if TYPE_CHECKING:
    from ._sender import ResponseSender

#: Parameter values allowed by the protocol (KServe v2 parameters / gRPC InferParameter).
ParameterValue = bool | int | float | str


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asked for, with its per-output parameters.

    ``device_id`` is the GPU on which the output's consumer takes it, set by the
    core: the GPU of the client's CUDA shared-memory region the output is
    written to, or, inside an ensemble, the GPU on which every step that reads
    it takes device inputs. None (the default): host memory is as good as any.
    A backend may then return the output as a device tensor on that GPU
    (``Tensor.on_device``; ``scatter_device_outputs``), which the core copies
    device to device instead of through the host; any other tensor is still
    correct. See ``InferenceRequest.output_device``.
    """

    name: str
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    device_id: int | None = None


@dataclass(slots=True, eq=False)
class InferenceRequest:
    """One inference request, already validated against the model config.

    ``inputs`` maps input name to tensor; a tensor's shape includes the batch
    dimension when the model batches (``max_batch_size > 0``). BYTES inputs
    are object arrays of ``bytes``. ``requested_outputs`` is empty when the
    client wants every output. ``parameters`` are the request's parameters as
    the client sent them, minus those the core consumes itself.
    """

    model_name: str
    model_version: int
    inputs: dict[str, Tensor]
    requested_outputs: list[RequestedOutput] = field(default_factory=list)
    id: str = ""
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0

    #: The first dim of the inputs when the model batches, else 1 (set by the core).
    batch_size: int = 1
    #: The trace this request belongs to, when it is traced: a W3C ``traceparent``
    #: value (from a client's header, or set by the core on a traced request). A
    #: backend that makes requests of its own (BLS) copies it onto them, so that
    #: they join the calling request's trace; "" when there is none.
    trace_context: str = field(default="", repr=False)
    #: ``response_sender`` once made (or set).
    _sender: ResponseSender | None = field(default=None, repr=False)
    #: Makes ``response_sender`` on first access (set by the core before ``execute``).
    _sender_source: Callable[[InferenceRequest], ResponseSender] | None = field(default=None, repr=False)
    _cancelled: bool = False
    _on_cancel: list[Callable[[], None]] | None = None
    _rescheduled: bool = False
    #: Records a trace activity ``(name, ns)`` when the request is traced (set by the core).
    _trace_activity: Callable[[str, int], None] | None = field(default=None, repr=False)

    @property
    def response_sender(self) -> ResponseSender | None:
        """Where this request's responses may be sent; the core provides one for every
        request it passes to ``execute`` (None outside an execution). It is made on
        first access, so a backend that returns its responses never pays for it."""
        sender = self._sender
        if sender is None and self._sender_source is not None:
            return self._sender_source(self)  # it keeps what it makes where it belongs
        return sender

    @response_sender.setter
    def response_sender(self, sender: ResponseSender | None) -> None:
        self._sender_source = None
        self._sender = sender

    def is_cancelled(self) -> bool:
        """Whether the client gave up on this request (stream closed, disconnect)."""
        return self._cancelled

    def cancel(self) -> None:
        """Mark the request cancelled and run the callbacks ``on_cancel`` registered."""
        if self._cancelled:
            return
        self._cancelled = True
        for callback in self._on_cancel or ():
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the cancelling thread) when the request is cancelled."""
        if self._cancelled:
            callback()
            return
        if self._on_cancel is None:
            self._on_cancel = []
        self._on_cancel.append(callback)

    def reschedule(self) -> None:
        """Hand this request back to be executed again (Triton's
        ``TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)``).

        Call it in ``execute``, before ``execute`` returns; give the request no
        response in that execution (``None`` in its place in the returned list, or
        no FINAL through its sender; a decoupled model may already have sent
        responses, which stand). The core puts the request back into its model's
        scheduler with the same inputs, parameters, id and correlation id, and
        executes it again later; its next execution gets a new ``response_sender``.
        Only schedulers that take requests back allow it (the sequence batcher
        with ``iterative_sequence: true``); elsewhere the core answers the request
        with an INVALID_ARG error, in Triton's words.
        """
        self._rescheduled = True

    @property
    def rescheduled(self) -> bool:
        """Whether the backend called ``reschedule()`` in the current execution."""
        return self._rescheduled

    @property
    def traced(self) -> bool:
        """Whether this request is traced (``report_activity`` then records something)."""
        return self._trace_activity is not None

    def report_activity(self, name: str, timestamp_ns: int | None = None) -> None:
        """Record a custom activity of the backend in the request's trace (Triton's
        ``TRITONSERVER_InferenceTraceReportActivity``), stamped ``timestamp_ns`` (of
        ``time.monotonic_ns()``, the clock of the server's own stamps) or now.

        A name ending ``_START`` and the same name ending ``_END`` open and close a span
        of that name in OpenTelemetry mode (child of the innermost one still open, else
        of the model's span); any other name is an event of that span. In the trace file
        each is a timestamp of its own. Does nothing when the request is not traced.
        """
        record = self._trace_activity
        if record is not None:
            record(name, time.monotonic_ns() if timestamp_ns is None else timestamp_ns)

    # ``tritonserver``'s names of two fields, for code written against its in-process API.

    @property
    def request_id(self) -> str:
        """``id``, by ``tritonserver``'s name."""
        return self.id

    @request_id.setter
    def request_id(self, value: str | None) -> None:
        self.id = value or ""

    @property
    def timeout(self) -> int:
        """``timeout_us``, by ``tritonserver``'s name (microseconds)."""
        return self.timeout_us

    @timeout.setter
    def timeout(self, value: int) -> None:
        self.timeout_us = value

    def output_device(self, name: str) -> int | None:
        """The GPU on which the consumer of output ``name`` wants it (Triton's
        preferred output memory type GPU), or None for host memory: see
        ``RequestedOutput.device_id``. None too when the request names no outputs."""
        for out in self.requested_outputs:
            if out.name == name:
                return out.device_id
        return None

    def output_requested(self, name: str) -> bool:
        """Whether the client wants output ``name`` (all outputs when it named none)."""
        if not self.requested_outputs:
            return True
        return any(o.name == name for o in self.requested_outputs)


@dataclass(slots=True, eq=False)
class InferenceResponse:
    """The response to one request: output tensors, or an error.

    A backend may return all of its outputs; the core drops those the client
    did not request.
    """

    outputs: dict[str, Tensor] = field(default_factory=dict)
    error: TritonError | None = None
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    model_name: str = ""
    model_version: int = 0
    id: str = ""

    @classmethod
    def from_error(cls, error: TritonError) -> InferenceResponse:
        return cls(error=error)
