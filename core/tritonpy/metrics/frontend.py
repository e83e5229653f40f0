"""The metrics front end as ``tritonpy serve`` runs it (``frontends.Frontend``).

Prometheus text on ``--metrics-port`` (at ``--metrics-address``, else the HTTP
address), read from the server's current models at each scrape; the CPU and GPU
gauges are polled every ``--metrics-interval-ms``. Its end does not end serving.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import uvicorn

from ..frontends import Frontend, FrontendError
from ..http.protocol import http_protocol
from ..http.uvicorn_server import TRITON_HEADERS, UVICORN_LOGGING, FrontendServer
from ..ports import listen
from . import Metrics, MetricsConfig, create_metrics_app

if TYPE_CHECKING:
    from ..server import Server


def server_metrics(server: Server) -> Metrics:
    """Triton's metrics of ``server`` as its options ask for them (``ValueError``: a bad
    ``--metrics-config``)."""
    options = server.options
    return Metrics(
        server.loaded_versions,  # read at every scrape: the current models
        MetricsConfig.parse(options.metrics_config),
        cpu=options.allow_cpu_metrics,
        gpu=options.allow_gpu_metrics,
        cache=server.cache,
        custom=server.custom_metrics,
        pinned=server.memory.pinned,
    )


class MetricsFrontend(Frontend):
    """Triton's metrics on their own port."""

    name = "Metrics Service"

    def __init__(self, server: Server) -> None:
        options = server.options
        address = options.metrics_address or options.http_address
        self._where = (address, options.metrics_port)
        self._interval_ms = options.metrics_interval_ms
        try:
            self._metrics = server_metrics(server)
            self._sock = listen(address, options.metrics_port)
        except (OSError, ValueError) as exc:
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            where = f"{address}:{options.metrics_port}"
            raise FrontendError(f"failed to start Metrics service at {where}: {text}") from None
        self._uvicorn = FrontendServer(
            uvicorn.Config(
                create_metrics_app(self._metrics),
                http=http_protocol(options),  # the same head limits: it shares the event loop
                **UVICORN_LOGGING,
                **TRITON_HEADERS,
                lifespan="off",
            )
        )
        self._tasks: list[asyncio.Task[None]] = []

    def ports(self) -> list[tuple[str, int]]:
        return [self._where]

    async def start(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self._tasks.append(await self._uvicorn.serve_started(self._sock, loop))
        self._tasks.append(loop.create_task(self._poll()))

    async def _poll(self) -> None:
        """Refresh the per-interval gauges (CPU, GPU) until cancelled."""
        while True:
            await asyncio.get_running_loop().run_in_executor(None, self._metrics.poll)
            await asyncio.sleep(max(self._interval_ms, 10) / 1000)

    async def stop(self, deadline: float | None) -> None:
        if not self._tasks:
            self._sock.close()
            return
        self._uvicorn.should_exit = True
        serving, *others = self._tasks
        for task in others:
            task.cancel()
        # A scrape in progress may finish, briefly: the front ends that clients wait on
        # drain meanwhile, and the models unload only after every front end stopped.
        left = _GRACE if deadline is None else min(_GRACE, max(0.0, deadline - time.monotonic()))
        await asyncio.wait({serving}, timeout=left)
        serving.cancel()


#: How long a stopping metrics front end waits for its open scrapes.
_GRACE = 1.0
