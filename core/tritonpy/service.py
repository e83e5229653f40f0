"""Run a ``Server`` behind its network front ends on one event loop.

Loads the repository, prints the model table as Triton does, serves HTTP
until SIGINT/SIGTERM, then drains: the front ends stop taking connections,
in-flight requests finish (up to ``exit_timeout_secs``), models unload.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

import uvicorn

from .server import Server

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("tritonpy")


def model_table(server: Server) -> str:
    """The table of models, versions and states Triton prints at start."""
    rows = [("Model", "Version", "Status")]
    for entry in server.repository_index():
        status = entry["state"]
        if entry.get("reason") and status != "READY":
            status += ": " + entry["reason"].replace("\n", " ")
        rows.append((entry["name"], entry.get("version", "-"), status))
    return format_table(rows)


def format_table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line]
    for n, row in enumerate(rows):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
        if n == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


class _FrontendServer(uvicorn.Server):
    """uvicorn's server minus its signal handling: ``serve`` below owns the signals.

    uvicorn re-raises a captured SIGTERM once it has drained, which would end the
    process before the models are unloaded and the backends finalized.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(address: str, port: int) -> socket.socket:
    """A listening socket, bound here so a busy port is a one-line error, not a traceback."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.create_server((address, port), family=family, backlog=2048)
    sock.setblocking(False)
    return sock


def _on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no such support
            return


async def serve(server: Server, out: TextIO = sys.stdout) -> int:
    """Start ``server``, serve until a signal, shut down cleanly. Returns the exit code."""
    options = server.options
    loop = asyncio.get_running_loop()

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    async def give_up(text: str) -> int:
        say(f"error: {text}")
        await loop.run_in_executor(None, server.stop)
        return 1

    await loop.run_in_executor(None, server.start)
    say(model_table(server))
    failed = server.failed_models()
    if failed and options.exit_on_error:
        names = ", ".join(sorted({name for name, _, _ in failed}))
        return await give_up(f"model(s) failed to load and --exit-on-error is set: {names}")
    if not options.allow_http and not options.allow_grpc:
        return await give_up("no front end enabled (--allow-http=false and --allow-grpc=false)")

    # Bind everything before serving anything, so a busy port is one clear line.
    grpc_server = None
    if options.allow_grpc:
        from .grpc import create_grpc_server  # imports grpc: only when serving it

        where = f"{options.grpc_address}:{options.grpc_port}"
        try:
            grpc_server, _ = create_grpc_server(server)
        except (OSError, ValueError) as exc:
            return await give_up(f"failed to start GRPC service at {where}: {exc}")
    http = serving = None
    if options.allow_http:
        from .http import create_app  # imports starlette: only when serving it

        try:
            sock = _listen(options.http_address, options.http_port)
        except OSError as exc:
            if grpc_server is not None:
                await grpc_server.stop(None)
            where = f"{options.http_address}:{options.http_port}"
            return await give_up(f"failed to start HTTP service at {where}: {exc.strerror or exc}")
        config = uvicorn.Config(
            create_app(server),
            log_level="warning" if options.log_verbose == 0 else "info",
            access_log=options.log_verbose > 0,
            timeout_graceful_shutdown=max(1, int(options.exit_timeout_secs)),
            lifespan="off",
        )
        http = _FrontendServer(config)

    metrics_frontend = None
    if options.allow_metrics:
        from .metrics import Metrics, MetricsConfig, create_metrics_app

        address = options.metrics_address or options.http_address
        where = f"{address}:{options.metrics_port}"
        try:
            metrics = Metrics(
                server.loaded_versions(),
                MetricsConfig.parse(options.metrics_config),
                cpu=options.allow_cpu_metrics,
                gpu=options.allow_gpu_metrics,
                cache=server.cache,
                custom=server.custom_metrics,
            )
            metrics_sock = _listen(address, options.metrics_port)
        except (OSError, ValueError) as exc:
            if grpc_server is not None:
                await grpc_server.stop(None)
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return await give_up(f"failed to start Metrics service at {where}: {text}")
        metrics_frontend = _FrontendServer(
            uvicorn.Config(create_metrics_app(metrics), log_level="warning", access_log=False, lifespan="off")
        )

    stop = asyncio.Event()
    _on_signals(loop, stop)
    waiting: set[asyncio.Task[object]] = {asyncio.create_task(stop.wait())}
    if grpc_server is not None:
        await grpc_server.start()
        say(f"Started GRPCInferenceService at {options.grpc_address}:{options.grpc_port}")
        waiting.add(asyncio.create_task(grpc_server.wait_for_termination()))
    if http is not None:
        serving = asyncio.create_task(http.serve(sockets=[sock]))
        while not http.started and not serving.done():
            await asyncio.sleep(0.01)
        say(f"Started HTTPService at {options.http_address}:{options.http_port}")
        waiting.add(serving)
    background: list[asyncio.Task[object]] = []
    if metrics_frontend is not None:
        metrics_serving = asyncio.create_task(metrics_frontend.serve(sockets=[metrics_sock]))
        while not metrics_frontend.started and not metrics_serving.done():
            await asyncio.sleep(0.01)
        say(f"Started Metrics Service at {where}")
        background += [metrics_serving, asyncio.create_task(_poll(metrics, options.metrics_interval_ms))]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)

    log.info("shutting down: draining in-flight requests")
    if metrics_frontend is not None:
        metrics_frontend.should_exit = True
    draining = []
    if http is not None and serving is not None:
        http.should_exit = True  # uvicorn stops accepting, then waits for open requests
        draining.append(serving)
    if grpc_server is not None:
        draining.append(asyncio.ensure_future(grpc_server.stop(options.exit_timeout_secs)))
    await asyncio.gather(*draining, return_exceptions=True)
    for task in [*waiting, *background]:
        task.cancel()
    await loop.run_in_executor(None, server.stop)
    say("Server stopped")
    return 0


async def _poll(metrics: Metrics, interval_ms: int) -> None:
    """Refresh the per-interval gauges (CPU, GPU) until cancelled."""
    while True:
        await asyncio.get_running_loop().run_in_executor(None, metrics.poll)
        await asyncio.sleep(max(interval_ms, 10) / 1000)


def run(server: Server) -> int:
    """Run ``serve`` on uvloop when it is installed, else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        log.debug("event loop: asyncio (uvloop not installed)")
        return asyncio.run(serve(server))
    log.debug("event loop: uvloop %s", getattr(uvloop, "__version__", "?"))
    return uvloop.run(serve(server))
