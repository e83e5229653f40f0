"""Real front ends in-process for tests: uvicorn and gRPC (native or grpc.aio), each on a loop thread."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import tritonpy
import uvicorn
from tritonpy.grpc import create_grpc_server
from tritonpy.http import create_app
from tritonpy.http.protocol import Implementation, direct_frontend, http_protocol
from tritonpy.http.uvicorn_server import TRITON_HEADERS
from tritonpy_serverprocess import free_port
from tritonpy_testbackend import TestBackend


class GrpcServer:
    """gRPC (``--grpc-implementation``) serving ``server`` from its own thread and loop."""

    def __init__(self, server: tritonpy.Server) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.aio, self.port = asyncio.run_coroutine_threadsafe(self._create(), self.loop).result(30)
        self.url = f"127.0.0.1:{self.port}"

    async def _create(self):  # type: ignore[no-untyped-def]
        aio, port = create_grpc_server(self.server)
        await aio.start()
        return aio, port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.aio.stop(1), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def start_grpc(repos: list[Path], **options: object) -> tuple[tritonpy.Server, GrpcServer]:
    server = tritonpy.Server(
        model_repository=repos, grpc_address="127.0.0.1", grpc_port=free_port(), **options
    )
    server.backends.register("testbk", TestBackend())
    server.start()
    return server, GrpcServer(server)


class LiveServer:
    """The HTTP front end as ``tritonpy serve`` runs it (its protocol class and
    limits), on uvicorn in a thread; ``http`` picks the implementation; without
    ``direct`` inference requests go through the ASGI application too."""

    def __init__(self, server: tritonpy.Server, http: Implementation = "auto", direct: bool = True) -> None:
        self.server = server
        self.port = free_port()
        self.url = f"127.0.0.1:{self.port}"
        app = create_app(server)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            http=http_protocol(
                server.options, http, direct_frontend(app, server.options) if direct else None
            ),
            log_level="warning",
            lifespan="off",
            **TRITON_HEADERS,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._uvicorn.serve()), daemon=True)

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{self.url}/v2/health/live", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        raise RuntimeError("HTTP server did not come up")

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)
