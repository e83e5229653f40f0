"""``EXECUTION_MODE: in_process``: a model's code runs in the server's own interpreter.

No stub and no IPC: requests reach ``execute`` on the instance's worker thread,
and BLS goes straight to the server. For trusted models that are tiny or
release the GIL; a crash here is a crash of the server.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._bls import (
    BlsInbox,
    ResponseIterator,
    first_response,
    first_response_async,
)
from triton_python_backend_utils._convert import preferred_memory
from triton_python_backend_utils._dtypes import _CODE_OF_DTYPE
from triton_python_backend_utils._host import ModelHost, check_responses, error_text, is_decoupled
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, DirectCall, InferenceRequest, InferenceResponse, TritonError

from ._convert import (
    _Received,
    bls_request_from_pb,
    bls_wants_host,
    execute_error,
    request_to_pb,
    response_from_pb,
    response_to_pb,
)
from ._services import ServerServices

_FINAL = RESPONSE_COMPLETE_FINAL
#: The ``pb_utils`` runtime of the running code (``_runtime.enter``/``leave`` without their calls).
_ENTERED = _runtime._entered
_RESCHEDULE = pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
_checked_tensor = pb_utils.Tensor._checked
_received_request = pb_utils.InferenceRequest._received
T = TypeVar("T")
_ASYNC_RESCHEDULE = TritonError.unsupported(
    "a model with an async execute cannot release requests with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE"
)
log = logging.getLogger("tritonpy.backend.python")


class InProcessRuntime(_runtime.Runtime):
    """``pb_utils`` calls answered directly by the server."""

    def __init__(self, services: ServerServices) -> None:
        self.services = services

    def _submit(self, request: pb_utils.InferenceRequest, deliver: Any) -> InferenceRequest | None:
        """Start a BLS request; the core request (to cancel), or None when it failed at once."""
        try:
            core_request = bls_request_from_pb(request, self.services.output_names)
        except TritonError as exc:
            deliver(InferenceResponse.from_error(exc), _FINAL)
            return None
        self.services.submit(core_request, deliver)
        return core_request

    def _call(self, request: pb_utils.InferenceRequest, timeout: float | None, loop: Any) -> ResponseIterator:
        inbox = BlsInbox(loop)
        core_request = self._submit(request, lambda response, flags: inbox.put((response, flags)))
        cancel = core_request.cancel if core_request is not None else (lambda: None)
        to_pb: Callable[[InferenceResponse], pb_utils.InferenceResponse] = response_to_pb
        if bls_wants_host(preferred_memory(request)):
            to_pb = _to_host_pb
        return ResponseIterator(inbox, to_pb, request, timeout, cancel, lambda: None)

    def bls(self, request: pb_utils.InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        responses = self._call(request, timeout, None)
        return responses if decoupled else first_response(responses)

    async def bls_async(
        self, request: pb_utils.InferenceRequest, decoupled: bool, timeout: float | None
    ) -> Any:
        responses = self._call(request, timeout, asyncio.get_running_loop())
        return await (responses.first_arrived() if decoupled else first_response_async(responses))

    def log(self, level: str, message: str, filename: str, line: int) -> None:
        self.services.log(level, message, filename, line)

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        return _model_errors(self.services.family, name, description, kind)

    def metric(self, family: Any, labels: dict[str, str], buckets: list[float] | None) -> Any:
        return _model_errors(self.services.metric, family, labels, buckets)[0]

    def metric_update(self, metric: Any, op: str, value: float) -> None:
        _model_errors(self.services.update, metric, op, value)

    def metric_value(self, metric: Any) -> float:
        return float(_model_errors(self.services.value, metric))

    def model_control(self, op: str, name: str, version: int, config: str, files: dict[str, bytes]) -> Any:
        return _model_errors(self.services.control, op, name, version, config, files)


def _to_host_pb(response: InferenceResponse) -> pb_utils.InferenceResponse:
    return response_to_pb(response, to_host=True)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until ``stop``, then close it (an unclosed loop warns when collected)."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _model_errors(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except TritonError as exc:
        raise pb_utils.TritonModelException(exc.message) from None


class _DirectReceived:
    """``_Received`` of a direct call: the core request behind its ``pb_utils`` request
    is made only when the model asks for what needs it (a response sender,
    cancellation); until then nothing could have cancelled it."""

    __slots__ = ("call",)

    def __init__(self, call: DirectCall) -> None:
        self.call = call

    def is_set(self) -> bool:
        request = self.call.made
        return request is not None and request.is_cancelled()

    def set(self) -> None:
        self.call.request().cancel()

    def __call__(self, pb_request: pb_utils.InferenceRequest) -> pb_utils.InferenceResponseSender | None:
        return _Received(self.call.request())(pb_request)


class InProcessInstance:
    """One model instance in the server's interpreter."""

    def __init__(
        self,
        runtime: InProcessRuntime,
        name: str,
        model_file: Path,
        args: dict[str, str],
        outputs: list[str],
        error_frames: bool = True,
    ) -> None:
        self.name = name
        #: Its server's runtime: what ``pb_utils`` reaches while this model's code runs.
        self.runtime = runtime
        self._error_frames = error_frames
        self._outputs = outputs
        self._args = args
        self._decoupled = is_decoupled(args["model_config"])
        self.host = self._in_model(ModelHost, model_file)
        self._in_model(self.host.initialize, args)
        self._loop: asyncio.AbstractEventLoop | None = None
        if self.host.is_async:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=_serve, args=(self._loop,), name=f"async-{name}", daemon=True).start()

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse | None] | None:
        outputs = self._outputs
        if len(requests) == 1:  # the common case (no batching), without a comprehension
            pb_requests = [request_to_pb(requests[0], outputs)]
        else:
            pb_requests = [request_to_pb(request, outputs) for request in requests]
        if self._loop is not None:
            # The task runs in a copy of this context: with the runtime entered.
            execution = self.host.execute(pb_requests)
            future = self._in_model(asyncio.run_coroutine_threadsafe, execution, self._loop)
            future.add_done_callback(lambda f: self._async_done(f, requests, pb_requests))
            return None
        return self._answers(self._run(pb_requests), requests, pb_requests)

    def execute_direct(self, call: DirectCall) -> dict[str, Any] | list[InferenceResponse | None] | None:
        """``call`` (one request of ``predict``, as arrays) through the model's ``execute``
        with no core request behind its ``pb_utils`` request (``DirectCall.request()``
        makes one when the model needs it: a response sender, cancellation). The outputs
        when the model answered with host tensors and nothing else; otherwise what
        ``execute`` returns for ``[call.request()]``."""
        if self._loop is not None:
            return self.execute([call.request()])
        inputs = []
        for name, array in call.inputs.items():  # a loop, not a comprehension: no frame of its own
            code = _CODE_OF_DTYPE.get(array.dtype)
            if code is None:  # a type without a numpy type of its own (BF16): the usual way
                return self.execute([call.request()])
            inputs.append(_checked_tensor(name, array, code))
        received = _DirectReceived(call)
        pb_request = _received_request(
            call.model_name,
            call.model_version,
            inputs,
            list(self._outputs),
            "",
            0,
            0,
            0,
            {},
            received,
            received,
        )
        pb_requests = [pb_request]
        result = self._run(pb_requests)
        if (
            type(result) is list
            and len(result) == 1
            and type(response := result[0]) is pb_utils.InferenceResponse
            and response._error is None
            and not pb_request._release_flags & _RESCHEDULE
            and call.made is None
        ):
            wanted = pb_request._requested  # requested_output_names(), as the model left it
            outputs = {}
            for t in response._outputs:
                if type(t) is not pb_utils.Tensor:  # a GPU tensor: the usual way
                    break
                if t._name in wanted:
                    outputs[t._name] = t._array
            else:
                return outputs
        return self._answers(result, [call.request()], pb_requests)

    def _run(self, pb_requests: list[pb_utils.InferenceRequest]) -> Any:
        """The model's ``execute`` of ``pb_requests`` in its runtime (``_in_model``, spelt
        out on the hot path); its exception as the stub reports it."""
        try:
            token = _ENTERED.set(self.runtime)
            try:
                return self.host.execute(pb_requests)
            finally:
                _ENTERED.reset(token)
        except Exception as exc:
            raise self._failed(exc) from None

    def _answers(
        self, result: Any, requests: list[InferenceRequest], pb_requests: list[pb_utils.InferenceRequest]
    ) -> list[InferenceResponse | None] | None:
        """What ``execute`` returns for ``requests`` once the model's ``execute`` returned
        ``result`` for their ``pb_requests``."""
        responses: list[InferenceResponse | None] | None
        try:
            if result is None:
                responses = None
            elif (
                type(result) is list
                and len(result) == 1
                and len(pb_requests) == 1
                and type(response := result[0]) is pb_utils.InferenceResponse
                and not (pb_request := pb_requests[0])._release_flags & _RESCHEDULE
                and pb_request._sender is None
                and not self._decoupled
            ):
                # ``_responses`` of one request answered (what ``check_responses`` accepts
                # without a question), inlined; not handed back, so nothing more to do.
                return [response_from_pb(response, pb_request._requested)]
            else:
                responses = self._responses(result, pb_requests, self.name, self._decoupled)
        except Exception as exc:
            raise self._failed(exc) from None
        for request, pb_request in zip(requests, pb_requests):
            if pb_request._release_flags & _RESCHEDULE:  # the core runs it again
                request.reschedule()
        if responses is None:
            self._returned_none(requests)
        return responses

    def _returned_none(self, requests: list[InferenceRequest]) -> None:
        pending = sum(
            1
            for request in requests
            if not request.rescheduled
            and request.response_sender is not None
            and not request.response_sender.closed
        )
        self.runtime.services.execute_returned_none(self._args, pending)

    def _in_model(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` with this model's server as the ``pb_utils`` runtime."""
        token = _runtime.enter(self.runtime)
        try:
            return call(*args)
        finally:
            _runtime.leave(token)

    def _failed(self, exc: BaseException) -> TritonError:
        """A model's exception as the stub reports it (and Triton does): the model's
        frames, without this module's (``execute`` or ``execute_direct`` called it)."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        return execute_error(self.name, error_text(exc.with_traceback(tb)), frames=self._error_frames)

    @staticmethod
    def _responses(
        result: Any, requests: list[pb_utils.InferenceRequest], name: str, decoupled: bool
    ) -> list[InferenceResponse | None] | None:
        """The core's responses of what ``execute`` returned; None when they went (or
        go) through the requests' senders (``check_responses``)."""
        responses = check_responses(result, requests, name, decoupled)
        if responses is None:
            return None
        return [
            None if r is None else response_from_pb(r, q._requested)  # requested_output_names()
            for r, q in zip(responses, requests)
        ]

    def _async_done(
        self, future: Any, requests: list[InferenceRequest], pb_requests: list[pb_utils.InferenceRequest]
    ) -> None:
        try:
            result = future.result()
            responses = (
                None if result is None else self._responses(result, pb_requests, self.name, self._decoupled)
            )
        except Exception as exc:
            responses = [InferenceResponse.from_error(self._failed(exc)) for _ in requests]
        if responses is None:
            self._returned_none(requests)
            return
        for request, response in zip(requests, responses):
            sender = request.response_sender
            if sender is not None and not sender.closed:
                # An async execute returned to the core long ago: a request released
                # with RESCHEDULE cannot go back.
                sender.send(response or InferenceResponse.from_error(_ASYNC_RESCHEDULE), _FINAL)

    def is_ready(self) -> bool:
        try:
            return bool(self._in_model(self.host.is_ready, self._loop))
        except Exception as exc:
            log.warning("is_ready() of '%s' failed: %s", self.name, error_text(exc))
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """Run the model's ``finalize``, waiting for it at most ``timeout`` (what is
        left of ``--exit-timeout-secs`` while the server stops): a thread cannot be
        killed, but a hung ``finalize`` must not keep the server from exiting."""
        failure: list[BaseException] = []

        def finalize() -> None:
            try:
                self._in_model(self.host.finalize)
            except BaseException as exc:  # raised again on the caller's thread
                failure.append(exc)

        worker = threading.Thread(target=finalize, name=f"finalize-{self.name}", daemon=True)
        worker.start()
        worker.join(timeout)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if worker.is_alive():
            log.warning(
                "finalize() of '%s' did not finish within %.1f s; going on without it", self.name, timeout
            )
        elif failure:
            raise failure[0]
