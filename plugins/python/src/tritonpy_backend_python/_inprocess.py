"""``EXECUTION_MODE: in_process``: a model's code runs in the server's own interpreter.

No stub and no IPC: requests reach ``execute`` on the instance's worker thread,
and BLS goes straight to the server. For trusted models that are tiny or
release the GIL; a crash here is a crash of the server.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._host import ModelHost, check_responses, error_text
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceRequest, InferenceResponse, TritonError

from ._convert import bls_request_from_pb, request_to_pb, response_from_pb, response_to_pb
from ._services import ServerServices

_FINAL = RESPONSE_COMPLETE_FINAL


class InProcessRuntime(_runtime.Runtime):
    """``pb_utils`` calls answered directly by the server."""

    def __init__(self, services: ServerServices) -> None:
        self.services = services

    def _submit(self, request: pb_utils.InferenceRequest, deliver: Any) -> InferenceRequest | None:
        """Start a BLS request; the core request (to cancel), or None when it failed at once."""
        try:
            core_request = bls_request_from_pb(request)
        except TritonError as exc:
            deliver(InferenceResponse.from_error(exc), _FINAL)
            return None
        self.services.submit(core_request, deliver)
        return core_request

    def bls(self, request: pb_utils.InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        inbox: queue.SimpleQueue[tuple[InferenceResponse | None, int]] = queue.SimpleQueue()
        core_request = self._submit(request, lambda response, flags: inbox.put((response, flags)))
        responses = self._iterate(inbox, request, core_request, timeout)
        return responses if decoupled else _runtime.first_response(responses)

    @staticmethod
    def _iterate(
        inbox: queue.SimpleQueue[tuple[InferenceResponse | None, int]],
        request: pb_utils.InferenceRequest,
        core_request: InferenceRequest | None,
        timeout: float | None,
    ) -> Iterator[pb_utils.InferenceResponse]:
        finished = False
        try:
            while not finished:
                try:
                    response, flags = inbox.get(timeout=timeout)
                except queue.Empty:
                    yield _timed_out(request, timeout)
                    return
                finished = bool(flags & _FINAL)
                yield response_to_pb(response) if response is not None else pb_utils.InferenceResponse()
        finally:
            if not finished and core_request is not None:
                core_request.cancel()  # timed out, or the model stopped reading

    async def bls_async(
        self, request: pb_utils.InferenceRequest, decoupled: bool, timeout: float | None
    ) -> Any:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[InferenceResponse | None, int]] = asyncio.Queue()

        def deliver(response: InferenceResponse | None, flags: int) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, (response, flags))

        core_request = self._submit(request, deliver)
        responses = self._aiterate(inbox, request, core_request, timeout)
        return responses if decoupled else await _runtime.first_response_async(responses)

    @staticmethod
    async def _aiterate(
        inbox: asyncio.Queue[tuple[InferenceResponse | None, int]],
        request: pb_utils.InferenceRequest,
        core_request: InferenceRequest | None,
        timeout: float | None,
    ) -> AsyncIterator[pb_utils.InferenceResponse]:
        finished = False
        try:
            while not finished:
                try:
                    response, flags = await asyncio.wait_for(inbox.get(), timeout)
                except asyncio.TimeoutError:
                    yield _timed_out(request, timeout)
                    return
                finished = bool(flags & _FINAL)
                yield response_to_pb(response) if response is not None else pb_utils.InferenceResponse()
        finally:
            if not finished and core_request is not None:
                core_request.cancel()

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


def _model_errors(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except TritonError as exc:
        raise pb_utils.TritonModelException(exc.message) from None


def _timed_out(request: pb_utils.InferenceRequest, timeout: float | None) -> pb_utils.InferenceResponse:
    return pb_utils.InferenceResponse(
        error=pb_utils.TritonError(
            f"BLS request to model '{request.model_name()}' got no response within {timeout} s",
            pb_utils.TritonError.UNAVAILABLE,
        )
    )


class InProcessInstance:
    """One model instance in the server's interpreter."""

    def __init__(self, name: str, model_file: Path, args: dict[str, str], outputs: list[str]) -> None:
        self.name = name
        self._outputs = outputs
        self.host = ModelHost(model_file)
        self.host.initialize(args)
        self._loop: asyncio.AbstractEventLoop | None = None
        if self.host.is_async:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name=f"async-{name}", daemon=True).start()

    def execute(self, requests: list[InferenceRequest]) -> list[InferenceResponse] | None:
        pb_requests = []
        for request in requests:
            pb_request = request_to_pb(request, self._outputs)
            sender = request.response_sender
            if sender is not None:
                wanted = pb_request.requested_output_names()
                pb_request._sender = pb_utils.InferenceResponseSender(
                    lambda response, flags, sender=sender, wanted=wanted: sender.send(
                        None if response is None else response_from_pb(response, wanted), flags
                    ),
                    pb_request,
                )
            request.on_cancel(pb_request._cancelled.set)
            pb_requests.append(pb_request)
        if self._loop is not None:
            future = asyncio.run_coroutine_threadsafe(self.host.execute(pb_requests), self._loop)
            future.add_done_callback(lambda f: self._async_done(f, requests, pb_requests))
            return None
        try:
            result = self.host.execute(pb_requests)
            return None if result is None else self._responses(result, pb_requests)
        except Exception as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: BaseException) -> TritonError:
        """A model's exception as the stub reports it (and Triton does)."""
        return TritonError.internal(
            f"Failed to process the request(s) for model '{self.name}', message: {error_text(exc)}"
        )

    @staticmethod
    def _responses(result: Any, requests: list[pb_utils.InferenceRequest]) -> list[InferenceResponse]:
        responses = check_responses(result, len(requests))
        return [response_from_pb(r, q.requested_output_names()) for r, q in zip(responses, requests)]

    def _async_done(
        self, future: Any, requests: list[InferenceRequest], pb_requests: list[pb_utils.InferenceRequest]
    ) -> None:
        try:
            result = future.result()
            responses = None if result is None else self._responses(result, pb_requests)
        except Exception as exc:
            responses = [InferenceResponse.from_error(self._failed(exc)) for _ in requests]
        if responses is None:
            return
        for request, response in zip(requests, responses):
            sender = request.response_sender
            if sender is not None and not sender.closed:
                sender.send(response, _FINAL)

    def is_ready(self) -> bool:
        return self.host.is_ready()

    def stop(self, timeout: float = 30.0) -> None:
        try:
            self.host.finalize()
        finally:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
