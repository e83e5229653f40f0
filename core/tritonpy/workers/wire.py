"""The inference messages between a front-end worker and the core process.

One frame of ``ipc.link`` per message: a kind byte, then a ``marshal``-ed tuple
of plain values (no pickle: marshal reads and writes tuples, strings, numbers,
dicts and bytes several times faster, and runs no code). Tensor data of
``ARENA_MIN`` bytes and more travels in the sender's arena (the tuple holds its
offset and size); smaller data rides inline. ``bench/frontend_hop.md`` measured
this shape against pickles, protocol bytes and a shared-memory ring.

A block of the peer's arena is read in place: the array made over it is the root
of every view a model may take of it, and the block is released to the peer
when the last of them is gone (``weakref.finalize`` on the root: numpy keeps the
root alive through its views), so a model or a cache that keeps an input or an
output never sees its memory reused.

Worker → core: ``INFER`` (a request and how to answer it), ``CANCEL`` (its
client went away), ``READY`` (the worker serves), ``FAILED`` (it cannot serve:
the one line a user reads), ``PONG`` (the answer to a ``PING``). Core → worker:
``ANSWER`` (a response, its flags; or the refusal of a request that was never
queued), ``STOP`` (drain: stop serving within the seconds given), ``PING`` (a
worker whose link has been quiet for a while: is its loop still turning?).
"""

from __future__ import annotations

import asyncio
import marshal
import math
import threading
import weakref
from typing import Any

import numpy as np
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DataType,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    Tensor,
    TritonError,
)

from ..codec import array_from_buffer, array_to_buffer
from ..ipc.link import Link

#: Frame kinds, worker → core.
INFER = 1
CANCEL = 2
READY = 3
FAILED = 4
PONG = 5
#: Frame kinds, core → worker.
ANSWER = 1
STOP = 2
PING = 3

#: How the core answers an ``INFER``: one response (``Server.start_infer``), or
#: every response with its flags (``Server.submit``).
SINGLE = 0
STREAM = 1

#: What an ``ANSWER`` carries: a response, only flags (a decoupled model's final
#: flag without a response), or the error that refused the request before it queued.
RESPONSE = 0
FLAGS_ONLY = 1
REFUSED = 2

#: Tensors of this many bytes and more go through the arena; smaller ones inline.
ARENA_MIN = 4096

_KIND = tuple(bytes([k]) for k in range(6))
_DATATYPES = {d.value: d for d in DataType}
#: numpy dtype and item size of each fixed-size type, by protocol name.
_FIXED = {
    d.value: (np.dtype(d.numpy_dtype), np.dtype(d.numpy_dtype).itemsize)
    for d in DataType
    if d is not DataType.BYTES
}
_CODES = {c.name: c for c in ErrorCode}
#: Protocol name of each data type by the member's ``id`` (an enum's ``.value`` is a
#: descriptor call; a dict lookup by ``id`` is one C call).
_NAME_OF = {id(d): d.value for d in DataType}
_BYTES = DataType.BYTES
#: numpy dtype, item size and data type of each fixed-size type, by protocol name.
_INLINE = {name: (dtype, itemsize, _DATATYPES[name]) for name, (dtype, itemsize) in _FIXED.items()}


class Releaser:
    """Gives blocks of the peer's arena back, from whichever thread drops the last view."""

    __slots__ = ("_link", "_loop", "_thread")

    def __init__(self, link: Link, loop: asyncio.AbstractEventLoop) -> None:
        self._link = link
        self._loop = loop
        self._thread = threading.get_ident()  # made on the loop's thread

    def __call__(self, offset: int) -> None:
        if threading.get_ident() == self._thread:
            self._link.release(offset)
            return
        try:
            self._loop.call_soon_threadsafe(self._link.release, offset)
        except RuntimeError:  # the loop is closed: the link and its arenas are gone with it
            pass


# -- tensors ---------------------------------------------------------------------------------


def _tensor_out(link: Link, tensor: Tensor) -> tuple[Any, ...]:
    data = tensor.data  # a device tensor's data is its host copy
    datatype = tensor.datatype
    if datatype is not DataType.BYTES and data.nbytes < ARENA_MIN:
        # Small and fixed-size (most requests): its bytes, inline. ``tobytes`` is one
        # C call, where a buffer view of the array costs more to make and to marshal.
        return (tensor.name, datatype.value, data.shape, -1, data.tobytes())
    buf = array_to_buffer(data, datatype)
    nbytes = memoryview(buf).nbytes
    if nbytes >= ARENA_MIN:
        offset = link.put(buf)
        if offset is not None:
            return (tensor.name, datatype.value, data.shape, offset, nbytes)
    return (tensor.name, datatype.value, data.shape, -1, buf)


def _tensor_in(link: Link, release: Releaser, item: tuple[Any, ...]) -> Tensor:
    name, dt, shape, offset, payload = item
    datatype = _DATATYPES[dt]
    if offset < 0:
        fixed = _FIXED.get(dt)
        if fixed is not None:
            dtype, itemsize = fixed
            count = len(payload) // itemsize
            if count * itemsize == len(payload) and count == math.prod(shape):
                array = np.frombuffer(payload, dtype, count)  # 1-D: already of its shape
                return Tensor(name, array if len(shape) == 1 else array.reshape(shape), datatype)
        # BYTES, or data that does not fit its shape: the codec decodes it, or says why not.
        return Tensor(name, array_from_buffer(name, datatype, shape, payload), datatype)
    root = np.frombuffer(link.theirs(offset, payload), dtype=np.uint8)
    weakref.finalize(root, release, offset).atexit = False
    view = memoryview(root)  # type: ignore[arg-type]  # numpy arrays are buffers
    return Tensor(name, array_from_buffer(name, datatype, shape, view), datatype)


def _dumps(kind: int, message: tuple[Any, ...]) -> tuple[bytes, bytes]:
    return _KIND[kind], marshal.dumps(message)


# -- requests --------------------------------------------------------------------------------


def encode_request(
    link: Link, rid: int, mode: int, refusal: str | None, request: InferenceRequest
) -> tuple[bytes, bytes]:
    """The ``INFER`` frame of ``request`` (its tensors of ``ARENA_MIN`` bytes and more put in the arena)."""
    return _dumps(
        INFER,
        (
            rid,
            mode,
            refusal,
            request.model_name,
            request.model_version,
            request.id,
            request.parameters,
            request.correlation_id,
            request.flags,
            request.priority,
            request.timeout_us,
            tuple(_tensor_out(link, t) for t in request.inputs.values()),
            tuple((o.name, o.parameters) for o in request.requested_outputs),
            request.trace_context,
        ),
    )


def decode_request(
    link: Link, release: Releaser, frame: bytes
) -> tuple[int, int, str | None, InferenceRequest]:
    """``(rid, mode, refusal, request)`` of an ``INFER`` frame."""
    (rid, mode, refusal, model, version, rid_text, params, corr, flags, prio, timeout, ins, outs, traced) = (
        marshal.loads(memoryview(frame)[1:])
    )
    inputs = {}
    for item in ins:
        name, dt, shape, offset, payload = item
        if offset < 0:
            fixed = _INLINE.get(dt)
            if fixed is not None:
                # ``_tensor_in`` of a small fixed-size tensor (most requests), inlined.
                dtype, itemsize, datatype = fixed
                count = len(payload) // itemsize
                if count * itemsize == len(payload) and count == math.prod(shape):
                    array = np.frombuffer(payload, dtype, count)  # 1-D: already of its shape
                    inputs[name] = Tensor(name, array if len(shape) == 1 else array.reshape(shape), datatype)
                    continue
        tensor = _tensor_in(link, release, item)
        inputs[tensor.name] = tensor
    request = InferenceRequest(
        model,
        version,
        inputs,
        [RequestedOutput(name, p) for name, p in outs],
        rid_text,
        params,
        corr,
        flags,
        prio,
        timeout,
    )
    request.trace_context = traced
    return rid, mode, refusal, request


def encode_cancel(rid: int) -> tuple[bytes, bytes]:
    return _dumps(CANCEL, (rid,))


# -- answers ---------------------------------------------------------------------------------


def _error_out(error: TritonError) -> tuple[str, str]:
    return (error.code.name, error.message)


def error_in(item: tuple[str, str]) -> TritonError:
    code, message = item
    return TritonError(message, _CODES.get(code, ErrorCode.INTERNAL))


def encode_answer(
    link: Link, rid: int, flags: int, response: InferenceResponse | None
) -> tuple[bytes, bytes]:
    """The ``ANSWER`` frame of one response (None: its flags alone). Outputs of
    ``ARENA_MIN`` bytes and more go into the arena; any thread may call it."""
    if response is None:
        return _dumps(ANSWER, (rid, flags, FLAGS_ONLY, None))
    error = None if response.error is None else _error_out(response.error)
    try:
        outs = []
        for t in response.outputs.values():
            data = t.data  # a device tensor's data is its host copy
            datatype = t.datatype
            if datatype is not _BYTES and data.nbytes < ARENA_MIN:
                # ``_tensor_out`` of a small fixed-size tensor (most responses), inlined.
                name = _NAME_OF.get(id(datatype)) or datatype.value
                outs.append((t.name, name, data.shape, -1, data.tobytes()))
            else:
                outs.append(_tensor_out(link, t))
        outputs = tuple(outs)
        body = (response.model_name, response.model_version, response.id, response.parameters, outputs, error)
        return _dumps(ANSWER, (rid, flags, RESPONSE, body))
    except ValueError as exc:  # marshal: a parameter value no protocol can carry
        failed = TritonError.internal(f"response of model '{response.model_name}' cannot be sent: {exc}")
        body = (response.model_name, response.model_version, response.id, {}, (), _error_out(failed))
        return _dumps(ANSWER, (rid, flags, RESPONSE, body))


def encode_refusal(rid: int, error: TritonError) -> tuple[bytes, bytes]:
    """The ``ANSWER`` of a request refused before it was queued."""
    return _dumps(ANSWER, (rid, RESPONSE_COMPLETE_FINAL, REFUSED, _error_out(error)))


def decode_answer(
    link: Link, release: Releaser, frame: bytes
) -> tuple[int, int, int, InferenceResponse | TritonError | None]:
    """``(rid, flags, what, body)``: body is the response, None (flags only) or the refusal."""
    rid, flags, what, body = marshal.loads(memoryview(frame)[1:])
    if what == RESPONSE:
        model, version, rid_text, params, outs, error = body
        outputs = {}
        for item in outs:
            tensor = _tensor_in(link, release, item)
            outputs[tensor.name] = tensor
        response = InferenceResponse(
            outputs, None if error is None else error_in(error), params, model, version, rid_text
        )
        return rid, flags, what, response
    if what == REFUSED:
        return rid, flags, what, error_in(body)
    return rid, flags, what, None


# -- the worker's life -------------------------------------------------------------------


def encode_ready() -> tuple[bytes, bytes]:
    return _dumps(READY, ())


def encode_failed(message: str) -> tuple[bytes, bytes]:
    return _dumps(FAILED, (message,))


def encode_stop(seconds: float) -> tuple[bytes, bytes]:
    """``STOP``: stop serving within ``seconds`` (clients still connected get that long)."""
    return _dumps(STOP, (seconds,))


def encode_ping() -> tuple[bytes, bytes]:
    return _dumps(PING, ())


def encode_pong() -> tuple[bytes, bytes]:
    return _dumps(PONG, ())


def decode_fields(frame: bytes) -> tuple[Any, ...]:
    """The fields of a ``CANCEL``, ``FAILED`` or ``STOP`` frame."""
    fields: tuple[Any, ...] = marshal.loads(memoryview(frame)[1:])
    return fields
