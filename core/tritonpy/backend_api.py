"""The server as backends see it (``tritonpy_sdk.ServerApi``): BLS, model control, metrics.

A backend gets this object as ``backend.server``. Requests it submits take
the same path as a client's: validation, the model's scheduler (so they are
batched), statistics and metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import InferenceRequest, OnResponse
from tritonpy_sdk.host import MetricRegistry

if TYPE_CHECKING:
    from .server import Server


class BackendServerApi:
    """``tritonpy_sdk.ServerApi`` over one ``Server``."""

    def __init__(self, server: Server, metrics: MetricRegistry) -> None:
        self._server = server
        self.metrics = metrics

    def submit(self, request: InferenceRequest, on_response: OnResponse) -> None:
        self._server.submit(request, on_response, internal=True)

    def is_model_ready(self, name: str, version: int = -1) -> bool:
        return self._server.model_ready(name, version)

    def model_config(self, name: str, version: int = -1) -> dict[str, Any]:
        return self._server.model_config(name, version)

    def is_decoupled(self, name: str, version: int = -1) -> bool:
        return self._server.is_decoupled(name, version)

    def load_model(self, name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
        self._server.load_model(name, config, files)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        self._server.unload_model(name, unload_dependents)

    def exit_deadline(self) -> float | None:
        return self._server.exit_deadline

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        return self._server.event_loop
