"""Bridges between worker threads and the caller: an event loop, or a blocked thread.

A request is answered on whichever thread finishes it (an instance's worker, a
backend's own thread, the caller's when it ran there). These carry that answer
to whoever waits: ``call_soon_threadsafe`` onto an event loop (the front ends,
``Server.infer_async``), ``Answer`` to a thread blocked in ``Server.infer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator
from typing import Any

from tritonpy_sdk import InferenceRequest, InferenceResponse


def call_soon_threadsafe(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """``fn(*args)`` on ``loop``, from any thread; nothing once the loop is closed.
    On the loop's own thread (a backend that completes there) it is only queued:
    no wake-up of the loop is needed."""
    if asyncio._get_running_loop() is loop:
        loop.call_soon(fn, *args)
        return
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass


class Answer:
    """The one response ``Server.infer`` waits for.

    Cheaper than a ``concurrent.futures.Future`` (no condition, no callbacks). When
    the request ran on the caller's thread (``run_here``) the response is there when
    ``wait`` is called: no lock is ever made. Otherwise ``wait`` makes one, publishes
    it and looks again before it blocks; ``done`` stores the response before it looks
    for that lock, so one of the two always sees the other (no lost wake-up).
    """

    __slots__ = ("_waiter", "_response")

    def __init__(self) -> None:
        self._response: InferenceResponse | None = None
        self._waiter: threading.Lock | None = None

    def done(self, response: InferenceResponse | None, flags: int) -> None:
        """The ``OnResponse`` callback of a model that is not decoupled (its one call
        carries the response), from the answering thread, once (a second response
        raises, as ``Future.set_result`` does)."""
        if response is not None:
            if self._response is not None:
                raise RuntimeError("the response of this request was already set")
            self._response = response
            waiter = self._waiter
            if waiter is not None:
                waiter.release()

    def wait(self, timeout: float | None) -> InferenceResponse:
        """The response; ``TimeoutError`` when none came within ``timeout`` s (None: no limit)."""
        response = self._response
        if response is None:
            waiter = threading.Lock()
            waiter.acquire()
            self._waiter = waiter
            response = self._response  # set before the waiter was seen: it is here now
            if response is None:
                if not waiter.acquire(timeout=-1 if timeout is None else timeout):
                    raise TimeoutError()
                response = self._response
        assert response is not None
        return response


def answer_on(
    loop: asyncio.AbstractEventLoop, fut: asyncio.Future[InferenceResponse], response: InferenceResponse
) -> None:
    """``fut``'s response, from whichever thread answers: set at once on the loop's own
    thread (a stub's answer is read there: the awaiting task resumes a turn sooner),
    else handed to the loop."""
    if asyncio._get_running_loop() is loop:
        resolve(fut, response)
    else:
        call_soon_threadsafe(loop, resolve, fut, response)


def resolve(fut: asyncio.Future[InferenceResponse], response: InferenceResponse) -> None:
    """Set ``fut``'s result on its loop (through ``call_soon_threadsafe``), unless it is done."""
    if not fut.done():  # the caller may have gone away (cancelled)
        fut.set_result(response)


async def awaited_response(
    fut: asyncio.Future[InferenceResponse], request: InferenceRequest
) -> InferenceResponse:
    """The one response ``fut`` gets for ``request``: its error raised; cancelling the
    awaiting task cancels the request (``infer_async`` of the server and of a worker)."""
    try:
        response = await fut
    except asyncio.CancelledError:
        request.cancel()
        raise
    if response.error is not None:
        raise response.error
    return response


async def responses(
    calls: AsyncGenerator[tuple[InferenceResponse | None, int], None],
) -> AsyncGenerator[InferenceResponse, None]:
    """The responses of a ``stream_flags_async`` stream, without their flags (``stream_async``);
    leaving early closes the stream, which cancels the request."""
    async with contextlib.aclosing(calls):
        async for response, _ in calls:
            if response is not None:
                yield response
