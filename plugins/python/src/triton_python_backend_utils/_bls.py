"""The answers of a BLS call: ``ResponseIterator``, as Triton's, and how they arrive.

``exec(decoupled=True)`` and ``await async_exec(decoupled=True)`` both give a
``ResponseIterator``. As in Triton it is a plain iterator (``for response in
responses``) even after ``async_exec``, and ``cancel()`` asks the target to stop;
tritonpy also lets ``async for`` wait without blocking the event loop. A call to
a model that is not decoupled reads the iterator to its end and returns the one
response.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Callable
from typing import Any

from ._api import InferenceRequest, InferenceResponse, TritonError

#: What arrives for a BLS call: (the response in the runtime's form or None, flags).
Item = tuple[Any, int]
_FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL


class BlsInbox:
    """Where a BLS call's answers land, from any thread; readable blocking or awaited.

    Answers always go into a thread-safe queue, so a model that iterates with a
    plain ``for`` on its event loop's thread still gets them; ``loop`` (when the
    call came from ``async_exec``) is woken as well, for ``async for``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self._loop = loop
        self._arrived = asyncio.Event() if loop is not None else None

    def put(self, item: Item) -> None:
        self._queue.put(item)
        if self._loop is not None and self._arrived is not None:
            try:
                self._loop.call_soon_threadsafe(self._arrived.set)
            except RuntimeError:  # the loop is closed: nobody awaits any more
                pass

    def get(self, timeout: float | None) -> Item:
        """The next answer; ``queue.Empty`` after ``timeout`` seconds."""
        return self._queue.get(timeout=timeout)

    async def get_async(self, timeout: float | None) -> Item:
        """``get`` without blocking the event loop; ``queue.Empty`` after ``timeout``."""
        if self._arrived is None:  # made by exec(), iterated with async for
            return await asyncio.to_thread(self._queue.get, True, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self._queue.get_nowait()
            except queue.Empty:
                pass
            self._arrived.clear()
            try:  # an answer may have landed between the check and the clear
                return self._queue.get_nowait()
            except queue.Empty:
                pass
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise queue.Empty
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                raise queue.Empty from None


#: How long past a BLS request's ``timeout`` its caller still waits: the timeout is
#: the request's, for the server (a queue policy rejects it with Triton's "Request
#: timeout expired"), and the server's answer gets this long to arrive before the
#: caller gives up on it and cancels the request.
TIMEOUT_GRACE_S = 0.5


class ResponseIterator:
    """The responses of a decoupled BLS call, ending with the one that carries FINAL
    (which may be empty, as in Triton). As Triton's, it keeps them: a finished iterator
    iterated again yields them all again."""

    def __init__(
        self,
        inbox: BlsInbox,
        convert: Callable[[Any], InferenceResponse],
        request: InferenceRequest,
        timeout: float | None,
        cancel: Callable[[], None],
        close: Callable[[], None],
    ) -> None:
        self._inbox = inbox
        self._convert = convert
        self._request = request
        self._timeout = timeout
        self._wait = None if timeout is None else timeout + TIMEOUT_GRACE_S
        self._cancel = cancel
        self._close = close
        self._finished = False
        #: Every response arrived, kept as Triton's iterator keeps them, and how many
        #: of them the iteration has given out: fewer while one read ahead
        #: (``first_arrived``) or one broken off midway is still to come.
        self._seen: list[InferenceResponse] = []
        self._next = 0

    def __iter__(self) -> ResponseIterator:
        if self._finished and self._next >= len(self._seen):
            self._next = 0  # a new iteration of a finished iterator starts over
        return self

    def __next__(self) -> InferenceResponse:
        if self._next < len(self._seen):
            return self._given()
        if self._finished:
            raise StopIteration
        try:
            item: Item | None = self._inbox.get(self._wait)
        except queue.Empty:
            item = None
        self._arrived(item)
        return self._given()

    def __aiter__(self) -> ResponseIterator:
        return self.__iter__()

    async def __anext__(self) -> InferenceResponse:
        if self._next < len(self._seen):
            return self._given()
        if self._finished:
            raise StopAsyncIteration
        await self.first_arrived()
        return self._given()

    async def first_arrived(self) -> ResponseIterator:
        """This iterator once its next answer is there (awaited on the loop, kept for
        the iteration): Triton's ``async_exec(decoupled=True)`` resolves then, and a
        model that goes on with a plain ``for`` blocks its loop no longer than that."""
        try:
            item: Item | None = await self._inbox.get_async(self._wait)
        except queue.Empty:
            item = None
        self._arrived(item)
        return self

    def _given(self) -> InferenceResponse:
        self._next += 1
        return self._seen[self._next - 1]

    def _arrived(self, item: Item | None) -> None:
        """Keep an answer (None: none came in time, which ends the call with an error)."""
        if item is None:
            self._cancel()
            error = TritonError(
                f"BLS request to model '{self._request.model_name()}' got no response "
                f"within {self._timeout} s",
                TritonError.UNAVAILABLE,
            )
            self._seen.append(InferenceResponse(error=error))
            self._end()
            return
        raw, flags = item
        self._seen.append(self._convert(raw) if raw is not None else InferenceResponse())
        if flags & _FINAL:
            self._end()

    def cancel(self) -> None:
        """Ask the target to stop (its remaining responses, if any, still arrive)."""
        if not self._finished:
            self._cancel()

    def _end(self) -> None:
        self._finished = True
        self._close()

    def __del__(self) -> None:
        # Dropped before its end: the target need not go on for nobody.
        if not self._finished:
            try:
                self._cancel()
                self._close()
            except Exception:  # interpreter shutdown, a dead link: nothing to tell
                pass


def first_response(responses: ResponseIterator) -> InferenceResponse:
    """The answer of a BLS call to a model that is not decoupled: its (one) response.

    Reads ``responses`` to the end (the FINAL flag), so nothing is left pending.
    """
    first = None
    for response in responses:
        if first is None:
            first = response
    return first if first is not None else InferenceResponse()


async def first_response_async(responses: ResponseIterator) -> InferenceResponse:
    """``first_response`` for ``async_exec``."""
    first = None
    async for response in responses:
        if first is None:
            first = response
    return first if first is not None else InferenceResponse()
