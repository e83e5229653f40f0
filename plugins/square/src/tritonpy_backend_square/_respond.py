"""One request's responses, as Triton's square backend sends them.

``read`` is square.cc's ``ProcessRequest``: it reads the one element of ``IN``,
the number of responses to send (as square.cc's ``size_t``: a negative ``IN``
reads as 2^64 + ``IN``, a stream that in practice ends only when the request is
cancelled), and refuses a request of more than one batch row. A request it
cannot read gets one error response with the FINAL flag, in square.cc's words.

``stream`` is square.cc's ``RequestThread``, run on a thread of its own. For
each of the ``n`` responses it first asks whether the request was cancelled:

- cancelled: it sleeps ``CUSTOM_CANCEL_DELAY_NS``, sends nothing and stops;
- else it sleeps ``CUSTOM_INFER_DELAY_NS``, and then, by the response's place
  (``Parameters.result``): a success sends ``OUT`` = ``IN`` (shape ``[1]``, or
  ``[1,1]`` for a batch-1 request of a batching model) after
  ``CUSTOM_OUTPUT_DELAY_NS``; a failure sends the UNKNOWN error ``simulated
  failure`` (after the same delay), and the stream goes on; an empty one sends
  nothing.

Then the FINAL flag alone. ``InFlight`` counts those threads, so that an
instance is finalized only once every one of them has ended (square.cc's
instance destructor waits for them).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DataType,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ResponseSender,
    Tensor,
    TritonError,
    serialize_bytes_tensor,
)

from ._config import Parameters, Result

#: ``size_t``'s range: square.cc holds the response count in one.
_SIZE_T = 2**64


@dataclass(frozen=True, slots=True)
class Square:
    """What the responses of one request need: how many (``count``), the rank of ``IN``
    (``OUT`` is ``[1]`` * rank), and where to send them."""

    count: int
    rank: int
    sender: ResponseSender

    @property
    def value(self) -> int:
        """``OUT``'s element: the count as square.cc writes it into an ``int32``, which
        is ``IN`` again."""
        low = self.count % 2**32
        return low - 2**32 if low >= 2**31 else low


class InFlight:
    """The response threads an instance has running, and a wait for none."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def started(self) -> None:
        with self._idle:
            self._count += 1

    def ended(self) -> None:
        with self._idle:
            self._count -= 1
            if self._count == 0:
                self._idle.notify_all()

    def wait_idle(self) -> None:
        """Return once no response thread is running (no time limit, as square.cc)."""
        with self._idle:
            self._idle.wait_for(lambda: self._count == 0)


def _raw_bytes(tensor: Tensor) -> bytes:
    """The tensor's bytes as Triton hands them to a backend (BYTES serialized)."""
    if tensor.datatype is DataType.BYTES:
        return serialize_bytes_tensor(tensor.data)
    return np.ascontiguousarray(tensor.data).tobytes()


def _sender(request: InferenceRequest) -> ResponseSender:
    sender = request.response_sender
    if sender is None:  # the core gives every request it executes one
        raise TritonError.internal("the request has no response sender")
    return sender


def read(request: InferenceRequest) -> Square | TritonError:
    """The plan of ``request``'s responses, or the error it is answered with."""
    tensor = request.inputs.get("IN")
    if tensor is None:  # only where the config marks IN optional
        prefix = f"[request id: {request.id or '<id_unknown>'}] "
        return TritonError.invalid_arg(f"{prefix}unknown request input name IN")
    shape = tuple(tensor.shape)
    data = _raw_bytes(tensor)
    # square.cc reads the first element of IN whatever its shape; one without any element
    # (undefined behaviour there) is answered as a bad shape here.
    if (len(shape) == 2 and shape[0] != 1) or len(data) < 4:
        return TritonError.invalid_arg("unexpected shape for IN input")
    count = int.from_bytes(data[:4], "little", signed=True) % _SIZE_T
    try:
        sender = _sender(request)
    except TritonError as exc:
        return exc
    return Square(count, len(shape), sender)


def answer_error(request: InferenceRequest, error: TritonError, logger: logging.Logger) -> None:
    """square.cc's ``RESPOND_AND_RETURN_IF_ERROR``: one error response, FINAL."""
    try:
        _sender(request).send(InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL)
    except TritonError as exc:
        logger.error("failed to send error response: %s", exc.message)


def stream(plan: Square, parameters: Parameters, inflight: InFlight, logger: logging.Logger) -> None:
    """Send the plan's responses, then the FINAL flag; always tell ``inflight`` it ended."""
    try:
        _stream(plan, parameters, logger)
    finally:
        inflight.ended()


def _sleep(delay_ns: int, logger: logging.Logger) -> None:
    if delay_ns > 0:
        logger.info("add delay %d ns", delay_ns)
        time.sleep(delay_ns / 1e9)


def _stream(plan: Square, parameters: Parameters, logger: logging.Logger) -> None:
    sender, count = plan.sender, plan.count
    shape = (1,) * plan.rank
    for index in range(count):
        cancelled = sender.is_cancelled()
        _sleep(parameters.cancel_delay_ns if cancelled else parameters.infer_delay_ns, logger)
        result = parameters.result(index, count)
        response: InferenceResponse | None = None
        if not cancelled and result is not Result.EMPTY:
            out = np.full(shape, plan.value, np.int32)
            response = InferenceResponse({"OUT": Tensor("OUT", out, DataType.INT32)})
            _sleep(parameters.output_delay_ns, logger)
        if response is not None:
            if result is Result.FAIL:
                response.error = TritonError("simulated failure", ErrorCode.UNKNOWN)
            try:
                sender.send(response)
            except TritonError as exc:
                logger.error("failed sending response: %s", exc.message)
        logger.info("sent response %d of %d", index + 1, count)
        if cancelled:
            logger.info("cancelled at response %d of %d", index + 1, count)
            break
    if count == 0:
        logger.info("IN size is zero, no responses send ")  # square.cc's words
    # The FINAL flag alone, after the last response, as square.cc sends it.
    try:
        sender.send(flags=RESPONSE_COMPLETE_FINAL)
    except TritonError as exc:
        logger.error("failed sending final response: %s", exc.message)
