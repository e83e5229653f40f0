"""The stub process: one model instance, driven by the server over a ``Link``.

Run as ``python -m triton_python_backend_utils._stub FD P2C C2P``. The main
thread runs the model (``initialize``, ``execute``, ``finalize``) and reads its
own work from the socket; BLS answers, cancellations and releases still arrive
while ``execute`` runs (``_reader.LinkReader`` says who reads when). ``async def
execute`` models run on an event loop in the main thread with any number of
batches in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from . import _runtime
from ._api import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    InferenceResponseSender,
    TritonModelException,
)
from ._bls import BlsInbox, ResponseIterator, first_response, first_response_async
from ._convert import bls_request_to_wire, request_from_wire, response_from_wire, response_to_wire
from ._host import ModelHost, auto_complete, check_responses, error_text, is_decoupled
from ._reader import LinkReader
from ._wire import Arena, Link, ResponseDesc

_FINAL = TRITONSERVER_RESPONSE_COMPLETE_FINAL


class StubRuntime(_runtime.Runtime):
    """``pb_utils`` calls answered by the server over the link."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self._pid = os.getpid()
        self._calls = itertools.count(1)
        self._waiters: dict[int, Any] = {}
        self._kinds: dict[int, str] = {}
        #: Called once a reply is awaited (``LinkReader.awaiting``): somebody must read.
        self.awaiting: Any = lambda: None

    def awaited(self) -> bool:
        """Whether a reply is awaited (a query, or a BLS call not finished yet)."""
        return bool(self._waiters)

    # -- replies ---------------------------------------------------------------------------

    def deliver(self, call: int, item: Any) -> None:
        waiter = self._waiters.get(call)
        if waiter is not None:
            waiter.put(item)

    def _own_process(self, what: str) -> None:
        """Refuse a call that needs the server's answer from a process the model forked
        (``multiprocessing``): the answer would reach the stub, never the child."""
        if os.getpid() != self._pid:
            raise TritonModelException(
                f"{what} from a process forked by the model is not supported; "
                "use threads or async_exec in the stub process itself"
            )

    def _query(self, what: str, **fields: Any) -> Any:
        self._own_process(what)
        call = next(self._calls)
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiters[call] = inbox
        try:
            self.link.send({"op": "query", "c": call, "q": what, **fields})
            self.awaiting()
            value, error = inbox.get()
        finally:
            self._waiters.pop(call, None)
        if error is not None:
            raise TritonModelException(error)
        return value

    # -- BLS -------------------------------------------------------------------------------

    def _call(
        self, request: InferenceRequest, decoupled: bool, timeout: float | None, loop: Any
    ) -> ResponseIterator:
        """Send a BLS request; its answers as a ``ResponseIterator``."""
        self._own_process("BLS")
        call = next(self._calls)
        inbox = BlsInbox(loop)
        self._waiters[call] = inbox
        try:
            self.link.send(
                {"op": "bls", "c": call, "req": bls_request_to_wire(self.link, request), "d": decoupled}
            )
        except Exception:
            self._waiters.pop(call, None)
            raise
        self.awaiting()

        def cancel() -> None:
            try:
                self.link.send({"op": "bls_cancel", "c": call})
            except OSError:
                pass  # the server is gone; so is the request

        def convert(desc: Any) -> InferenceResponse:
            return response_from_wire(self.link, desc)

        return ResponseIterator(
            inbox, convert, request, timeout, cancel, lambda: self._waiters.pop(call, None)
        )

    def bls(self, request: InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        responses = self._call(request, decoupled, timeout, None)
        return responses if decoupled else first_response(responses)

    async def bls_async(self, request: InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        responses = self._call(request, decoupled, timeout, asyncio.get_running_loop())
        return await (responses.first_arrived() if decoupled else first_response_async(responses))

    # -- logging, metrics, model control ----------------------------------------------------------

    def log(self, level: str, message: str, filename: str, line: int) -> None:
        self.link.send({"op": "log", "l": level, "m": message, "fn": filename, "n": line})

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        return self._query("family", name=name, description=description, kind=kind)

    def metric(self, family: Any, labels: dict[str, str], buckets: list[float] | None) -> Any:
        handle, kind = self._query("metric", family=family, labels=labels, buckets=buckets)
        self._kinds[handle] = kind
        return handle

    def metric_update(self, metric: Any, op: str, value: float) -> None:
        kind = self._kinds.get(metric, "")
        allowed = {"counter": ("increment",), "gauge": ("increment", "set"), "histogram": ("observe",)}
        if op not in allowed.get(kind, ()):
            raise TritonModelException(f"{op} is not supported for a {kind} metric")
        if kind == "counter" and value < 0:
            raise TritonModelException("value must be non-negative for counter metric")
        self.link.send({"op": "metric", "h": metric, "k": op, "v": value})

    def metric_value(self, metric: Any) -> float:
        return float(self._query("value", handle=metric))

    def model_control(self, op: str, name: str, version: int, config: str, files: dict[str, bytes]) -> Any:
        return self._query(op, name=name, version=version, config=config, files=files)


class Stub:
    """The stub's main loop."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.runtime = StubRuntime(link)
        _runtime.install(self.runtime)
        self.host: ModelHost | None = None
        self.name = ""
        self.version = 1
        self.instance = ""
        self.decoupled = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.requests: dict[int, InferenceRequest] = {}
        #: Cancellations read before their request was opened (its batch waits behind
        #: another: the server's ``pipeline_depth``, an async model's loop), by token;
        #: ``_opened`` is the highest token opened so far. Tokens only grow, so a
        #: cancellation of a token above it is for a request still to come, and one
        #: at or below it for a request already answered. Both under ``_opening``.
        self._early: set[int] = set()
        self._opened = 0
        self._opening = threading.Lock()
        self.reader = LinkReader(link, self._dispatch, self.runtime.awaited, _unreadable)
        self.runtime.awaiting = self.reader.awaiting

    # -- any thread that reads -------------------------------------------------------------

    def _dispatch(self, msg: dict[str, Any]) -> bool:
        """Handle a message that is not the main thread's; False for one that is."""
        op = msg["op"]
        if op in ("bls_resp", "reply"):
            item = (msg.get("r"), msg.get("f", 0)) if op == "bls_resp" else (msg.get("v"), msg.get("e"))
            self.runtime.deliver(msg["c"], item)
        elif op == "cancel":
            token = msg["t"]
            with self._opening:
                request = self.requests.get(token)
                if request is None and token > self._opened:
                    self._early.add(token)
            if request is not None:
                request._cancelled.set()
        elif op == "rel":
            pass
        elif op == "ready?":
            # Beside execute, never in the way of the answers the reader reads.
            threading.Thread(target=self._ready, args=(msg,), daemon=True).start()
        elif self.loop is not None and op == "exec":
            self.loop.call_soon_threadsafe(self._start_async, msg)
        else:
            return False
        self.link.flush_releases()
        return True

    # -- main thread -------------------------------------------------------------------------

    def run(self) -> None:
        reader = self.reader
        while True:
            msg = reader.next()
            op = msg["op"]
            reader.busy()
            try:
                if op == "exec":
                    self._execute(msg)
                elif op == "init":
                    self._init(msg)
                    if self.host is not None and self.host.is_async:
                        reader.read_always()
                        self._run_async()
                        return
                elif op == "autocomplete":
                    try:
                        self.link.send({"op": "config", "config": auto_complete(msg["file"], msg["config"])})
                    except BaseException as exc:
                        self.link.send({"op": "config", "error": error_text(exc)})
                elif op == "fini":
                    self._finalize()
                    return
            finally:
                reader.idle()

    def _init(self, msg: dict[str, Any]) -> None:
        try:
            self.name = msg["args"]["model_name"]
            self.version = int(msg["args"]["model_version"])
            self.instance = msg["args"]["model_instance_name"]
            self.decoupled = is_decoupled(msg["args"]["model_config"])
            gpu = _device_link(self.link, int(msg.get("gpu") or 0))
            self.host = ModelHost(msg["file"])
            self.host.initialize(msg["args"])
        except BaseException as exc:
            self.link.send({"op": "ready", "error": error_text(exc)})
            return
        self.link.send(
            {"op": "ready", "async": self.host.is_async, "is_ready": self.host.has_is_ready, "gpu": gpu}
        )

    def _ready(self, msg: dict[str, Any]) -> None:
        """Answer a readiness check with the model's ``is_ready()``."""
        try:
            ok = self.host is not None and self.host.is_ready(self.loop)
            self.link.send({"op": "ready!", "c": msg["c"], "v": ok})
        except BaseException as exc:
            self.link.send({"op": "ready!", "c": msg["c"], "v": False, "e": error_text(exc)})

    def _finalize(self) -> None:
        error = None
        try:
            if self.host is not None:
                self.host.finalize()
        except BaseException as exc:
            error = error_text(exc)
        self.link.send({"op": "bye", "error": error})

    def _requests(self, msg: dict[str, Any]) -> list[InferenceRequest]:
        requests = []
        link, name, version, opened, make_sender = (
            self.link,
            self.name,
            self.version,
            self.requests,
            self._make_sender,
        )
        for desc in msg["reqs"]:
            request = request_from_wire(link, desc, name, version, make_sender)
            token = desc[0]
            with self._opening:
                opened[token] = request
                if token > self._opened:
                    self._opened = token
                early = self._early
                if early and token in early:
                    early.discard(token)
                    request._cancelled.set()
            requests.append(request)
        return requests

    def _make_sender(self, request: InferenceRequest) -> InferenceResponseSender:
        """The response sender of ``request``, made when its model first asks for it."""
        token = request._token
        return InferenceResponseSender(
            lambda response, flags: self._send(token, response, flags), request, self.decoupled
        )

    def _send(self, token: int, response: InferenceResponse | None, flags: int) -> None:
        request = self.requests.get(token)
        wanted = request.requested_output_names() if request is not None else None
        desc = None if response is None else response_to_wire(self.link, response, wanted)
        if flags & _FINAL:
            self.requests.pop(token, None)
        self.link.send({"op": "send", "t": token, "r": desc, "f": flags})

    def _reply(self, msg: dict[str, Any], requests: list[InferenceRequest], result: Any) -> dict[str, Any]:
        """The "done" message for what ``execute`` returned; ``rs`` lists the requests
        released with RESCHEDULE (their senders end here: a new execution brings new ones)."""
        again = [i for i, request in enumerate(requests) if request._rescheduled]
        responses = (
            None if result is None else check_responses(result, requests, self.instance, self.decoupled)
        )
        if responses is None:  # answered (or to be answered) through the senders
            for i in again:
                self.requests.pop(requests[i]._token, None)
            return {"op": "done", "b": msg["b"], "r": None, "rs": again}
        descs: list[ResponseDesc | None] = []
        try:
            for response, request in zip(responses, requests):
                wanted = request.requested_output_names()
                descs.append(None if response is None else response_to_wire(self.link, response, wanted))
        except BaseException:
            _free_outputs(self.link, descs)  # the batch fails; nobody will read these blocks
            raise
        for request in requests:
            self.requests.pop(request._token, None)
        return {"op": "done", "b": msg["b"], "r": descs, "rs": again}

    def _failure(
        self, msg: dict[str, Any], requests: list[InferenceRequest], exc: BaseException
    ) -> dict[str, Any]:
        for request in requests:
            self.requests.pop(request._token, None)
        return _failed(msg["b"], exc)

    def _done(self, reply: dict[str, Any], requests: list[InferenceRequest]) -> None:
        """Send ``reply`` once this side let go of the batch's requests: the shared-memory
        blocks under their inputs are then released with the reply itself, not by a
        message of their own after it."""
        requests.clear()
        try:
            self.link.send(reply)
        except OSError:
            raise  # the server is gone; the reader ends this process
        except BaseException as exc:
            # The answer did not go out (no memory left to pickle large inline
            # outputs under STUB_MEMORY_LIMIT_MB, a parameter that does not pickle):
            # its error, a small message, goes instead. If even that fails, ending
            # the stub is the one answer left (the server fails the batch and starts
            # a fresh stub); a batch never waits forever.
            batch = reply["b"]
            _free_outputs(self.link, reply.get("r"))  # the server will never read them
            del reply  # the large part, if memory is what failed
            try:
                self.link.send(_failed(batch, exc))
            except BaseException:
                os._exit(3)
        self.link.flush_releases()

    def _execute(self, msg: dict[str, Any]) -> None:
        requests: list[InferenceRequest] = []
        try:
            assert self.host is not None
            requests = self._requests(msg)
            if "p" in msg:  # sent while another ran: its cancellation may have come since
                self.reader.drain()
            result = self.host.execute(list(requests))
            reply = self._reply(msg, requests, result)
            del result
        except BaseException as exc:
            reply = self._failure(msg, requests, exc)
        self._done(reply, requests)

    # -- async models ------------------------------------------------------------------------

    def _run_async(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        self._stopping = loop.create_future()
        tasks: set[asyncio.Task[None]] = set()
        self._tasks = tasks
        threading.Thread(target=self._feed_async, name="stub-inbox", daemon=True).start()
        loop.run_until_complete(self._stopping)
        self._finalize()

    def _feed_async(self) -> None:
        assert self.loop is not None
        while True:
            msg = self.reader.next()  # the main thread's messages: a batch, or the end
            self.loop.call_soon_threadsafe(self._dispatch_async, msg)
            if msg["op"] == "fini":
                return

    def _dispatch_async(self, msg: dict[str, Any]) -> None:
        if msg["op"] == "exec":
            self._start_async(msg)
        elif msg["op"] == "fini":
            if not self._stopping.done():
                self._stopping.set_result(None)

    def _start_async(self, msg: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._execute_async(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _execute_async(self, msg: dict[str, Any]) -> None:
        requests: list[InferenceRequest] = []
        try:
            assert self.host is not None
            requests = self._requests(msg)
            result = await self.host.execute(list(requests))
            reply = self._reply(msg, requests, result)
            del result
        except BaseException as exc:
            reply = self._failure(msg, requests, exc)
        self._done(reply, requests)


def _device_link(link: Link, arena_bytes: int) -> bool:
    """Whether GPU tensors cross this link through CUDA IPC: the server offers it
    (``arena_bytes`` > 0: it has a GPU and cuda-python) and this stub can take it
    (cuda-python here too, the GPU visible). Loaded before the model's
    ``initialize``, whose code may change the current device."""
    if arena_bytes <= 0:
        return False
    try:
        from ._cuda import load
        from ._device import DeviceLink

        cuda = load()
    except Exception:  # an environment without them: host data, as without a GPU
        return False
    if cuda is None:
        return False
    link.device = DeviceLink(link, cuda, arena_bytes)
    return True


#: An error's text when there is no memory left to format the error itself.
_NO_MEMORY = "MemoryError: out of memory (no memory left to describe the error)"


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling or because of, a MemoryError
    (a model may wrap it in its own exception)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, MemoryError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _failed(batch: int, exc: BaseException) -> dict[str, Any]:
    """The "done" message of a batch that failed with ``exc``. ``mem`` tells the server
    it was out of memory, which with STUB_MEMORY_LIMIT_MB may mean a restart."""
    mem = _out_of_memory(exc)
    try:
        text = error_text(exc)
    except MemoryError:  # formatting the frames needs memory too
        text = _NO_MEMORY
        mem = True
    return {"op": "done", "b": batch, "err": text, "mem": mem}


def _free_outputs(link: Link, descs: list[ResponseDesc | None] | None) -> None:
    """Hand back the arena blocks of responses that will not be sent (and remove
    the files of those that had files of their own)."""
    for desc in descs or ():
        for tensor in desc[0] if desc is not None else ():
            if tensor[3] == "s":
                link.mine.free(tensor[4])
            elif tensor[3] == "f":
                with contextlib.suppress(OSError):
                    os.unlink(tensor[4])
            elif tensor[3] == "g" and link.device is not None:
                device, _, offset = tensor[4]
                link.device.free((device, offset))


def _unreadable(exc: BaseException) -> None:
    """A message this stub could not take in (e.g. no memory left under
    STUB_MEMORY_LIMIT_MB to unpickle it). It may have been a batch, which would then
    wait forever: ending the stub instead makes the server fail what it held and
    start a fresh one."""
    _print_exc()
    os._exit(3)


def _print_exc() -> None:
    try:
        import traceback

        traceback.print_exc()
    except BaseException:
        pass


def _exit_with_parent() -> None:
    """End this stub when the server is gone, however it went (even SIGKILL), also
    while the model is busy in initialize or execute and nobody reads the socket.

    Polled rather than ``prctl(PR_SET_PDEATHSIG)``: that signal follows the death
    of the *thread* that forked the stub, and stubs are started from loader and
    restart threads that end long before the server does. Every stub runs in a
    session of its own, so it is reparented (to init or a subreaper) when the
    server is gone; a check every half second costs nothing measurable.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str]) -> None:
    _exit_with_parent()
    fd, p2c, c2p = int(argv[0]), argv[1], argv[2]
    conn = Connection(fd)
    link = Link(conn, mine=Arena(c2p, 0, create=False), theirs=Arena(p2c, 0, create=False))
    # Both processes have the arenas mapped now; the files are no longer needed.
    # Removed here, before the model's initialize (which may take minutes), so
    # even a kill -9 of the server from now on leaves nothing in /dev/shm.
    for path in (p2c, c2p):
        try:
            os.unlink(path)
        except OSError:
            pass
    # The model sees the command line Triton's stub gives it, none (an embedded
    # interpreter's ``[""]``): ``unittest.main()``, argparse and absl in a model.py
    # must not parse the stub's own arguments.
    sys.argv[:] = [""]
    Stub(link).run()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
