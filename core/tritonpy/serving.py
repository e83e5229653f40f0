"""Run a ``Server`` behind its network front ends on one event loop.

Loads the repository, prints the model table as Triton does, binds every
registered front end (``frontends.registered``: gRPC, HTTP, metrics, then those
of installed packages) before any serves, serves until SIGINT/SIGTERM, then
drains: the front ends refuse new requests while in-flight ones finish (up to
``exit_timeout_secs``), stop taking connections, and the models unload.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .frontends import BUILTIN, Frontend, FrontendError, FrontendFactory, registered
from .http import uvicorn_surface
from .ports import port_problem
from .server import Server

log = logging.getLogger("tritonpy")


def model_table(server: Server) -> str:
    """The table of models, versions and states Triton prints at start (under model
    namespacing each model as ``<repository>::<name>``, as Triton prints it)."""
    rows = [("Model", "Version", "Status")]
    for entry in server.manager.repository_index(keys=True):
        if "state" not in entry:  # never loaded (explicit mode): Triton leaves it out
            continue
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

    # Before any model loads (a load can take minutes): a port that cannot be
    # bound, or no front end at all, is one line now rather than after the load.
    if not (options.allow_http or options.allow_grpc or options.allow_sagemaker or options.allow_vertex_ai):
        say("error: no front end enabled (--allow-http=false and --allow-grpc=false)")
        return 1
    problem = None
    if options.allow_grpc and options.grpc_implementation == "grpcio":
        from .grpc.frontend import grpcio_problem

        problem = grpcio_problem(options)  # grpcio is an extra: say how to install it
    problem = problem or port_problem(options)
    if problem is None and (options.allow_http or options.allow_metrics):
        try:
            uvicorn_surface.check()
        except RuntimeError as exc:
            problem = str(exc)
    if problem is not None:
        say(f"error: {problem}")
        return 1

    # Signals are handled from the start: one that comes while models load stops
    # the server cleanly (models still loading finish, the rest are skipped).
    stop = asyncio.Event()
    _on_signals(loop, stop)
    server.event_loop = loop  # it runs until the server stopped: backends may watch descriptors on it
    loading = _in_thread(loop, server.start)
    stopping: asyncio.Future[Any] = asyncio.create_task(stop.wait())
    await asyncio.wait({loading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not loading.done():
        deadline = time.monotonic() + options.exit_timeout_secs
        log.info("stopping while models load")
        server.drain()
        try:
            await asyncio.wait_for(asyncio.shield(loading), _left(deadline))
        except asyncio.TimeoutError:
            log.warning("models still loading after --exit-timeout-secs; exiting without unloading them")
            say("Server stopped")
            return 0
        await loop.run_in_executor(None, server.stop, _left(deadline))
        say("Server stopped")
        return 0
    stopping.cancel()
    loading.result()  # a failure to start propagates
    say(model_table(server))
    failed = server.failed_models()
    if failed and options.exit_on_error:
        names = ", ".join(sorted({name for name, _, _ in failed}))
        return await give_up(f"model(s) failed to load and --exit-on-error is set: {names}")

    # Bind everything before serving anything, so a busy port is one clear line.
    frontends: list[Frontend] = []
    for name, factory in _factories(options.frontend_workers):
        try:
            frontend = factory(server)
        except FrontendError as exc:
            for bound in frontends:
                await bound.stop(None)
            return await give_up(str(exc))
        except Exception as exc:
            if (name, factory) in BUILTIN or name == "workers":
                raise
            # A third-party front end's bug: one bad package must not keep the server from serving.
            log.error("front end '%s' is not started: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
            continue
        if frontend is not None:
            frontends.append(frontend)

    signalled = asyncio.create_task(stop.wait())
    waiting: set[asyncio.Task[object]] = {signalled}
    for n, frontend in enumerate(frontends):
        try:
            await frontend.start(server, loop)
        except FrontendError as exc:  # front-end workers that could not start
            await asyncio.gather(*(f.stop(None) for f in frontends[n:]), return_exceptions=True)
            await asyncio.gather(*(f.stop(time.monotonic()) for f in frontends[:n]), return_exceptions=True)
            return await give_up(str(exc))
        for service, ports in frontend.services():
            where = ", ".join(f"{address}:{port}" for address, port in ports)
            say(f"Started {service} at {where}" if where else f"Started {service}")
        if frontend.restricted:
            log.debug("%s restricts %s", frontend.name, ", ".join(sorted(frontend.restricted)))
        waiting.add(asyncio.create_task(frontend.wait()))
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    # A front end that stopped serving by itself (front-end workers that cannot be
    # started again): the server shuts down as after a signal, and exits with 1 so a
    # supervisor (systemd, Kubernetes) sees a failure and starts it again.
    code = 0 if signalled in done else 1

    # One deadline for the whole shutdown, from the signal on. First drain: the
    # front ends stay up and refuse new requests (UNAVAILABLE, not ready) while
    # those in flight finish; only then stop the transports (grpc.aio's stop
    # cancels calls it received but had not handed to a handler yet).
    deadline = time.monotonic() + options.exit_timeout_secs
    log.info("Waiting for in-flight requests to complete.")  # Triton's words (ops tooling greps them)
    server.drain()
    if not await loop.run_in_executor(None, server.wait_idle, _left(deadline)):
        log.warning("requests still in flight after --exit-timeout-secs; stopping anyway")
    # Clients still sending get refusals (and stop or retry elsewhere); wait until
    # they went quiet, so stopping the transports cuts no call that just arrived.
    while time.monotonic() - server.last_refused < _QUIET_SECONDS and _left(deadline) > 0:
        await asyncio.sleep(0.05)
    await asyncio.gather(*(f.stop(deadline) for f in frontends), return_exceptions=True)
    for task in waiting:
        task.cancel()
    await loop.run_in_executor(None, server.stop, _left(deadline))
    say("Server stopped")
    return code


def _factories(workers: int) -> list[tuple[str, FrontendFactory]]:
    """The registered front ends; with ``--frontend-workers`` above 1, HTTP and gRPC are
    served by the worker processes of one ``WorkerPool`` instead."""
    found = registered()
    if workers <= 1:
        return found
    from .workers.pool import create

    return [("workers", create), *((name, f) for name, f in found if name not in ("grpc", "http"))]


#: How long no new request may have been refused before the transports stop
#: (generous: on a loaded machine a call can wait that long to reach a handler).
_QUIET_SECONDS = 1.0


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _in_thread(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> asyncio.Future[object]:
    """Run ``fn`` on a daemon thread: a model load that never ends must not keep
    the process from exiting (the default executor's threads are joined at exit)."""
    future: asyncio.Future[object] = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, None, exc)
            return
        loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="tritonpy-start", daemon=True).start()
    return future


def run(server: Server) -> int:
    """Run ``serve`` on uvloop when it is installed, else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        log.debug("event loop: asyncio (uvloop not installed)")
        code = asyncio.run(serve(server))
    else:
        log.debug("event loop: uvloop %s", getattr(uvloop, "__version__", "?"))
        code = uvloop.run(serve(server))
    _exit_past_stuck_threads(code)
    return code


def _exit_past_stuck_threads(code: int) -> None:
    """Exit now if a thread that the interpreter would wait for is still running.

    A model whose load or execute never returns keeps a non-daemon thread alive
    (thread pools are joined at exit); the shutdown deadline has passed by then,
    so run the exit hooks (backends remove their shared memory there) and go.
    """
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not stuck:
        return
    log.warning("exiting with %d thread(s) still busy: %s", len(stuck), ", ".join(t.name for t in stuck))
    atexit._run_exitfuncs()  # the hooks a normal exit would run
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
