"""``--frontend-workers N``: N processes serve the HTTP and gRPC ports; this one runs the models.

``WorkerPool`` is the front end that ``tritonpy serve`` runs in the core process
in place of HTTP and gRPC when N > 1. It binds both ports (so a busy port is the
same one line as ever), starts N worker processes (``worker.py``) that all accept
on those sockets, and answers them:

- **inference** on each worker's link (``wire``): a request is decoded into the
  SDK's ``InferenceRequest`` and handed to ``Server.start_infer`` or
  ``Server.submit``, exactly as an in-process front end does; so there is one
  scheduler per model (batches form across all workers' requests), sequences
  meet their slot whatever connection they come on, and statistics, traces and
  metrics are the one server's;
- **everything else** on control connections (``control``), answered by threads;
  a shared-memory region registered through one worker serves requests on all.

A worker that dies is started again on the same sockets (its clients' connections
and its requests in flight fail; no other worker's do); so is one that hangs: a
worker whose link has been quiet for ``HEARTBEAT_S`` is sent a ``PING``, and one
that then stays silent past its deadline (``TRITONPY_FRONTEND_WORKER_TIMEOUT``,
``HANG_TIMEOUT_S`` seconds unless set) is killed, and so started again. If
starting one fails five times in a row, the server stops (with status 1). The
workers end when this process tells them to (after it drained) or when it is
gone: a worker never serves without its core.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import marshal
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceRequest, InferenceResponse, TritonError

from ..bridges import call_soon_threadsafe
from ..frontends import Frontend, FrontendError
from ..ipc.link import Link
from ..ports import listen, port_problem
from . import wire
from .control import ControlServer
from .worker import BOOT_ENV, Boot

if TYPE_CHECKING:
    from ..server import Server

log = logging.getLogger("tritonpy")

#: Seconds a worker may take from its start until it serves.
START_TIMEOUT = 60.0
#: Failed starts of workers in a row after which the pool gives up (and the server stops).
MAX_FAILED_STARTS = 5
#: Seconds of a quiet link after which the core asks a worker whether its loop still turns.
HEARTBEAT_S = 5.0
#: Seconds a worker may go without a frame (its answer to the ``PING`` included) before it
#: is taken for hung, killed and started again; ``TRITONPY_FRONTEND_WORKER_TIMEOUT`` overrides.
HANG_TIMEOUT_S = 30.0
TIMEOUT_ENV = "TRITONPY_FRONTEND_WORKER_TIMEOUT"


class _CannotServe(FrontendError):
    """A worker's own front ends cannot serve (its one line): starting it again will not help."""


@dataclass(eq=False)
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    ready: asyncio.Future[None]
    started: float = field(default_factory=time.monotonic)
    link: Link | None = None
    release: wire.Releaser | None = None
    #: Requests in the core by their id on the link (to cancel them, or fail them if the worker dies).
    inflight: dict[int, InferenceRequest] = field(default_factory=dict)
    #: When a frame last came from the worker (``time.monotonic``); the heartbeat reads it.
    heard: float = field(default_factory=time.monotonic)


class WorkerPool(Frontend):
    """HTTP and gRPC served by ``count`` worker processes (see the module's description)."""

    name = "front-end workers"

    def __init__(self, server: Server, count: int) -> None:
        self._server = server
        self._count = count
        self.hang_timeout = _hang_timeout()
        options = server.options
        self.restricted = {**server.http_restrictions, **server.grpc_restrictions}
        #: (service, address, port, socket), bound here, in the order single-process serving binds them.
        self._sockets: list[tuple[str, str, int, socket.socket]] = []
        try:
            if options.allow_grpc:
                self._bind_grpc()
            if options.allow_http:
                where = f"{options.http_address}:{options.http_port}"
                try:
                    sock = listen(options.http_address, options.http_port, options.reuse_http_port)
                except OSError as exc:
                    raise FrontendError(
                        f"failed to start HTTP service at {where}: {exc.strerror or exc}"
                    ) from None
                self._sockets.append(("HTTPService", options.http_address, options.http_port, sock))
        except FrontendError:
            self._close_sockets()
            raise
        self._workers: dict[int, _Worker] = {}
        self._control: ControlServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._failed_starts = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._gave_up: asyncio.Future[None] | None = None

    def _bind_grpc(self) -> None:
        options = self._server.options
        where = f"{options.grpc_address}:{options.grpc_port}"
        if options.grpc_implementation != "tritonpy":
            raise FrontendError(
                "--frontend-workers needs the native gRPC transport (--grpc-implementation tritonpy, "
                "the default); grpcio's server cannot share a listening socket between processes"
            )
        from ..grpc.frontend import check_limits
        from ..grpc.native import tls_context

        try:
            check_limits(options)
            tls_context(options)  # bad TLS files are one line here, not a worker that cannot start
            sock = listen(options.grpc_address, options.grpc_port, options.reuse_grpc_port)
        except ValueError as exc:
            raise FrontendError(f"failed to start GRPC service at {where}: {exc}") from None
        except OSError as exc:
            raise FrontendError(
                port_problem(options) or f"failed to start GRPC service at {where}: {exc.strerror or exc}"
            ) from None
        self._sockets.append(("GRPCInferenceService", options.grpc_address, options.grpc_port, sock))

    def services(self) -> list[tuple[str, list[tuple[str, int]]]]:
        return [(service, [(address, port)]) for service, address, port, _ in self._sockets]

    def ports(self) -> list[tuple[str, int]]:
        return [(address, port) for _, address, port, _ in self._sockets]

    def _close_sockets(self) -> None:
        for *_, sock in self._sockets:
            sock.close()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._gave_up = loop.create_future()
        self._control = ControlServer(self._control_calls())
        started = await asyncio.gather(*(self._start(i) for i in range(self._count)), return_exceptions=True)
        failed = [r for r in started if isinstance(r, BaseException)]
        if failed:
            await self.stop(time.monotonic() + 1.0)
            error = failed[0]
            raise error if isinstance(error, FrontendError) else FrontendError(str(error))
        log.info(
            "%d front-end workers serve: pids %s",
            self._count,
            ", ".join(str(w.process.pid) for w in self._workers.values()),
        )
        self._keep(self._heartbeat())

    def _keep(self, coro: Any) -> None:
        """Run ``coro`` as a task of the pool's (cancelled when it stops)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _heartbeat(self) -> None:
        """Ping workers whose link went quiet; kill one silent past ``hang_timeout`` (its
        link then closes, and ``_closed`` starts it again as it would after a crash)."""
        interval = min(HEARTBEAT_S, self.hang_timeout / 3)
        while not self._stopping:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for worker in list(self._workers.values()):
                link = worker.link
                if link is None or link.closed or not worker.ready.done() or self._stopping:
                    continue
                quiet = now - worker.heard
                if quiet >= self.hang_timeout:
                    log.error(
                        "front-end worker %d (pid %d) has not answered the core for %.0f s; killing it",
                        worker.index,
                        worker.process.pid,
                        quiet,
                    )
                    worker.heard = now  # once: its link closes when the process is gone
                    worker.process.kill()
                elif quiet >= interval:
                    link.send(*wire.encode_ping())

    async def _start(self, index: int) -> None:
        """Start worker ``index``; one that dies or hangs before it serves is started again,
        up to ``MAX_FAILED_STARTS`` failures in a row; one that says it cannot serve is not."""
        while True:
            if self._stopping:  # a restart that was waiting when the server began to stop
                raise FrontendError(f"front-end worker {index} not started: the server is stopping")
            try:
                await self._spawn(index)
                self._failed_starts = 0
                return
            except _CannotServe:
                raise
            except FrontendError as exc:
                self._failed_starts += 1
                if self._failed_starts >= MAX_FAILED_STARTS or self._stopping:
                    raise
                log.warning("front-end worker %d did not start (%s); starting it again", index, exc)
                await asyncio.sleep(0.5)

    async def _spawn(self, index: int) -> None:
        server, loop, control = self._server, self._loop, self._control
        assert loop is not None and control is not None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        boot = Boot(
            index=index,
            options=server.options,
            control_path=control.path,
            link_fd=theirs.fileno(),
            listening=[(address, port, sock.fileno()) for _, address, port, sock in self._sockets],
            metadata=server.metadata(),
            log_state=server.log_settings.get(),
            cuda=server.memory.cuda_shared_memory,
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "tritonpy.workers.worker"],
            pass_fds=[theirs.fileno(), *(sock.fileno() for *_, sock in self._sockets)],
            env={**os.environ, BOOT_ENV: boot.encode()},
        )
        theirs.close()
        worker = _Worker(index, process, loop.create_future())
        self._workers[index] = worker
        try:
            link = await asyncio.wait_for(
                Link.open(
                    mine,
                    functools.partial(self._frames, worker),
                    functools.partial(self._closed, worker),
                ),
                START_TIMEOUT,
            )
            worker.link = link
            worker.release = wire.Releaser(link, loop)
            await asyncio.wait_for(asyncio.shield(worker.ready), START_TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError, FrontendError) as exc:
            process.kill()
            if worker.link is None:
                mine.close()  # the link never took it over
            await loop.run_in_executor(None, _reap, process, 5.0)
            if isinstance(exc, FrontendError):
                raise
            raise FrontendError(f"front-end worker {index} did not start: {exc or 'timed out'}") from None

    async def wait(self) -> None:
        assert self._gave_up is not None
        await self._gave_up

    async def stop(self, deadline: float | None) -> None:
        self._stopping = True
        seconds = 30.0 if deadline is None else max(0.0, deadline - time.monotonic())
        for worker in self._workers.values():
            if worker.link is not None and not worker.link.closed:
                worker.link.send(*wire.encode_stop(seconds))
            elif worker.process.poll() is None:
                # Being started again (no link yet, so no client yet): the STOP could not
                # reach it, and it would serve on after this process stopped waiting.
                worker.process.kill()
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(None, _reap, w.process, seconds + 2.0) for w in self._workers.values())
        )
        for task in self._tasks:
            task.cancel()
        self._close_sockets()
        if self._control is not None:
            self._control.close()

    # -- a worker's life -------------------------------------------------------------------

    def _closed(self, worker: _Worker, exc: Exception | None) -> None:
        """The worker's link closed: it exited, or is about to."""
        for request in worker.inflight.values():
            request.cancel()
        worker.inflight.clear()
        if self._control is not None:
            self._control.forget(worker.index)
        if not worker.ready.done():
            worker.ready.set_exception(
                FrontendError(f"front-end worker {worker.index} exited before it served")
            )
            return
        if self._stopping or self._workers.get(worker.index) is not worker:
            return
        self._keep(self._restart(worker))

    async def _restart(self, worker: _Worker) -> None:
        loop = asyncio.get_running_loop()
        code = await loop.run_in_executor(None, _reap, worker.process, 5.0)
        if self._stopping:
            return
        lived = time.monotonic() - worker.started
        log.error(
            "front-end worker %d (pid %d) exited with status %s after %.1f s; its requests in flight "
            "failed; starting it again",
            worker.index,
            worker.process.pid,
            code,
            lived,
        )
        if lived < 1.0:
            await asyncio.sleep(1.0)  # a worker that served and dies at once: no hot loop
        # A worker that served is always started again; only starts that fail in a row
        # (an install that cannot serve) stop the server.
        try:
            await self._start(worker.index)
        except FrontendError as exc:
            if self._stopping:
                return
            log.error(
                "front-end worker %d cannot be started again (%s); stopping the server", worker.index, exc
            )
            if self._gave_up is not None and not self._gave_up.done():
                self._gave_up.set_result(None)

    # -- inference ---------------------------------------------------------------------------

    def _frames(self, worker: _Worker, frames: list[bytes]) -> None:
        worker.heard = time.monotonic()
        for frame in frames:
            kind = frame[0]
            if kind == wire.INFER:
                self._infer(worker, frame)
            elif kind == wire.CANCEL:
                (rid,) = wire.decode_fields(frame)
                request = worker.inflight.get(rid)
                if request is not None:
                    request.cancel()
            elif kind == wire.READY:
                if not worker.ready.done():
                    worker.ready.set_result(None)
            elif kind == wire.FAILED:
                (message,) = wire.decode_fields(frame)
                if not worker.ready.done():
                    worker.ready.set_exception(_CannotServe(message))

    def _infer(self, worker: _Worker, frame: bytes) -> None:
        link, release = worker.link, worker.release
        assert link is not None and release is not None
        try:
            rid, mode, refusal, request = wire.decode_request(link, release, frame)
        except TritonError as exc:
            link.send(*wire.encode_refusal(marshal.loads(memoryview(frame)[1:])[0], exc))
            return
        worker.inflight[rid] = request
        try:
            if mode == wire.SINGLE:
                self._server.start_infer(request, functools.partial(self._one, worker, rid), refusal)
            else:
                self._server.submit(request, functools.partial(self._answer, worker, rid))
        except TritonError as exc:
            del worker.inflight[rid]
            link.send(*wire.encode_refusal(rid, exc))
        except Exception as exc:  # a bug: the client hears of it, the worker keeps serving
            del worker.inflight[rid]
            log.error("request %d failed: %s: %s", rid, type(exc).__name__, exc, exc_info=exc)
            link.send(*wire.encode_refusal(rid, TritonError.internal(f"{type(exc).__name__}: {exc}")))

    def _one(self, worker: _Worker, rid: int, response: InferenceResponse) -> None:
        self._answer(worker, rid, response, RESPONSE_COMPLETE_FINAL)

    def _answer(self, worker: _Worker, rid: int, response: InferenceResponse | None, flags: int) -> None:
        """A response, on whichever thread answered: encoded there, sent from the loop on
        its next turn (``bridges.call_soon_threadsafe``), also when answered on the loop's
        thread (a stub's answer is read there): the model's instance is released and its
        next queued request sent first, which keeps a busy model busy
        (bench/frontend_workers.md: c=8 +8-10 % throughput, 5-8 % less CPU per inference)."""
        link = worker.link
        if link is None or link.closed:
            return
        try:
            frame = wire.encode_answer(link, rid, flags, response)
        except (ValueError, BufferError, OSError):  # the worker died meanwhile: its arena is gone
            return
        assert self._loop is not None
        call_soon_threadsafe(self._loop, self._deliver, worker, rid, flags, frame)

    def _deliver(self, worker: _Worker, rid: int, flags: int, frame: tuple[bytes, bytes]) -> None:
        if flags & RESPONSE_COMPLETE_FINAL:
            worker.inflight.pop(rid, None)
        link = worker.link
        if link is not None and not link.closed:
            link.send(*frame)

    # -- control calls -------------------------------------------------------------------------

    def _control_calls(self) -> dict[str, Callable[..., Any]]:
        server = self._server
        regions = server.shared_memory
        return {
            "live": server.live,
            "ready": server.ready,
            "model_ready": self._model_ready,
            "model_metadata": server.model_metadata,
            "model_config": server.model_config,
            "model_config_proto": server.model_config_proto,
            "model_spec": server.model_spec,
            "is_decoupled": server.is_decoupled,
            "repository_index": server.repository_index,
            "load_model": server.load_model,
            "unload_model": server.unload_model,
            "model_statistics": server.model_statistics,
            "trace_settings": server.trace_settings,
            "log_get": server.log_settings.get,
            "log_update": self._log_update,
            "shm_register": regions.register,
            "shm_register_cuda": regions.register_cuda,
            "shm_unregister": functools.partial(self._unregister, "system", regions.unregister),
            "shm_unregister_cuda": functools.partial(self._unregister, "cuda", regions.unregister_cuda),
            "shm_status": regions.status,
            "shm_cuda_status": regions.cuda_status,
            "shm_describe": regions.describe,
        }

    def _model_ready(self, name: str, version: int | str | None) -> bool:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._server.model_ready_async(name, version), self._loop
        ).result()

    def _log_update(self, changes: dict[str, Any]) -> dict[str, Any]:
        state = self._server.log_settings.update(changes)
        assert self._control is not None
        self._control.broadcast(("log", state))
        return state

    def _unregister(self, kind: str, unregister: Callable[[str | None], None], name: str | None) -> None:
        unregister(name)
        assert self._control is not None
        self._control.broadcast(("shm_forget", kind, name))  # every worker forgets it before we answer


def _reap(process: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Wait for ``process`` to exit (killed after ``timeout`` s); its exit status."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        log.warning("front-end worker pid %d did not exit in time; killing it", process.pid)
        process.kill()
        return process.wait()


def _hang_timeout() -> float:
    """``HANG_TIMEOUT_S``, or the seconds ``TRITONPY_FRONTEND_WORKER_TIMEOUT`` gives (at least 1)."""
    text = os.environ.get(TIMEOUT_ENV, "")
    if not text:
        return HANG_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        raise FrontendError(f"{TIMEOUT_ENV} must be a number of seconds, got '{text}'") from None
    if not seconds >= 1.0:  # also NaN
        raise FrontendError(f"{TIMEOUT_ENV} must be at least 1 second, got '{text}'")
    return seconds


def create(server: Server) -> WorkerPool | None:
    """The front end ``serving`` runs in place of HTTP and gRPC with ``--frontend-workers`` > 1."""
    if not (server.options.allow_http or server.options.allow_grpc):
        return None
    return WorkerPool(server, server.options.frontend_workers)
