"""``ResponseSender``: how a backend answers a request outside ``execute``'s return value.

Triton's backend API lets a backend send a request's responses whenever it
likes, from any thread, ending with the FINAL flag. A decoupled model
(``model_transaction_policy { decoupled: true }``) may send any number of
responses per request; any other model sends exactly one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ._errors import TritonError

if TYPE_CHECKING:
    from ._inference import InferenceRequest, InferenceResponse

#: ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``: this is the request's last send.
RESPONSE_COMPLETE_FINAL = 1

#: Where the core delivers what a sender sends: ``(response or None, flags)``.
Deliver = Callable[["InferenceResponse | None", int], None]


class ResponseSender:
    """Sends the responses of one request; thread-safe.

    ``send(response)`` delivers a response; ``send(flags=RESPONSE_COMPLETE_FINAL)``
    (with or without a response) ends the request. Nothing may be sent after
    the FINAL flag.
    """

    __slots__ = ("_deliver", "_request", "_closed", "_cancelled", "_lock", "decoupled")

    def __init__(self, deliver: Deliver, request: InferenceRequest, decoupled: bool = False) -> None:
        self._deliver: Deliver | None = deliver
        self._request: InferenceRequest | None = request
        self._closed = False
        self._cancelled = False
        self._lock = threading.Lock()
        #: Whether the model may send more than one response.
        self.decoupled = decoupled

    @property
    def closed(self) -> bool:
        """True once the FINAL flag was sent."""
        return self._closed

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send ``response`` (may be None with the FINAL flag) with ``flags``."""
        with self._lock:
            if self._closed:
                raise TritonError.invalid_arg("Unable to send response. Response sender has been closed.")
            if response is None and not flags & RESPONSE_COMPLETE_FINAL:
                raise TritonError.invalid_arg(
                    "Response is None but the FINAL flag is not set: nothing to send"
                )
            deliver = self._deliver
            if flags & RESPONSE_COMPLETE_FINAL:
                self._close()
        assert deliver is not None
        deliver(response, flags)

    def close(self) -> None:
        """Close without sending: the core does so when ``execute`` returned the responses."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        # The request holds its sender and the sender reaches the request (and through
        # the core's callback its batch): drop those links once closed, so the request,
        # its tensors and its responses are freed at once, not by a later cyclic GC.
        self._closed = True
        request, self._request, self._deliver = self._request, None, None
        if request is not None:
            self._cancelled = request.is_cancelled()

    def is_cancelled(self) -> bool:
        """Whether the client gave up on the request (e.g. closed its stream)."""
        request = self._request
        return request.is_cancelled() if request is not None else self._cancelled


def execute_collect(
    execute: Callable[[list[InferenceRequest]], Sequence[InferenceResponse | None] | None],
    requests: list[InferenceRequest],
    decoupled: bool = False,
    timeout: float | None = 60.0,
) -> list[list[InferenceResponse]]:
    """Call ``execute(requests)`` and gather every request's responses, however sent.

    For callers outside the scheduler (warm-up, ``tritonpy_sdk.testing``):
    gives each request a sender, and when ``execute`` returns ``None`` waits
    (up to ``timeout`` seconds) until every request sent FINAL.
    """
    got: list[list[InferenceResponse]] = [[] for _ in requests]
    done = threading.Semaphore(0)

    def deliver_to(index: int) -> Deliver:
        def deliver(response: InferenceResponse | None, flags: int) -> None:
            if response is not None:
                got[index].append(response)
            if flags & RESPONSE_COMPLETE_FINAL:
                done.release()

        return deliver

    for index, request in enumerate(requests):
        request.response_sender = ResponseSender(deliver_to(index), request, decoupled)
    returned = execute(requests)
    if returned is not None:
        for request in requests:
            if request.response_sender is not None:
                request.response_sender.close()
        if len(returned) != len(requests):
            raise TritonError.internal(
                f"execute returned {len(returned)} responses for {len(requests)} requests"
            )
        return [[r] if r is not None else [] for r in returned]  # None: handed back, unanswered
    for _ in requests:
        if not done.acquire(timeout=timeout):
            raise TritonError.internal(f"a request sent no FINAL flag within {timeout} s")
    return got
