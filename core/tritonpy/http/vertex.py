"""Triton's Vertex AI front end (``--allow-vertex-ai``, on by default where
``AIP_MODE=PREDICTION``): the two routes Vertex AI calls, on ``AIP_HTTP_PORT`` (8080).

- ``AIP_HEALTH_ROUTE`` (``GET``): 200 (empty) when the server is ready, else 400.
- ``AIP_PREDICT_ROUTE`` (``POST``): an inference of the default model
  (``--vertex-ai-default-model``, else the repository's only model), a KServe v2
  request whose binary data is announced in the content type,
  ``application/vnd.vertex-ai-triton.binary+json;json-header-size=<n>``; the answer
  is the HTTP front end's (binary data sized by ``Inference-Header-Content-Length``).
  With the header ``X-Vertex-Ai-Triton-Redirect: <endpoint>`` the request goes to that
  endpoint of the KServe API instead (``v2/models/m/infer``, ``v2/health/ready``,
  ``v2/repository/index``, ``metrics`` ...), as the HTTP front end answers it.
- Anything else: 400, empty.

Both routes are regular expressions matched against the whole path, as Triton
matches them. The routes must be set (Triton's messages otherwise), and the default
model must be loaded when the front end starts.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send
from tritonpy_sdk import TritonError

from ..metrics import create_metrics_app
from ..metrics.frontend import server_metrics
from .app import create_app
from .errors import bare, error_response, not_allowed
from .tensors import HEADER_LENGTH, binary_json_size

if TYPE_CHECKING:
    from ..server import Server

#: The content type of a body with binary data: the JSON part's length follows it.
BINARY_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
#: The request header that sends a predict request to another endpoint.
REDIRECT = b"x-vertex-ai-triton-redirect"
#: The endpoints a predict request may be redirected to (Triton's list); others answer 400.
_ENDPOINTS = re.compile(
    r"/metrics|/v2|/v2/health/(live|ready)|/v2/models/stats"
    r"|/v2/models/[^/]+(/versions/[^/]+)?(/(ready|infer|config|stats))?"
    r"|/v2/(system|cuda)sharedmemory(/region/[^/]+)?/(status|register|unregister)"
    r"|/v2/repository(/[^/]+)?/(index|models/[^/]+/(load|unload))"
)
#: Redirected endpoints that are GET routes of the KServe API (Triton switches the method).
_GET = re.compile(
    r"/v2(/health/(live|ready))?|/v2/models/stats"
    r"|/v2/models/[^/]+(/versions/[^/]+)?(/(ready|config|stats))?"
    r"|/v2/(system|cuda)sharedmemory(/region/[^/]+)?/status"
)


def default_model(server: Server, given: str) -> str:
    """The model predict requests infer with: ``given`` if loaded, else the only loaded
    one; Triton's messages when there is none."""
    ready = [entry["name"] for entry in server.repository_index(ready=True)]
    if not given:
        if len(ready) != 1:
            raise TritonError.invalid_arg(
                "Expect the model repository contains only a single model if default model is not specified"
            )
        return ready[0]
    if given not in ready:
        raise TritonError.invalid_arg(f"Expect the default model '{given}' is loaded")
    return given


class VertexApp:
    """The ASGI application of the Vertex AI front end for ``server``."""

    def __init__(self, server: Server, default: str, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        predict, health = env.get("AIP_PREDICT_ROUTE", ""), env.get("AIP_HEALTH_ROUTE", "")
        if not predict:
            raise TritonError.invalid_arg("API_PREDICT_ROUTE is not defined for Vertex AI endpoint")
        if not health:
            raise TritonError.invalid_arg("AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint")
        try:
            self.predict, self.health = re.compile(predict), re.compile(health)
        except re.error as exc:
            raise TritonError.invalid_arg(
                f"AIP_PREDICT_ROUTE or AIP_HEALTH_ROUTE is not a pattern: {exc}"
            ) from None
        self.server = server
        self.model = default_model(server, default)
        self.kserve: ASGIApp = create_app(server)
        try:
            self._metrics = server_metrics(server)
        except ValueError as exc:  # a bad --metrics-config
            raise TritonError.invalid_arg(str(exc)) from None
        self.metrics: ASGIApp = create_metrics_app(self._metrics)

    def group(self, path: str) -> str | None:
        """The restricted API group this application itself answers for ``path`` (the
        health route's); what it readdresses is checked where it is readdressed to."""
        return "health" if self.health.fullmatch(path) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await (await self._route(scope))(scope, receive, send)

    async def _route(self, scope: Scope) -> ASGIApp:
        """What answers the request of ``scope``: a response, or the KServe (or metrics)
        application with the request re-addressed to the endpoint it is for."""
        path, method = scope["path"], scope["method"]
        if self.health.fullmatch(path):
            if method != "GET":
                return not_allowed()
            return bare(200 if self.server.ready() else 400)
        if not self.predict.fullmatch(path):
            return bare(400)
        headers = dict(scope["headers"])
        try:
            size = binary_json_size(headers.get(b"content-type", b"").decode("latin-1"), BINARY_MIME)
        except TritonError as exc:
            return error_response(exc.message, 400, "text/plain")
        if method != "POST":
            return not_allowed()
        target = headers.get(REDIRECT)
        if target is None:
            return _readdressed(self.kserve, scope, f"/v2/models/{self.model}/infer", "POST", size)
        endpoint = "/" + target.decode("latin-1")
        if not _ENDPOINTS.fullmatch(endpoint):
            return bare(400)
        if endpoint == "/metrics":
            # The per-interval gauges (CPU, GPU), which the metrics port refreshes on a
            # timer, are refreshed here for each scrape.
            await asyncio.get_running_loop().run_in_executor(None, self._metrics.poll)
            return _readdressed(self.metrics, scope, endpoint, "GET", None)
        method = "GET" if _GET.fullmatch(endpoint) else "POST"
        return _readdressed(self.kserve, scope, endpoint, method, size)


def _readdressed(app: ASGIApp, scope: Scope, path: str, method: str, size: str | None) -> ASGIApp:
    """``app`` answering the request of ``scope`` as one to ``path`` with ``method``, its
    binary data sized as the HTTP front end reads it (``size``, the content type's
    ``json-header-size``, instead of any ``Inference-Header-Content-Length``)."""
    length = HEADER_LENGTH.encode()
    headers = [(k, v) for k, v in scope["headers"] if k not in (REDIRECT, length)]
    if size is not None:
        headers.append((length, size.encode("latin-1")))
    moved = {**scope, "path": path, "raw_path": path.encode(), "method": method, "headers": headers}

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        await app(moved, receive, send)

    return answer
