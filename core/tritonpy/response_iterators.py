"""What ``ModelHandle.infer`` and ``ModelHandle.async_infer`` return, as ``tritonserver``'s
``ResponseIterator`` and ``AsyncResponseIterator``.

The request is submitted before the call returns (a bad request raises there);
iterating yields its responses as the model sends them (one, or any number from a
decoupled model), raising a response's error when ``raise_on_error``. With a
``response_queue`` every response is also put there, iterated or not (a
``queue.Queue``-like for ``infer``, an ``asyncio.Queue`` for ``async_infer``).
``cancel()`` cancels the request, and so does ``close()`` (``aclose()``) on an
iterator not finished; dropping one does not, as in ``tritonserver``.
"""

from __future__ import annotations

import asyncio
import queue
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceRequest, InferenceResponse, TritonError

from .bridges import call_soon_threadsafe

if TYPE_CHECKING:
    from .server import Server

#: One response (None: a final flag sent alone) and its flags.
_Call = tuple[InferenceResponse | None, int]


def _putter(inbox: queue.SimpleQueue[_Call]) -> Any:
    """``done`` for an iterator without a queue of the caller's: each call into ``inbox``."""
    put = inbox.put
    return lambda response, flags: put((response, flags))


class ResponseIterator:
    """The responses of a submitted request, for a thread that waits for them."""

    def __init__(
        self,
        server: Server,
        request: InferenceRequest,
        raise_on_error: bool,
        response_queue: Any = None,
        timeout: float | None = None,
        raise_refusal: bool | None = None,
    ) -> None:
        """``timeout`` bounds the wait for each response (UNAVAILABLE past it);
        ``raise_refusal`` (default: ``raise_on_error``) raises a request the server
        refuses here rather than answering it as an error response."""
        self._request = request
        self._raise = raise_on_error
        self._timeout = timeout
        self._finished = False
        inbox: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._inbox = inbox
        if response_queue is None:
            done = _putter(inbox)
        else:

            def done(response: InferenceResponse | None, flags: int) -> None:
                inbox.put((response, flags))
                if response is not None:
                    response_queue.put(response)

        try:
            # Without a queue to fill or a time limit, this thread may run the request
            # itself: it waits for the answer anyway.
            server.submit(request, done, here=response_queue is None and timeout is None)
        except TritonError as exc:
            if raise_on_error if raise_refusal is None else raise_refusal:
                raise
            done(InferenceResponse.from_error(exc), RESPONSE_COMPLETE_FINAL)

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        while not self._finished:
            try:
                response, flags = self._inbox.get(timeout=self._timeout)
            except queue.Empty:
                raise TritonError.unavailable(
                    f"no response from model '{self._request.model_name}' within {self._timeout} s"
                ) from None
            self._finished = bool(flags & RESPONSE_COMPLETE_FINAL)
            if response is not None:
                if response.error is not None and self._raise:
                    raise response.error
                return response
        raise StopIteration

    def cancel(self) -> None:
        """Cancel the request (the model may have answered already)."""
        self._request.cancel()

    def close(self) -> None:
        """Leave the iteration, as a generator's ``close``: an unfinished request is cancelled."""
        if not self._finished:
            self._finished = True
            self._request.cancel()


class AsyncResponseIterator:
    """The responses of a submitted request, for ``async for`` on the running event loop."""

    def __init__(
        self, server: Server, request: InferenceRequest, raise_on_error: bool, response_queue: Any = None
    ) -> None:
        loop = asyncio.get_running_loop()
        self._request = request
        self._raise = raise_on_error
        self._finished = False
        inbox: asyncio.Queue[_Call] = asyncio.Queue()
        self._inbox = inbox

        def deliver(call: _Call) -> None:
            inbox.put_nowait(call)
            if call[0] is not None and response_queue is not None:
                response_queue.put_nowait(call[0])

        def done(response: InferenceResponse | None, flags: int) -> None:
            call_soon_threadsafe(loop, deliver, (response, flags))

        try:
            server.submit(request, done)
        except TritonError as exc:
            if raise_on_error:
                raise
            deliver((InferenceResponse.from_error(exc), RESPONSE_COMPLETE_FINAL))

    def __aiter__(self) -> AsyncResponseIterator:
        return self

    async def __anext__(self) -> InferenceResponse:
        while not self._finished:
            try:
                response, flags = await self._inbox.get()
            except asyncio.CancelledError:
                self._request.cancel()  # the task waiting for it was cancelled
                raise
            self._finished = bool(flags & RESPONSE_COMPLETE_FINAL)
            if response is not None:
                if response.error is not None and self._raise:
                    raise response.error
                return response
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Leave the iteration, as an async generator's ``aclose``: an unfinished request
        is cancelled."""
        if not self._finished:
            self._finished = True
            self._request.cancel()

    def cancel(self) -> None:
        """Cancel the request (the model may have answered already)."""
        self._request.cancel()
