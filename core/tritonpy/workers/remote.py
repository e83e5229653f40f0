"""The server as a front-end worker sees it: ``RemoteServer``, the facade of ``server.py``
with the core process behind it.

The HTTP and gRPC front ends run in a worker unchanged: they call what
``server.py``'s docstring lists, and this class answers it. Inference travels on
the worker's link (``wire``: one frame each way, tensors in shared memory); every
other call is a control call (``control``), answered by the core. The options,
the restricted API groups and the server metadata are the core's, copied once
when the worker starts. Shared-memory regions are registered in the core and
opened here on first use (``WorkerSharedMemory``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceRequest, InferenceResponse, OnResponse, TritonError

from ..bridges import awaited_response, resolve, responses
from ..config import ModelConfig
from ..ipc.link import Link
from ..logsettings import LogSettings
from ..memory.cuda import Runtime
from ..memory.cuda_shared import CudaRegion
from ..memory.shared import Region, SystemSharedMemory
from ..options import ServerOptions
from ..restricted import parse_restrictions
from ..runtime.spec import IOSpec
from ..trace import FrontEnd
from . import wire
from .control import CORE_GONE, ControlClient

#: Handles one request's answers, on the loop: ``(flags, what, body)`` as ``wire.decode_answer``.
Handler = Callable[[int, int, Any], None]


class WorkerSharedMemory(SystemSharedMemory):
    """The core's registry of regions, as one worker uses it: registration and
    status are the core's; a region is opened here the first time a request names
    it, and forgotten when the core says it was unregistered (``forget``)."""

    def __init__(self, control: ControlClient, runtime: Runtime | None) -> None:
        super().__init__(runtime)
        self._control = control
        self._generation = 0  # bumped by every ``forget``: an open that raced one is not kept

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self._control.call("shm_register", name, key, offset, byte_size)

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        self._control.call("shm_register_cuda", name, raw_handle, device_id, byte_size)

    def unregister(self, name: str | None = None) -> None:
        self._control.call("shm_unregister", name)  # every worker forgets it before this returns

    def unregister_cuda(self, name: str | None = None) -> None:
        self._control.call("shm_unregister_cuda", name)

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._control.call("shm_status", name)
        return result

    def cuda_status(self, name: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._control.call("shm_cuda_status", name)
        return result

    def region(self, name: str) -> Region | CudaRegion:
        region = self._regions.get(name)
        if region is not None:
            return region
        generation = self._generation
        description = self._control.call("shm_describe", name)  # NOT_FOUND in Triton's words
        region = self.adopt(name, description)
        if generation != self._generation:  # unregistered meanwhile: use it this once, keep nothing
            self.forget(name)
        return region

    def forget(self, name: str | None, kind: str = "") -> None:
        """Drop the regions the core unregistered (every one of ``kind`` when ``name`` is None)."""
        self._generation += 1
        if kind == "cuda":
            self._unregister(CudaRegion, name)
        elif kind == "system":
            self._unregister(Region, name)
        else:
            self._unregister(Region, name)
            self._unregister(CudaRegion, name)


class RemoteLogSettings:
    """``log_settings`` of the facade: the core's, which tells every worker of a change."""

    def __init__(self, control: ControlClient) -> None:
        self._control = control

    def get(self) -> dict[str, Any]:
        result: dict[str, Any] = self._control.call("log_get")
        return result

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._control.call("log_update", changes)
        return result


class RemoteServer:
    """What ``server.py``'s docstring lists for front ends, answered by the core."""

    def __init__(
        self,
        options: ServerOptions,
        metadata: dict[str, Any],
        control: ControlClient,
        local_log: LogSettings,
        runtime: Runtime | None,
    ) -> None:
        self.options = options
        self.http_restrictions = parse_restrictions("--http-restricted-api", options.http_restricted_api)
        self.grpc_restrictions = parse_restrictions(
            "--grpc-restricted-protocol", options.grpc_restricted_protocol
        )
        self.control = control
        self.shared_memory = WorkerSharedMemory(control, runtime)
        self.log_settings = RemoteLogSettings(control)
        self._local_log = local_log
        self._metadata = metadata
        self._link: Link | None = None
        self._release: wire.Releaser | None = None
        self._pending: dict[int, Handler] = {}
        self._next = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        #: Set when the worker should stop: the deadline the core gave (a ``time.monotonic()``
        #: value), or None when the core is gone (stop at once).
        self.stopped: asyncio.Future[float | None] | None = None

    def attach(self, link: Link, loop: asyncio.AbstractEventLoop) -> None:
        self._link = link
        self._loop = loop
        self._release = wire.Releaser(link, loop)
        self._loop_thread = threading.get_ident()  # called on the loop's thread
        self.stopped = loop.create_future()

    # -- from the core ---------------------------------------------------------------------

    def on_frames(self, frames: list[bytes]) -> None:
        link, release, pending = self._link, self._release, self._pending
        assert link is not None and release is not None
        for frame in frames:
            kind = frame[0]
            if kind == wire.ANSWER:
                rid, flags, what, body = wire.decode_answer(link, release, frame)
                handler = pending.pop(rid, None) if flags & RESPONSE_COMPLETE_FINAL else pending.get(rid)
                if handler is not None:
                    handler(flags, what, body)
            elif kind == wire.PING:
                link.send(*wire.encode_pong())
            elif kind == wire.STOP:
                (seconds,) = wire.decode_fields(frame)
                self._stop(self._now() + seconds)

    def on_close(self, exc: Exception | None) -> None:
        """The core is gone: every request waiting fails, and the worker stops."""
        pending, self._pending = self._pending, {}
        gone = TritonError.unavailable(CORE_GONE)
        for handler in pending.values():
            handler(RESPONSE_COMPLETE_FINAL, wire.REFUSED, gone)
        self._stop(None)

    def core_gone_threadsafe(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop, None)

    def _stop(self, deadline: float | None) -> None:
        if self.stopped is not None and not self.stopped.done():
            self.stopped.set_result(deadline)

    def _now(self) -> float:
        return time.monotonic()

    def apply(self, message: tuple[Any, ...]) -> None:
        """A broadcast from the core (on the broadcast thread)."""
        what = message[0]
        if what == "shm_forget":
            self.shared_memory.forget(message[2], message[1])
        elif what == "log":
            state = {k: v for k, v in message[1].items() if k != "log_file"}
            self._local_log.update(state)

    # -- health and metadata -----------------------------------------------------------------

    def live(self) -> bool:
        return bool(self.control.call("live"))

    def ready(self) -> bool:
        return bool(self.control.call("ready"))

    async def model_ready_async(self, name: str, version: int | str | None = None) -> bool:
        return bool(await asyncio.to_thread(self.control.call, "model_ready", name, version))

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def model_metadata(self, name: str, version: int | str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.control.call("model_metadata", name, version)
        return result

    def model_config(self, name: str, version: int | str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.control.call("model_config", name, version)
        return result

    def model_config_proto(self, name: str, version: int | str | None = None) -> ModelConfig:
        result: ModelConfig = self.control.call("model_config_proto", name, version)
        return result

    def model_spec(self, name: str, version: int | str | None = None) -> IOSpec:
        result: IOSpec = self.control.call("model_spec", name, version)
        return result

    def is_decoupled(self, name: str, version: int | str | None = None) -> bool:
        return bool(self.control.call("is_decoupled", name, version))

    # -- extensions ------------------------------------------------------------------------

    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        result: list[dict[str, str]] = self.control.call("repository_index", ready)
        return result

    def load_model(self, name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
        self.control.call("load_model", name, config, files)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        self.control.call("unload_model", name, unload_dependents)

    def model_statistics(self, name: str = "", version: int | str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.control.call("model_statistics", name, version)
        return result

    def trace_settings(self, model: str = "", changes: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.control.call("trace_settings", model, changes)
        return result

    # -- inference -------------------------------------------------------------------------

    def _send(self, mode: int, refusal: str | None, request: InferenceRequest, handler: Handler) -> None:
        link = self._link
        if link is None or link.closed:
            raise TritonError.unavailable(CORE_GONE)
        self._next += 1
        rid = self._next
        link.send(*wire.encode_request(link, rid, mode, refusal, request))
        self._pending[rid] = handler
        request.on_cancel(functools.partial(self._cancel, rid))

    def _cancel(self, rid: int) -> None:
        if threading.get_ident() != self._loop_thread:
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._cancel, rid)
            return
        link = self._link
        if rid in self._pending and link is not None and not link.closed:
            link.send(*wire.encode_cancel(rid))

    def start_infer(
        self,
        request: InferenceRequest,
        on_response: Callable[[InferenceResponse], None],
        decoupled_message: str | None = None,
        stream_call: str = "stream_async()",
        here: bool = False,
        front: FrontEnd | None = None,
    ) -> None:
        """As ``Server.start_infer``, except that a refusal comes to ``on_response`` as an
        error response (the core refuses it) rather than raised here. A worker has no
        tracer, so ``front`` is always None: the core traces its requests without front-end
        stamps."""

        def answered(flags: int, what: int, body: Any) -> None:
            if what == wire.RESPONSE:
                on_response(body)
            elif what == wire.REFUSED:
                on_response(InferenceResponse.from_error(body))

        self._send(wire.SINGLE, decoupled_message, request, answered)

    def submit(self, request: InferenceRequest, done: OnResponse, front: FrontEnd | None = None) -> None:
        """As ``Server.submit`` for a front end: ``done(response, flags)`` gets every
        response of ``request`` (None: flags alone), the last with
        ``RESPONSE_COMPLETE_FINAL``, on the loop's thread. The core refuses a request
        after it left, so a refusal (and the core's end) comes as that last call with an
        error response rather than raised here; only a core already gone raises
        (UNAVAILABLE)."""

        def answered(flags: int, what: int, body: Any) -> None:
            done(InferenceResponse.from_error(body) if what == wire.REFUSED else body, flags)

        self._send(wire.STREAM, None, request, answered)

    async def infer_async(
        self, request: InferenceRequest, decoupled_message: str | None = None, front: FrontEnd | None = None
    ) -> InferenceResponse:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[InferenceResponse] = loop.create_future()
        self.start_infer(request, functools.partial(resolve, fut), decoupled_message)
        return await awaited_response(fut, request)

    async def stream_flags_async(
        self, request: InferenceRequest
    ) -> AsyncGenerator[tuple[InferenceResponse | None, int], None]:
        inbox: asyncio.Queue[tuple[int, int, Any]] = asyncio.Queue()
        self._send(wire.STREAM, None, request, lambda *answer: inbox.put_nowait(answer))
        finished = False
        try:
            while not finished:
                flags, what, body = await inbox.get()
                finished = bool(flags & RESPONSE_COMPLETE_FINAL)
                if what == wire.REFUSED:
                    raise body
                yield body, flags
        finally:
            if not finished:
                request.cancel()

    def stream_async(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        return responses(self.stream_flags_async(request))
