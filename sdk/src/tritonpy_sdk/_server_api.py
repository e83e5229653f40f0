"""What a backend may ask of the server it runs in (BLS, model control, metrics).

The core gives every ``Backend`` a ``server`` object with this interface; a
backend never imports the core. Requests submitted here go through the same
validation, scheduling, statistics and metrics as a client's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._inference import InferenceRequest, InferenceResponse
from ._metrics import MetricRegistry

#: Receives each response of a submitted request with its flags (``RESPONSE_COMPLETE_FINAL`` last).
OnResponse = Callable[[InferenceResponse | None, int], None]


class ServerApi(Protocol):
    """The server as a backend sees it."""

    #: Custom metric families exported on the metrics port.
    metrics: MetricRegistry

    def submit(self, request: InferenceRequest, on_response: OnResponse) -> None:
        """Queue ``request``; ``on_response`` gets every response, the last with FINAL.

        Raises ``TritonError`` when the request is refused before it is queued
        (unknown model, invalid inputs); afterwards errors arrive as responses.
        """
        ...

    def is_model_ready(self, name: str, version: int = -1) -> bool: ...

    def model_config(self, name: str, version: int = -1) -> dict[str, Any]: ...

    def is_decoupled(self, name: str, version: int = -1) -> bool: ...

    def load_model(self, name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
        """Load (or reload) ``name``; ``TritonError`` when the control mode forbids it."""
        ...

    def unload_model(self, name: str, unload_dependents: bool = False) -> None: ...

    def exit_deadline(self) -> float | None:
        """When the server must have stopped, as a ``time.monotonic()`` value.

        None while the server serves. Once it is stopping (``--exit-timeout-secs``
        counts from the stop), ``instance_finalize`` and ``model_finalize`` must
        return by then: a backend that waits for its own processes or threads
        bounds the wait by this and ends them forcibly past it.
        """
        ...

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the server's network front ends run on; None without one
        (a server used in process, with no front end).

        A backend whose work happens in other processes may watch its own file
        descriptors on it (``loop.add_reader``, registered through
        ``loop.call_soon_threadsafe``) and complete ``execute_nowait`` batches from
        there, with no thread of its own in between. Callbacks on it must never
        block: everything the server's clients are answered by runs there too.
        The loop runs until the server has stopped, every ``instance_finalize``
        included.
        """
        ...
