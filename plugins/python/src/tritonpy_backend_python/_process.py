"""The server's side of one stub process: start it, run batches in it, survive its death.

Each model instance has its own stub (a separate interpreter), so pure-Python
models run in parallel and a crash, a hang past ``EXECUTE_TIMEOUT_SECONDS``
or a leak stays inside it: the requests it held fail with an error naming the
instance, and the stub is started again with the model re-initialised.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import itertools
import logging
import os
import queue
import resource
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from triton_python_backend_utils import _cuda
from triton_python_backend_utils._device import DeviceLink
from triton_python_backend_utils._wire import Arena, FrameReader, Link, remove_spills, shm_dir
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DeviceMemory,
    ExecuteComplete,
    InferenceRequest,
    InferenceResponse,
    TritonError,
)

from ._convert import (
    bls_request_from_wire,
    bls_wants_host,
    execute_error,
    request_to_wire,
    response_from_wire,
    response_to_wire,
    strip_frames,
)
from ._environment import StubEnvironment
from ._services import ServerServices

log = logging.getLogger("tritonpy.backend.python")

#: Shared-memory files and stub processes of this server not yet removed or
#: ended. Whatever is left at interpreter exit (a signal while a model loads, a
#: finalize cut short) is removed then, so nothing outlives the server.
_LEFT_FILES: set[str] = set()
_LEFT_PROCS: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _remove_leftovers() -> None:
    for proc in list(_LEFT_PROCS):
        if proc.poll() is None:
            proc.kill()
    for path in list(_LEFT_FILES):
        try:
            os.unlink(path)
        except OSError:
            pass
    # Tensors' files of their own that no stub read (``_wire.Arena.spill``).
    remove_spills(os.path.join(shm_dir(), f"tritonpy-{os.getpid()}"))
    _LEFT_PROCS.clear()
    _LEFT_FILES.clear()


#: Stubs still starting (their model in ``initialize`` or ``auto_complete_config``).
_STARTING: set[subprocess.Popen[bytes]] = set()
_exit_hook = threading.Lock()
_exit_hook_set = False


def _end_starting_stubs() -> None:
    """At interpreter exit, before its non-daemon threads are joined: end stubs still
    starting. The threads waiting for them (a thread pool loading models, up to
    ``stub-timeout-seconds``) would otherwise hold the exit back, and ``atexit``
    (which removes their files) would run only after. Their models could not be
    served anyway: the main thread is done. Stubs that serve are left to finalize
    and to ``atexit``."""
    for proc in list(_STARTING):
        if proc.poll() is None:
            proc.kill()


def _hook_exit() -> None:
    """Register ``_end_starting_stubs`` once, when the first stub starts: after the
    thread pools of the loading code registered theirs, so it runs before them
    (those hooks run last-registered first). ``threading._register_atexit`` is the
    interpreter's hook for exactly this (``concurrent.futures`` uses it); private,
    so only where it exists."""
    global _exit_hook_set
    with _exit_hook:
        if _exit_hook_set:
            return
        _exit_hook_set = True
        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            try:
                register(_end_starting_stubs)
            except RuntimeError:  # the interpreter is already exiting
                pass


#: How often a wait for the stub's control answer checks that the stub still runs.
_CONTROL_POLL_S = 0.2


@dataclass
class StubSettings:
    """How a model's stubs run (from the backend config and model parameters)."""

    environment: StubEnvironment
    shm_bytes: int = 64 << 20
    start_timeout_s: float = 120.0
    #: 0: no limit. Past it the stub is killed and restarted.
    execute_timeout_s: float = 0.0
    #: 0: no limit. The stub's address-space limit (RLIMIT_AS) in MiB.
    memory_limit_mb: int = 0
    #: Whether a model's exception reaches the client with its frames (Triton's format).
    error_frames: bool = True
    #: Bytes of each side's device arena per GPU for GPU tensors (CUDA IPC); 0: none
    #: (GPU tensors cross as host data). Used only with a GPU and cuda-python.
    cuda_ipc_bytes: int = 64 << 20
    #: How many batches the core may have sent to a stub at once (the instance's
    #: ``pipeline_depth``): the stub runs them in order, the next one already read
    #: when one ends. 1: one at a time.
    pipeline_depth: int = 2


class _Batch:
    """A batch sent to the stub: a waiting ``execute`` (its event) or an
    ``execute_nowait`` (its ``complete``) receives the stub's answer."""

    __slots__ = ("complete", "event", "msg", "tokens")

    def __init__(self, tokens: list[int], complete: ExecuteComplete | None) -> None:
        self.complete = complete
        #: Only a waiting ``execute`` waits on it (an event costs a lock and a condition).
        self.event = threading.Event() if complete is None else None
        self.msg: dict[str, Any] | None = None
        self.tokens = tokens


#: How long a model's ``is_ready()`` may take before the check counts as "not ready".
READY_TIMEOUT_S = 5.0


class _ReadyCheck:
    """One readiness question to a stub; callers meanwhile wait for it and share its answer."""

    __slots__ = ("call", "event", "value")

    def __init__(self, call: int) -> None:
        self.call = call
        self.event = threading.Event()
        self.value = False


class StubProcess:
    """One model instance running in its own process."""

    def __init__(
        self,
        instance_name: str,
        model_file: Path,
        args: dict[str, str],
        outputs: list[str],
        settings: StubSettings,
        services: ServerServices,
    ) -> None:
        self.name = instance_name
        self._file = model_file
        self._args = args
        self._outputs = outputs
        self._settings = settings
        self._services = services
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # start/restart
        self._proc: subprocess.Popen[bytes] | None = None
        self._link: Link | None = None
        self._sock: socket.socket | None = None
        self._alive = False
        self._stopping = False
        self.is_async = False
        #: Whether the model defines ``is_ready`` (asked on readiness checks).
        self.has_is_ready = False
        self._ready_check: _ReadyCheck | None = None
        self._ready_lock = threading.Lock()
        self._batches: dict[int, _Batch] = {}
        self._open: dict[int, InferenceRequest] = {}
        self._bls: dict[int, InferenceRequest] = {}
        self._control: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._generation = 0
        #: Set when the stub is killed on purpose to be restarted (memory limit).
        self._recycled = False
        #: The current stub's address space (MiB) once its model initialised (None: unknown).
        self._start_mb: int | None = None
        #: Set once the current stub's death has been handled (its requests answered).
        self._gone = threading.Event()
        #: The instance's device memory (the core's, KIND_GPU): GPU outputs are copied there.
        self.device_memory: DeviceMemory | None = None
        #: Whether GPU tensors cross to and from the current stub through CUDA IPC.
        self.gpu = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the stub and initialise the model in it; TritonError if that fails."""
        with self._lock:
            if self._stopping:  # a restart racing the instance's finalize: stay down
                raise TritonError.unavailable(f"the stub of '{self.name}' is stopping")
            if not self._alive:
                self._spawn()

    def _launch(self) -> Link:
        """Start the process and its reader; nothing sent yet."""
        settings = self._settings
        tag = uuid.uuid4().hex[:12]
        paths = [os.path.join(shm_dir(), f"tritonpy-{os.getpid()}-{tag}-{end}") for end in ("in", "out")]
        # Registered before they exist: a file whose creation failed half-way, or
        # whose stub never starts, is removed at exit at the latest.
        _LEFT_FILES.update(paths)
        try:
            p2c = Arena(paths[0], settings.shm_bytes, True)
            c2p = Arena(paths[1], settings.shm_bytes, True)
        except OSError as exc:
            _unlink_paths(*paths)
            raise TritonError.unavailable(
                f"cannot create the shared memory of the stub of '{self.name}': {exc}"
            ) from None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = subprocess.Popen(
                [
                    settings.environment.python,
                    "-m",
                    "triton_python_backend_utils._stub",
                    str(theirs.fileno()),
                    p2c.path,
                    c2p.path,
                    # Not read: what ps and pgrep show, Triton's stub's name and the
                    # instance (``pgrep -f triton_python_backend_stub`` finds stubs).
                    "triton_python_backend_stub",
                    self.name,
                ],
                pass_fds=(theirs.fileno(),),
                env=settings.environment.env,
                cwd=str(self._file.parent),
                preexec_fn=_limits(settings.memory_limit_mb) if settings.memory_limit_mb else None,
                # Out of the server's process group: a Ctrl-C (SIGINT to the whole
                # foreground group) is the server's to handle; it finalizes and
                # ends its stubs, which also exit by themselves when it is gone.
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            _unlink(p2c, c2p)
            raise TritonError.unavailable(f"cannot start the stub of '{self.name}': {exc}") from None
        finally:
            theirs.close()
        _LEFT_PROCS.add(proc)
        _STARTING.add(proc)
        _hook_exit()
        self._proc = proc
        if self._stopping and proc.poll() is None:
            # stop() ran while this stub was being started (a restart after a
            # crash racing the instance's finalize): it would otherwise outlive it.
            proc.kill()
        # No descriptor is closed while a thread may be blocked on it (it could be
        # reused by the next stub's socket): the connection's closes with its last
        # reference, and ``ours`` — a descriptor of its own — only shuts the socket down.
        link = Link(Connection(os.dup(ours.fileno())), mine=p2c, theirs=c2p)
        self._proc, self._link, self._sock = proc, link, ours
        self._generation += 1
        self._control = queue.SimpleQueue()
        self._gone = threading.Event()
        generation = self._generation
        loop = self._services.event_loop()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._watch, loop, link, ours, generation)
                return link
            except RuntimeError:  # the loop is closed: a thread reads instead
                pass
        threading.Thread(
            target=self._read, args=(link, ours, generation), name=f"stub-{self.name}", daemon=True
        ).start()
        return link

    def _spawn(self) -> None:
        link = self._launch()
        try:
            # Only a KIND_GPU instance (it has the core's device memory) has use for CUDA
            # IPC: elsewhere a GPU output would be copied to the host anyway, which the
            # stub does itself, and the stub need not load cuda-python.
            wanted = self._settings.cuda_ipc_bytes > 0 and self.device_memory is not None
            cuda = _cuda.load() if wanted else None
            gpu_bytes = self._settings.cuda_ipc_bytes if cuda is not None else 0
            link.send({"op": "init", "file": str(self._file), "args": self._args, "gpu": gpu_bytes})
            reply = self._wait_control("initialize", self._settings.start_timeout_s)
        finally:
            _STARTING.discard(self._proc)
            _unlink(link.mine, link.theirs)
        if reply.get("error"):
            # Not alive yet: the reader neither logs this death nor restarts the stub.
            self._kill()
            raise TritonError.internal(self._client_text(reply["error"], "initialize"))
        self.is_async = bool(reply.get("async"))
        self.has_is_ready = bool(reply.get("is_ready"))
        # The stub maps the GPU tensors we send, and sends us its own, when it says so.
        self.gpu = bool(reply.get("gpu")) and cuda is not None
        if self.gpu:
            assert cuda is not None
            link.device = DeviceLink(link, cuda, gpu_bytes, wait_device=False)
        self._start_mb = self._measure_start()
        self._alive = True

    def _measure_start(self) -> int | None:
        """The fresh stub's address space, what a restart comes back to; warned about
        when it already fills most of STUB_MEMORY_LIMIT_MB."""
        limit_mb = self._settings.memory_limit_mb
        if not limit_mb or self._proc is None:
            return None
        start_mb = _address_space_mb(self._proc.pid)
        if start_mb is not None and start_mb >= limit_mb * _NEAR_LIMIT:
            log.warning(
                "the stub of '%s' starts with %d of its %d MiB (STUB_MEMORY_LIMIT_MB) of address space "
                "already used (it grows with the host's cores: a thread stack and buffers per core); "
                "raise the limit to leave its requests room",
                self.name,
                start_mb,
                limit_mb,
            )
        return start_mb

    def _wait_control(self, op: str, timeout: float) -> dict[str, Any]:
        """The stub's answer to ``op``. A stub that exits meanwhile ends the wait even
        when nothing reads its socket any more (its reader was the event loop, which
        ended: the interpreter exits and ``_end_starting_stubs`` ended the stub)."""
        deadline = time.monotonic() + timeout
        proc = self._proc
        while True:
            try:
                reply = self._control.get(timeout=min(_CONTROL_POLL_S, max(0.0, deadline - time.monotonic())))
                break
            except queue.Empty:
                if proc is not None and proc.poll() is not None:
                    reply = {"op": "died", "code": proc.returncode}
                    break
                if time.monotonic() >= deadline:
                    self._kill()
                    raise TritonError.unavailable(
                        f"the stub of '{self.name}' did not answer '{op}' within {timeout} s"
                    ) from None
        if reply.get("op") == "died":
            raise TritonError.unavailable(
                f"Stub process '{self.name}' is not healthy: it exited with {reply.get('code')} "
                f"while waiting for '{op}'"
            )
        return reply

    def stop(self, timeout: float = 30.0) -> None:
        """Let open requests finish and finalize the model, all within ``timeout``;
        then end the stub (killed if it has not finished by then, even stopped)."""
        self._stopping = True
        deadline = time.monotonic() + timeout
        while self._open and time.monotonic() < deadline and self._alive:
            time.sleep(0.01)
        link = self._link
        if self._alive and link is not None and time.monotonic() < deadline:
            try:
                link.send({"op": "fini"})
                reply = self._wait_control("fini", deadline - time.monotonic())
                if reply.get("error"):
                    log.warning("finalize of '%s' failed: %s", self.name, reply["error"])
            except (TritonError, OSError) as exc:
                log.warning("stopping '%s': %s", self.name, exc)
        self._kill()

    def _kill(self) -> None:
        self._alive = False
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            try:
                proc.wait(10)
                _LEFT_PROCS.discard(proc)
            except subprocess.TimeoutExpired:
                pass
        sock = self._sock
        if sock is not None:
            try:  # wakes the reader with EOF, even if a child of the stub holds the other end
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    # -- execute ------------------------------------------------------------------------------

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse | None] | None:
        if self._recycled:
            # The stub is being ended after it leaked to its memory limit: once it
            # is gone this batch goes to a fresh stub instead of failing with it.
            self._gone.wait(10)
        if not self._alive:
            self.start()  # restarted after a crash
        link, batch = self._send(requests, None)
        if self.is_async:
            return None
        event = batch.event
        assert event is not None
        timeout = self._settings.execute_timeout_s or None
        if not event.wait(timeout):
            log.error("'%s' did not finish execute within %s s; restarting its stub", self.name, timeout)
            self._kill()
            event.wait(10)
            raise self._failed(
                f"execute did not finish within EXECUTE_TIMEOUT_SECONDS={timeout:g}; the stub was restarted",
                TritonError.unavailable,
            )
        assert batch.msg is not None
        return self._outcome(link, batch, batch.msg)

    @property
    def nowait(self) -> bool:
        """Whether batches may go through ``execute_nowait``: not when a hung
        ``execute`` must be timed out (a waiting thread is the watchdog)."""
        return not self._settings.execute_timeout_s

    @property
    def pipeline_depth(self) -> int:
        """How many batches the core may send before the first is answered (the
        instance's ``pipeline_depth``): the setting for a synchronous ``execute``
        through ``execute_nowait``; 1 otherwise (an async model's batches are
        released as soon as they are sent)."""
        if self.is_async or not self.nowait:
            return 1
        return self._settings.pipeline_depth

    def execute_nowait(self, requests: list[InferenceRequest], complete: ExecuteComplete) -> None:
        """Send the batch and return; the reader thread calls ``complete`` with its
        answer. A stub that is restarting (after a crash, at its memory limit) is
        waited for on a thread of its own, never on the caller's."""
        if self._recycled or not self._alive:
            threading.Thread(
                target=self._execute_then_complete, args=(requests, complete), daemon=True
            ).start()
            return
        if self.is_async:
            self._send(requests, None)
            complete(None)  # answered through the senders
        else:
            self._send(requests, complete)

    def _execute_then_complete(self, requests: list[InferenceRequest], complete: ExecuteComplete) -> None:
        try:
            responses = self.execute(requests)
        except Exception as exc:
            complete(None, exc)
        else:
            complete(responses)

    def _post(self, link: Link, batch_id: int, batch: _Batch, descs: list[Any]) -> None:
        """Register ``batch`` and send it to the stub; marked when it waits there behind
        another (``pipeline_depth``), whose cancellation the stub then looks for first."""
        msg: dict[str, Any] = {"op": "exec", "b": batch_id, "reqs": descs}
        if self._batches:
            msg["p"] = 1
        self._batches[batch_id] = batch
        link.send(msg)

    def _send(
        self, requests: list[InferenceRequest], complete: ExecuteComplete | None
    ) -> tuple[Link, _Batch]:
        """Send a batch to the stub; its answer reaches ``complete`` (or the batch's event)."""
        link = self._link
        assert link is not None
        ids, outputs, opened = self._ids, self._outputs, self._open
        if len(requests) == 1:  # the common case: what follows, without its loops
            request = requests[0]
            token = next(ids)
            batch_id = next(ids)
            batch = _Batch([token], complete)
            try:
                desc = request_to_wire(link, request, token, outputs)
                opened[token] = request
                self._post(link, batch_id, batch, [desc])
            except OSError:
                self._batches.pop(batch_id, None)
                opened.pop(token, None)
                raise self._unhealthy() from None
            request.on_cancel(functools.partial(self._cancel, token))
            return link, batch
        tokens = [next(ids) for _ in requests]
        batch_id = next(ids)
        batch = _Batch(tokens, complete)
        try:
            descs = [
                request_to_wire(link, request, token, outputs) for request, token in zip(requests, tokens)
            ]
            # Registered before sending: a stub that dies from here on has the reader
            # answer them (``_died``).
            for request, token in zip(requests, tokens):
                opened[token] = request
            self._post(link, batch_id, batch, descs)
        except OSError:
            # The stub is gone (the reader may have finished with it already).
            self._batches.pop(batch_id, None)
            for token in tokens:
                opened.pop(token, None)
            raise self._unhealthy() from None
        cancel = self._cancel
        for request, token in zip(requests, tokens):
            request.on_cancel(functools.partial(cancel, token))
        return link, batch

    def _outcome(
        self, link: Link, batch: _Batch, msg: dict[str, Any]
    ) -> list[InferenceResponse | None] | None:
        """The responses of a synchronous model's batch from the stub's answer, or its error;
        the requests the model released with RESCHEDULE are handed back to the core."""
        if msg.get("rs"):
            self._hand_back(batch, msg)
        descs = msg.get("r")
        err = msg.get("err")
        if descs is not None or err:
            opened = self._open
            for token in batch.tokens:
                opened.pop(token, None)
        if msg.get("dead"):
            raise self._unhealthy()
        if err:
            self._check_memory(msg)
            raise self._failed(err)
        if descs is None:
            self._services.execute_returned_none(self._args, sum(t in self._open for t in batch.tokens))
            return None
        memory = self.device_memory
        return [None if desc is None else response_from_wire(link, desc, memory) for desc in descs]

    def _hand_back(self, batch: _Batch, msg: dict[str, Any]) -> list[InferenceRequest]:
        """The requests of ``batch`` the model released with RESCHEDULE, marked so
        (``request.reschedule()``) and no longer this stub's to answer."""
        handed = []
        for index in msg.get("rs") or ():
            request = self._open.pop(batch.tokens[index], None)
            if request is not None:
                request.reschedule()
                handed.append(request)
        return handed

    def _check_memory(self, msg: dict[str, Any]) -> None:
        """Restart a stub that hit its STUB_MEMORY_LIMIT_MB and can no longer serve.

        The trigger is a MemoryError (the stub says so: ``mem``; raised by the model
        or by the stub's own copying of its tensors) *and* an address space still
        above ``_NEAR_LIMIT`` of the limit once the failed batch is gone *and* grown
        since the stub started by at least ``_GROWN`` of the room it started with. A
        MemoryError alone is not enough: one oversized request fails its own
        allocation and leaves the stub fine (what it got is freed with the request),
        and restarting it would cost every model a re-initialisation for one bad
        request. Nor is being near the limit: a stub's address space at start grows
        with the host's cores (thread stacks, BLAS and malloc buffers per core), so
        on a large host a fresh stub may start near its limit, and a restart would
        give back nothing. A stub that grew to the limit (a leak, a cache that grew)
        would fail every request from now on, so it is restarted as after a crash:
        the batch is answered with the error, the next requests reach a fresh stub.
        Reading ``/proc/<pid>/status`` costs microseconds and only on this error path.
        """
        limit_mb = self._settings.memory_limit_mb
        proc = self._proc
        if not limit_mb or proc is None or self._recycled or self._stopping:
            return
        if not (msg.get("mem") or str(msg.get("err", "")).startswith("MemoryError")):
            return
        used_mb = _address_space_mb(proc.pid)
        if used_mb is None or not _leaked_to_limit(used_mb, self._start_mb, limit_mb):
            return
        log.warning(
            "the stub of '%s' uses %d of its %d MiB (STUB_MEMORY_LIMIT_MB; %s MiB at its start) after a "
            "MemoryError and could serve nothing more; restarting it",
            self.name,
            used_mb,
            limit_mb,
            self._start_mb if self._start_mb is not None else "?",
        )
        self._recycled = True
        proc.kill()  # the reader sees it exit: _died answers what it held and restarts it

    def _failed(self, text: str, kind: Any = TritonError.internal) -> TritonError:
        return execute_error(self.name, text, kind, self._settings.error_frames)

    def _client_text(self, text: str, what: str) -> str:
        """A model's error from ``initialize`` / ``auto_complete_config`` as load errors
        show it (the repository index, model control): without its frames when
        ``error-frames=false``, which then go to the log only."""
        return strip_frames(self.name, text, what, self._settings.error_frames)

    def _unhealthy(self) -> TritonError:
        """Requests a dead stub held (Triton's wording; it answers INTERNAL too)."""
        return TritonError.internal(f"Stub process '{self.name}' is not healthy.")

    def _cancel(self, token: int) -> None:
        link = self._link
        if self._alive and link is not None and token in self._open:
            try:
                link.send({"op": "cancel", "t": token})
            except OSError:
                pass

    def is_ready(self) -> bool:
        """Alive, and the model's ``is_ready()`` (if it has one) said yes within
        ``READY_TIMEOUT_S``. One question at a time goes to the stub: a caller that
        gives up on a slow answer gets False and leaves the question open, and the
        next callers wait for that same answer rather than asking again (as Triton)."""
        link = self._link
        if not self._alive or link is None:
            return False
        if not self.has_is_ready:
            return True
        with self._ready_lock:
            check = self._ready_check
            ask = check is None
            if check is None:
                check = self._ready_check = _ReadyCheck(next(self._ids))
        if ask:
            try:
                link.send({"op": "ready?", "c": check.call})
            except OSError:
                self._answer_ready(check.call, False)
        if not check.event.wait(READY_TIMEOUT_S):
            log.warning("is_ready() of '%s' did not answer within %g s", self.name, READY_TIMEOUT_S)
            return False
        return check.value

    def _answer_ready(self, call: int, value: bool) -> None:
        with self._ready_lock:
            check = self._ready_check
            if check is None or check.call != call:
                return  # a late answer to a question already given up on
            self._ready_check = None
        check.value = value
        check.event.set()

    # -- reader thread ------------------------------------------------------------------------

    def _read(self, link: Link, sock: socket.socket, generation: int) -> None:
        try:
            while True:
                msg = link.recv()
                try:
                    self._dispatch(link, msg)
                except Exception:  # a bug here must not stop the reader
                    log.exception("handling '%s' from the stub of '%s'", msg.get("op"), self.name)
                link.flush_releases()
        except (EOFError, OSError):
            pass
        # Descriptors are closed when the last thread lets go of ``link`` and ``sock``
        # (a close here could pull the descriptor from under a thread sending on it).
        if generation == self._generation:
            self._died(link)

    def _watch(
        self, loop: asyncio.AbstractEventLoop, link: Link, sock: socket.socket, generation: int
    ) -> None:
        """Read the stub's messages on the server's event loop (its front ends' loop):
        a batch's answer completes there, where its client is answered, with no
        thread in between. Runs on the loop; should that fail (the socket was closed
        meanwhile), a thread reads, and finds the stub gone as it would."""
        try:
            reader = FrameReader(socket.socket(fileno=os.dup(sock.fileno())))
        except OSError:
            threading.Thread(
                target=self._read, args=(link, sock, generation), name=f"stub-{self.name}", daemon=True
            ).start()
            return
        loop.add_reader(reader.sock.fileno(), self._readable, loop, link, reader, generation)

    def _readable(
        self, loop: asyncio.AbstractEventLoop, link: Link, reader: FrameReader, generation: int
    ) -> None:
        """The stub's socket has data (on the loop): handle every message it completes."""
        messages = reader.read()
        if messages is None:  # the stub is gone
            loop.remove_reader(reader.sock.fileno())
            reader.sock.close()
            if generation == self._generation:
                # Waiting for the process and restarting it block: not on the loop.
                threading.Thread(
                    target=self._died, args=(link,), name=f"stub-{self.name}-ended", daemon=True
                ).start()
            return
        for msg in messages:
            link.take_message(msg)
            try:
                self._dispatch(link, msg)
            except Exception:  # a bug here must not stop the reading
                log.exception("handling '%s' from the stub of '%s'", msg.get("op"), self.name)
        link.flush_releases()

    def _dispatch(self, link: Link, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "done":  # the most frequent first: every batch ends with one
            self._on_done(link, msg)
        elif op == "send":
            self._on_send(link, msg)
        elif op == "bls":
            self._on_bls(link, msg)
        elif op == "bls_cancel":
            request = self._bls.get(msg["c"])
            if request is not None:
                request.cancel()
        elif op == "log":
            self._services.log(msg["l"], msg["m"], msg["fn"], msg["n"])
        elif op == "metric":
            self._services.update(msg["h"], msg["k"], msg["v"])
        elif op == "query":
            if msg["q"] in ("ready", "load", "unload"):
                # Model control may wait (on a readiness check, on a load): not here,
                # where the answers this stub is waiting for are read.
                threading.Thread(target=self._on_query, args=(link, msg), daemon=True).start()
            else:
                self._on_query(link, msg)
        elif op == "ready!":
            if msg.get("e"):
                log.warning("is_ready() of '%s' failed: %s", self.name, msg["e"])
            self._answer_ready(msg["c"], bool(msg.get("v")))
        elif op in ("ready", "bye", "config"):
            self._control.put(msg)

    def _on_query(self, link: Link, msg: dict[str, Any]) -> None:
        try:
            value, error = self._services.answer(msg["q"], msg), None
        except TritonError as exc:
            value, error = None, exc.message
        try:
            link.send({"op": "reply", "c": msg["c"], "v": value, "e": error})
        except OSError:
            pass  # the stub is gone

    def _on_send(self, link: Link, msg: dict[str, Any]) -> None:
        token = msg["t"]
        flags = msg["f"]
        request = self._open.get(token)
        if request is None:
            return
        if flags & RESPONSE_COMPLETE_FINAL:
            self._open.pop(token, None)
        response = response_from_wire(link, msg["r"], self.device_memory) if msg["r"] is not None else None
        sender = request.response_sender
        if sender is not None and not sender.closed:
            sender.send(response, flags)

    def _on_done(self, link: Link, msg: dict[str, Any]) -> None:
        batch = self._batches.pop(msg["b"], None)
        if batch is None:
            return
        if not self.is_async:
            complete = batch.complete
            if complete is not None:  # ``_complete``, inlined (once per batch)
                try:
                    responses = self._outcome(link, batch, msg)
                except Exception as exc:
                    complete(None, exc)
                else:
                    complete(responses)
            else:
                assert batch.event is not None
                batch.msg = msg
                batch.event.set()
            return
        # An async model's batch: answer through the senders. Its execute returned to
        # the core long ago, so a request released with RESCHEDULE cannot go back.
        for handed in self._hand_back(batch, msg):
            handed._rescheduled = False
            sender = handed.response_sender
            if sender is not None and not sender.closed:
                sender.send(
                    InferenceResponse.from_error(
                        TritonError.unsupported(
                            "a model with an async execute cannot release requests with "
                            "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE"
                        )
                    ),
                    RESPONSE_COMPLETE_FINAL,
                )
        responses = msg.get("r")
        error = None
        if msg.get("err"):
            error = self._failed(msg["err"])
            self._check_memory(msg)
        elif responses is None:
            self._services.execute_returned_none(self._args, sum(t in self._open for t in batch.tokens))
        for index, token in enumerate(batch.tokens):
            request = self._open.get(token)
            if request is None:
                continue
            if error is not None:
                response = InferenceResponse.from_error(error)
            elif responses is not None and responses[index] is not None:
                response = response_from_wire(link, responses[index], self.device_memory)
            else:
                continue
            self._open.pop(token, None)
            sender = request.response_sender
            if sender is not None and not sender.closed:
                sender.send(response, RESPONSE_COMPLETE_FINAL)

    def _on_bls(self, link: Link, msg: dict[str, Any]) -> None:
        call = msg["c"]
        to_host = bls_wants_host(msg["req"].get("pm"))

        def answer(response: InferenceResponse | None, flags: int) -> None:
            if flags & RESPONSE_COMPLETE_FINAL:
                self._bls.pop(call, None)
            try:
                desc = None if response is None else response_to_wire(link, response, to_host)
                link.send({"op": "bls_resp", "c": call, "r": desc, "f": flags})
            except OSError:
                pass  # the stub is gone

        try:
            request = bls_request_from_wire(link, msg["req"], self.device_memory, self._services.output_names)
        except TritonError as exc:
            answer(InferenceResponse.from_error(exc), RESPONSE_COMPLETE_FINAL)
            return
        self._bls[call] = request
        self._services.submit(request, answer)

    def _died(self, link: Link | None = None) -> None:
        proc = self._proc
        code = proc.wait() if proc is not None else None
        if proc is not None:
            _LEFT_PROCS.discard(proc)
        was_alive = self._alive
        self._alive = False
        sock = self._sock
        if sock is not None:
            # Nothing reads or writes through it (the link and the loop's reader have
            # descriptors of their own; only ``stop`` shuts it down): closed now rather
            # than by the garbage collector, which warns of an unclosed socket.
            sock.close()
        if link is not None and link.device is not None:
            # The stub (``link``'s) has exited: nothing maps our device arenas any more,
            # and its arenas are closed here before a restarted stub's are opened.
            link.device.close()
        if link is not None:  # files of tensors that the stub sent or was sent, unread
            remove_spills(link.mine.path)
            remove_spills(link.theirs.path)
        if was_alive and not self._stopping and not self._recycled:
            log.error("the stub of '%s' exited (%s); its requests fail and it restarts", self.name, code)
        self._control.put({"op": "died", "code": code})
        pending = self._ready_check
        if pending is not None:
            self._answer_ready(pending.call, False)
        error = self._unhealthy()
        for batch_id in list(self._batches):
            batch = self._batches.pop(batch_id, None)
            if batch is None:
                continue
            if not self.is_async:
                for token in batch.tokens:
                    self._open.pop(token, None)
                if batch.complete is not None:
                    batch.complete(None, error)
                else:
                    assert batch.event is not None
                    batch.msg = {"dead": True}
                    batch.event.set()
        for token in list(self._open):
            request = self._open.pop(token, None)
            sender = request.response_sender if request is not None else None
            if sender is not None and not sender.closed:
                try:
                    sender.send(InferenceResponse.from_error(error), RESPONSE_COMPLETE_FINAL)
                except TritonError:
                    pass
        for request in list(self._bls.values()):
            request.cancel()
        self._bls.clear()
        self._recycled = False
        self._gone.set()
        if was_alive and not self._stopping:
            threading.Thread(target=self._restart, name=f"restart-{self.name}", daemon=True).start()

    def _restart(self) -> None:
        try:
            self.start()
            log.info("the stub of '%s' was restarted", self.name)
        except TritonError as exc:
            if not self._stopping:  # else: the instance is being finalized, as it should
                log.error("restarting the stub of '%s' failed: %s", self.name, exc.message)


def _unlink(*arenas: Arena) -> None:
    """Remove arena files once both processes mapped them (the maps stay valid).

    The stub removes them itself as soon as it has mapped them; this is for a
    stub that never got that far."""
    _unlink_paths(*(arena.path for arena in arenas))


def _unlink_paths(*paths: str) -> None:
    for path in paths:
        _LEFT_FILES.discard(path)
        try:
            os.unlink(path)
        except OSError:
            pass


#: A stub that still uses this share of its memory limit after a MemoryError is restarted,
#: if it grew by ``_GROWN`` of the room it had at its start (a restart gives that back).
_NEAR_LIMIT = 0.8
_GROWN = 0.5


def _leaked_to_limit(used_mb: int, start_mb: int | None, limit_mb: int) -> bool:
    """Whether a stub using ``used_mb`` of ``limit_mb`` after a MemoryError, having started
    with ``start_mb`` (None: unknown, taken as 0), is near its limit by its own growth."""
    start = start_mb or 0
    return used_mb >= limit_mb * _NEAR_LIMIT and used_mb - start >= (limit_mb - start) * _GROWN


def _address_space_mb(pid: int) -> int | None:
    """A process's address space (what RLIMIT_AS limits) in MiB, from /proc (None elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) >> 10
    except (OSError, ValueError):
        return None
    return None


def _limits(memory_limit_mb: int) -> Any:
    # Runs in the child between fork and exec, while other threads of the server
    # may hold locks: ``resource`` is imported up front (no import lock taken here).
    def apply() -> None:
        limit = memory_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def auto_complete_in_stub(
    model_file: Path, config: dict[str, Any], settings: StubSettings, services: ServerServices
) -> dict[str, Any]:
    """Run the model's ``auto_complete_config`` in a short-lived stub; the completed config."""
    stub = StubProcess(f"{config.get('name', '')}_autocomplete", model_file, {}, [], settings, services)
    link = stub._launch()
    try:
        link.send({"op": "autocomplete", "file": str(model_file), "config": config})
        reply = stub._wait_control("autocomplete", settings.start_timeout_s)
    finally:
        _STARTING.discard(stub._proc)
        _unlink(link.mine, link.theirs)
        stub._stopping = True
        try:
            link.send({"op": "fini"})
            stub._wait_control("fini", 10)
        except (TritonError, OSError):
            pass
        stub._kill()
    if reply.get("error"):  # the model's exception, as Triton reports it
        raise TritonError.internal(stub._client_text(reply["error"], "auto_complete_config"))
    result: dict[str, Any] = reply["config"]
    return result
