"""The HTTP front ends as ``tritonpy serve`` runs them (``frontends.Frontend``).

uvicorn with tritonpy's protocol (connection limits; inference answered without
an ASGI cycle) in front of the starlette application of ``app.py``, on a socket
bound when the front end is made; and the same for Triton's SageMaker and Vertex AI
routes (``sagemaker.py``, ``vertex.py``) on their own ports.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import uvicorn
from starlette.types import ASGIApp
from tritonpy_sdk import TritonError

from ..frontends import Frontend, FrontendError
from ..ports import listen
from .app import create_app
from .inference import HttpInference
from .protocol import direct_frontend, http_protocol
from .restricted import RestrictedApi
from .sagemaker import SagemakerApp, sagemaker_group
from .uvicorn_server import TRITON_HEADERS, UVICORN_LOGGING, FrontendServer
from .vertex import VertexApp

if TYPE_CHECKING:
    from ..server import Server


class UvicornFrontend(Frontend):
    """An ASGI application served by uvicorn with tritonpy's HTTP protocol (its limits) on a
    socket bound when the front end is made; ``service`` names it in a bind error."""

    def __init__(
        self,
        server: Server,
        app: ASGIApp,
        address: str,
        port: int,
        *,
        service: str,
        reuse_port: bool = False,
        direct: HttpInference | None = None,
    ) -> None:
        options = server.options
        self._where = (address, port)
        try:
            self._sock = listen(address, port, reuse_port)
        except OSError as exc:
            raise FrontendError(
                f"failed to start {service} service at {address}:{port}: {exc.strerror or exc}"
            ) from None
        config = uvicorn.Config(
            app,
            http=http_protocol(options, direct=direct),
            **UVICORN_LOGGING,
            **TRITON_HEADERS,
            proxy_headers=False,  # Triton reads no X-Forwarded-* headers; nor, per request, do we
            timeout_graceful_shutdown=max(1, int(options.exit_timeout_secs)),
            lifespan="off",
        )
        self._uvicorn = FrontendServer(config)
        self._serving: asyncio.Task[None] | None = None

    def ports(self) -> list[tuple[str, int]]:
        return [self._where]

    async def start(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self._serving = await self._uvicorn.serve_started(self._sock, loop)

    async def wait(self) -> None:
        if self._serving is not None:
            await asyncio.wait({self._serving})

    async def stop(self, deadline: float | None) -> None:
        if self._serving is None:
            self._sock.close()
            return
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            self._uvicorn.config.timeout_graceful_shutdown = max(1, int(left))
        self._uvicorn.should_exit = True  # uvicorn stops accepting, then waits for open requests
        await asyncio.wait({self._serving})
        if not self._serving.cancelled():
            self._serving.exception()  # retrieved: a failed uvicorn was reported by its own log


class HttpFrontend(UvicornFrontend):
    """KServe v2 over HTTP/REST, bound to ``--http-address``/``--http-port``."""

    name = "HTTPService"

    def __init__(self, server: Server) -> None:
        options = server.options
        self.restricted = server.http_restrictions
        app = create_app(server)
        super().__init__(
            server,
            app,
            options.http_address,
            options.http_port,
            service="HTTP",
            reuse_port=options.reuse_http_port,
            direct=direct_frontend(app, options),
        )


class SagemakerFrontend(UvicornFrontend):
    """Triton's SageMaker routes (``sagemaker.py``) on ``--sagemaker-port``, at the HTTP address."""

    name = "Sagemaker HTTPService"

    def __init__(self, server: Server) -> None:
        options = server.options
        try:
            app: ASGIApp = SagemakerApp(server)
        except TritonError as exc:
            raise FrontendError(exc.message) from None
        if server.http_restrictions:
            app = RestrictedApi(app, server.http_restrictions, sagemaker_group)
        super().__init__(server, app, options.http_address, options.sagemaker_port, service="Sagemaker HTTP")


class VertexFrontend(UvicornFrontend):
    """Triton's Vertex AI routes (``vertex.py``) on ``--vertex-ai-port``, at the HTTP address."""

    name = "Vertex AI HTTPService"

    def __init__(self, server: Server) -> None:
        options = server.options
        try:
            vertex = VertexApp(server, options.vertex_ai_default_model)
        except TritonError as exc:
            raise FrontendError(exc.message) from None
        app: ASGIApp = vertex
        if server.http_restrictions:
            # The health route is the health group, as Triton's Vertex AI server checks
            # it (26.04); predict and redirected requests reach the KServe application,
            # which checks the group of the endpoint they are readdressed to.
            app = RestrictedApi(app, server.http_restrictions, vertex.group)
        super().__init__(server, app, options.http_address, options.vertex_ai_port, service="Vertex AI HTTP")
