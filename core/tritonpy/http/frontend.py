"""The HTTP front end as ``tritonpy serve`` runs it (``frontends.Frontend``).

uvicorn with tritonpy's protocol (connection limits; inference answered without
an ASGI cycle) in front of the starlette application of ``app.py``, on a socket
bound when the front end is made.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import uvicorn

from ..frontends import Frontend, FrontendError
from ..ports import listen
from .app import create_app
from .protocol import direct_frontend, http_protocol
from .uvicorn_server import TRITON_HEADERS, UVICORN_LOGGING, FrontendServer

if TYPE_CHECKING:
    from ..server import Server


class HttpFrontend(Frontend):
    """KServe v2 over HTTP/REST, bound to ``--http-address``/``--http-port``."""

    name = "HTTPService"

    def __init__(self, server: Server) -> None:
        options = server.options
        self._where = (options.http_address, options.http_port)
        self.restricted = server.http_restrictions
        try:
            self._sock = listen(options.http_address, options.http_port, options.reuse_http_port)
        except OSError as exc:
            where = f"{options.http_address}:{options.http_port}"
            raise FrontendError(f"failed to start HTTP service at {where}: {exc.strerror or exc}") from None
        app = create_app(server)
        config = uvicorn.Config(
            app,
            http=http_protocol(options, direct=direct_frontend(app, options)),
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
