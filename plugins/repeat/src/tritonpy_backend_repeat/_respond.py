"""One request's responses, as Triton's repeat backend sends them.

``read`` is repeat.cc's ``ProcessRequest``: it reads ``WAIT`` (how long the
execution holds the request before releasing it), checks that ``IN`` and
``DELAY`` have one shape, and copies both, since the responses outlive the
execution. A request it cannot read gets one error response with the FINAL
flag, in repeat.cc's words.

``stream`` is repeat.cc's ``ResponseThread``, run on a thread of its own: for
each element ``i`` of ``IN`` it sleeps ``DELAY[i]`` milliseconds, then sends a
response with ``OUT`` = ``IN[i]`` and ``IDX`` = ``i`` (each of shape ``[1]``);
then the FINAL flag alone. ``InFlight`` counts those threads, so that an
instance is finalized only once every one of them has ended (repeat.cc's
instance destructor waits for them).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DataType,
    InferenceRequest,
    InferenceResponse,
    ResponseSender,
    Tensor,
    TritonError,
    serialize_bytes_tensor,
)

from ._config import shape_to_string

#: The byte size of WAIT that repeat.cc reads (one uint32).
WAIT_BYTES = 4


@dataclass(frozen=True, slots=True)
class Repeat:
    """What the responses of one request need, copied out of it: ``IN`` and ``DELAY``
    as repeat.cc holds them (``int32`` both: a DELAY above 2^31 - 1 reads negative and
    sleeps no time, as ``sleep_for`` of a negative duration), and where to send."""

    values: np.ndarray[Any, np.dtype[np.int32]]
    delays_ms: np.ndarray[Any, np.dtype[np.int32]]
    sender: ResponseSender


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
        """Return once no response thread is running (no time limit, as repeat.cc)."""
        with self._idle:
            self._idle.wait_for(lambda: self._count == 0)


def _request_id(request: InferenceRequest) -> str:
    """Triton's ``[request id: <id>] `` prefix (``<id_unknown>`` for a request without one)."""
    return f"[request id: {request.id or '<id_unknown>'}] "


def _input(request: InferenceRequest, name: str) -> Tensor:
    """``TRITONBACKEND_RequestInput``: the input, or INVALID_ARG in Triton core's words."""
    tensor = request.inputs.get(name)
    if tensor is None:
        raise TritonError.invalid_arg(f"{_request_id(request)}unknown request input name {name}")
    return tensor


def raw_bytes(tensor: Tensor) -> bytes:
    """The tensor's bytes as Triton hands them to a backend (BYTES serialized)."""
    if tensor.datatype is DataType.BYTES:
        return serialize_bytes_tensor(tensor.data)
    return np.ascontiguousarray(tensor.data).tobytes()


def read_wait(request: InferenceRequest) -> int:
    """``WAIT`` in milliseconds (uint32), read as ``backend::ReadInputTensor`` into 4 bytes."""
    data = raw_bytes(_input(request, "WAIT"))
    if len(data) > WAIT_BYTES:
        raise TritonError.invalid_arg(
            f"{_request_id(request)}buffer too small for input tensor 'WAIT', {WAIT_BYTES} < {len(data)}"
        )
    if len(data) != WAIT_BYTES:
        raise TritonError.invalid_arg("unexpected size for WAIT input")
    return int.from_bytes(data, "little", signed=False)


def read(request: InferenceRequest) -> tuple[int, Repeat | TritonError]:
    """The milliseconds the execution waits for ``request`` (0 when ``WAIT`` cannot be
    read), and its responses' plan, or the error it is answered with."""
    try:
        wait_ms = read_wait(request)
    except TritonError as exc:
        return 0, exc
    try:
        values = _input(request, "IN")
        delays = _input(request, "DELAY")
        if tuple(values.shape) != tuple(delays.shape):
            raise TritonError.invalid_arg(
                "expected IN and DELAY shape to match, got "
                f"{shape_to_string(values.shape)} and {shape_to_string(delays.shape)}"
            )
        in_bytes = raw_bytes(values)
        count = len(in_bytes) // 4
        delay_bytes = raw_bytes(delays)
        plan = Repeat(
            values=np.frombuffer(in_bytes, np.int32, count),
            # repeat.cc sizes DELAY's buffer by IN's element count.
            delays_ms=np.frombuffer(delay_bytes, np.int32, min(count, len(delay_bytes) // 4)),
            sender=_sender(request),
        )
    except TritonError as exc:
        return wait_ms, exc
    return wait_ms, plan


def _sender(request: InferenceRequest) -> ResponseSender:
    sender = request.response_sender
    if sender is None:  # the core gives every request it executes one
        raise TritonError.internal("the request has no response sender")
    return sender


def answer_error(request: InferenceRequest, error: TritonError, logger: logging.Logger) -> None:
    """repeat.cc's ``RESPOND_AND_RETURN_IF_ERROR``: one error response, FINAL."""
    try:
        _sender(request).send(InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL)
    except TritonError as exc:
        logger.error("failed to send error response: %s", exc.message)


def stream(plan: Repeat, inflight: InFlight, logger: logging.Logger) -> None:
    """Send the plan's responses, then the FINAL flag; always tell ``inflight`` it ended."""
    try:
        _stream(plan, logger)
    finally:
        inflight.ended()


def _stream(plan: Repeat, logger: logging.Logger) -> None:
    sender, count = plan.sender, len(plan.values)
    for index in range(count):
        delay = int(plan.delays_ms[index]) if index < len(plan.delays_ms) else 0
        logger.info("waiting %d ms, then sending response %d of %d", delay, index + 1, count)
        if delay > 0:
            time.sleep(delay / 1000.0)
        response = InferenceResponse(
            {
                "OUT": Tensor("OUT", plan.values[index : index + 1].copy(), DataType.INT32),
                "IDX": Tensor("IDX", np.array([index], np.uint32), DataType.UINT32),
            }
        )
        try:
            sender.send(response)
        except TritonError as exc:
            logger.error("failed sending response: %s", exc.message)
        logger.info("sent response %d of %d", index + 1, count)
    if count == 0:
        logger.info("IN size is zero, no responses sent")
    # The FINAL flag alone, after the last response, as repeat.cc sends it.
    try:
        sender.send(flags=RESPONSE_COMPLETE_FINAL)
    except TritonError as exc:
        logger.error("failed sending final response: %s", exc.message)
