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
from typing import TYPE_CHECKING, Any

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from tritonpy_sdk import TritonError

from ..metrics import create_metrics_app
from ..metrics.frontend import server_metrics
from .app import create_app
from .errors import error_body
from .tensors import HEADER_LENGTH

if TYPE_CHECKING:
    from ..server import Server

#: The content type of a body with binary data: the JSON part's length follows it.
BINARY_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
#: The request header that sends a predict request to another endpoint.
REDIRECT = b"x-vertex-ai-triton-redirect"
_TEXT = {"content-type": "text/plain"}
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if self.health.fullmatch(path):
            if method != "GET":
                await _answer(Response(error_body("Method Not Allowed"), 405, _TEXT), scope, receive, send)
                return
            ok = self.server.ready()
            await _answer(Response(status_code=200 if ok else 400, headers=_TEXT), scope, receive, send)
            return
        if self.predict.fullmatch(path):
            headers = dict(scope["headers"])
            content_type = headers.get(b"content-type", b"").decode("latin-1")
            if content_type.find(BINARY_MIME) > 0:
                message = f"expect MIME type for binary data starts with '{BINARY_MIME}', got: {content_type}"
                await _answer(Response(error_body(message), 400, _TEXT), scope, receive, send)
                return
            if method != "POST":
                await _answer(Response(error_body("Method Not Allowed"), 405, _TEXT), scope, receive, send)
                return
            target = headers.get(REDIRECT)
            if target is None:
                await self.kserve(_as(scope, f"/v2/models/{self.model}/infer", "POST"), receive, send)
                return
            endpoint = "/" + target.decode("latin-1")
            if not _ENDPOINTS.fullmatch(endpoint):
                await _answer(Response(status_code=400, headers=_TEXT), scope, receive, send)
                return
            if endpoint == "/metrics":
                # The per-interval gauges (CPU, GPU), which the metrics port refreshes on a
                # timer, are refreshed here for each scrape.
                await asyncio.get_running_loop().run_in_executor(None, self._metrics.poll)
                await self.metrics(_as(scope, endpoint, "GET", keep_body=False), receive, send)
                return
            await self.kserve(
                _as(scope, endpoint, "GET" if _GET.fullmatch(endpoint) else "POST"), receive, send
            )
            return
        await _answer(Response(status_code=400, headers=_TEXT), scope, receive, send)


def _as(scope: Scope, path: str, method: str, keep_body: bool = True) -> dict[str, Any]:
    """``scope`` sent to ``path`` with ``method``, its binary data sized as the HTTP front
    end reads it (the content type's ``json-header-size`` instead of any
    ``Inference-Header-Content-Length``)."""
    headers = [(k, v) for k, v in scope["headers"] if k not in (REDIRECT, HEADER_LENGTH.encode())]
    content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
    if keep_body and content_type.startswith(BINARY_MIME):
        headers.append((HEADER_LENGTH.encode(), content_type[len(BINARY_MIME) :].encode("latin-1")))
    return {**scope, "path": path, "raw_path": path.encode(), "method": method, "headers": headers}


async def _answer(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    await response(scope, receive, send)
