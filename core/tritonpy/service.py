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
from typing import TextIO

import uvicorn

from .server import Server

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
    await loop.run_in_executor(None, server.start)
    print(model_table(server), file=out, flush=True)
    failed = server.failed_models()
    if failed and options.exit_on_error:
        print(
            "error: model(s) failed to load and --exit-on-error is set: "
            + ", ".join(sorted({name for name, _, _ in failed})),
            file=out,
            flush=True,
        )
        await loop.run_in_executor(None, server.stop)
        return 1
    if not options.allow_http:
        print("error: no front end enabled (--allow-http=false)", file=out, flush=True)
        await loop.run_in_executor(None, server.stop)
        return 1
    from .http import create_app  # the front end imports starlette: only when serving

    config = uvicorn.Config(
        create_app(server),
        host=options.http_address,
        port=options.http_port,
        log_level="warning" if options.log_verbose == 0 else "info",
        access_log=options.log_verbose > 0,
        timeout_graceful_shutdown=max(1, int(options.exit_timeout_secs)),
        lifespan="off",
    )
    try:
        sock = _listen(options.http_address, options.http_port)
    except OSError as exc:
        print(
            f"error: failed to start HTTP service at {options.http_address}:{options.http_port}: "
            f"{exc.strerror or exc}",
            file=out,
            flush=True,
        )
        await loop.run_in_executor(None, server.stop)
        return 1
    http = _FrontendServer(config)
    stop = asyncio.Event()
    _on_signals(loop, stop)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    print(f"Started HTTPService at {options.http_address}:{options.http_port}", file=out, flush=True)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    log.info("shutting down: draining in-flight requests")
    http.should_exit = True  # uvicorn stops accepting, then waits for open requests
    await serving
    stopping.cancel()
    await loop.run_in_executor(None, server.stop)
    print("Server stopped", file=out, flush=True)
    return 0


def run(server: Server) -> int:
    """Run ``serve`` on uvloop when it is installed, else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        log.debug("event loop: asyncio (uvloop not installed)")
        return asyncio.run(serve(server))
    log.debug("event loop: uvloop %s", getattr(uvloop, "__version__", "?"))
    return uvloop.run(serve(server))
