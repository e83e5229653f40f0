"""``inference.GRPCInferenceService`` and ``grpc.health.v1`` over a ``Server``, for
both transports: the native one calls them with a ``calls.Context``, grpc.aio
through ``aio.py``, which adapts its context and mixes the generated base classes in.

Handlers only translate between protobuf messages and the server's API; a
TritonError becomes the gRPC status Triton uses for its code. Nothing here
imports grpcio: the codes are ``status.StatusCode``, an abort is ``status.Aborted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from google.protobuf import json_format
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    TritonError,
)

from ..bridges import call_soon_threadsafe
from ..codec import InputSizes
from ..failures import report
from ..forwarding import forward_headers, header_pattern
from ..memory.shared import check_client_shm
from ..model_version import parse_version
from ..repository.overrides import refuse_repository_name, split_load_parameters
from ..runtime.validation import size_error
from ..server import Server
from ..trace import FrontEnd, Tracer, no_front
from . import grpc_service_pb2 as pb
from . import health_pb2
from .calls import DESERIALIZING
from .errors import status_of
from .status import Aborted, StatusCode
from .tensors import (
    FINAL_RESPONSE,
    OutputSlots,
    RequestPlans,
    ResponseEncoder,
    empty_final,
    request_from_proto,
    response_to_proto,
)

if TYPE_CHECKING:
    from .calls import Answerer, Streamer

log = logging.getLogger("tritonpy.grpc")


class Context(Protocol):
    """What the servicers use of a call's context (``calls.Context``, ``aio.Context``)."""

    async def abort(self, code: StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        """End the call with ``code``: raises ``status.Aborted``."""
        ...

    def invocation_metadata(self) -> Any: ...


Msg = TypeVar("Msg")
Failure = TypeVar("Failure", bound=Exception)
Handler = Callable[[Any, Any, Context], Awaitable[Any]]


def _unary(handler: Handler) -> Handler:
    """Answer a TritonError with its status; log and answer INTERNAL for anything else.

    The status is sent after the ``except`` block, with the exception's
    traceback dropped: aborting inside it would chain the error (and through
    its traceback every frame holding the request, e.g. a rejected 100 MB
    message) to the abort's exception, kept until a garbage collection.
    """

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: Context) -> Any:
        try:
            return await handler(self, request, context)
        except (asyncio.CancelledError, Aborted):
            raise
        except Exception as exc:
            code, message = _error_status(exc, handler.__name__)
        del request  # the abort below must not keep the message alive either
        await context.abort(code, message)

    return wrapper


def _error_status(exc: BaseException, where: str) -> tuple[StatusCode, str]:
    """A handler's error as its call's status: a TritonError's code and message, anything
    else INTERNAL, logged (a bug must not take the server down; say what failed). The
    traceback is dropped: its frames can hold the request."""
    if isinstance(exc, TritonError):
        code, message = status_of(exc.code), exc.message
    else:
        code, message = StatusCode.INTERNAL, report(log, f"unhandled error in {where}", exc)
    exc.__traceback__ = None
    return code, message


class InferenceServicer:
    """The RPCs of ``inference.GRPCInferenceService``: each is a method named as its RPC
    (both transports look them up in the class's ``__dict__``); one not defined here
    answers UNIMPLEMENTED."""

    def __init__(self, server: Server) -> None:
        self.server = server
        # ModelInfer's decoding and encoding without message objects (start_model_infer).
        self._plans = RequestPlans()
        self._encoder = ResponseEncoder()
        #: ``--grpc-header-forward-pattern``: metadata that becomes request parameters.
        self._forward = header_pattern(
            server.options.grpc_header_forward_pattern, "--grpc-header-forward-pattern"
        )
        tracer: Tracer | None = getattr(server, "tracer", None)  # none in a front-end worker
        self._front_of = functools.partial(tracer.front, "GRPC") if tracer is not None else no_front

    def _front(self) -> FrontEnd | None:
        """Stamps for a request message that has just arrived, while tracing is on: Triton's
        GRPC_WAITREAD_START and _END (both now: the transport tells no earlier moment)."""
        front = self._front_of()
        if front is not None:
            front.received()
        return front

    # -- health and metadata ----------------------------------------------------------

    @_unary
    async def ServerLive(self, request: pb.ServerLiveRequest, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.server.live())

    @_unary
    async def ServerReady(self, request: pb.ServerReadyRequest, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.server.ready())

    @_unary
    async def ModelReady(self, request: pb.ModelReadyRequest, context: Any) -> pb.ModelReadyResponse:
        ready = await self.server.model_ready_async(request.name, parse_version(request.version))
        return pb.ModelReadyResponse(ready=ready)

    @_unary
    async def ServerMetadata(
        self, request: pb.ServerMetadataRequest, context: Any
    ) -> pb.ServerMetadataResponse:
        meta = self.server.metadata()
        return pb.ServerMetadataResponse(
            name=meta["name"], version=meta["version"], extensions=meta["extensions"]
        )

    @_unary
    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Any) -> pb.ModelMetadataResponse:
        meta = self.server.model_metadata(request.name, parse_version(request.version))
        response = pb.ModelMetadataResponse(
            name=meta["name"], versions=meta["versions"], platform=meta["platform"]
        )
        for key, target in (("inputs", response.inputs), ("outputs", response.outputs)):
            for t in meta[key]:
                target.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
        return response

    @_unary
    async def ModelConfig(self, request: pb.ModelConfigRequest, context: Any) -> pb.ModelConfigResponse:
        config = self.server.model_config_proto(request.name, parse_version(request.version))
        response = pb.ModelConfigResponse()
        response.config.CopyFrom(config)
        return response

    @_unary
    async def ModelStatistics(
        self, request: pb.ModelStatisticsRequest, context: Any
    ) -> pb.ModelStatisticsResponse:
        stats = self.server.model_statistics(request.name, parse_version(request.version))
        response = pb.ModelStatisticsResponse()
        json_format.ParseDict({"model_stats": stats}, response)
        return response

    @_unary
    async def TraceSetting(self, request: pb.TraceSettingRequest, context: Any) -> pb.TraceSettingResponse:
        changes: dict[str, Any] = {key: list(value.value) or None for key, value in request.settings.items()}
        current = self.server.trace_settings(request.model_name, changes)
        response = pb.TraceSettingResponse()
        for key, value in current.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    @_unary
    async def LogSettings(self, request: pb.LogSettingsRequest, context: Any) -> pb.LogSettingsResponse:
        changes = {}
        for key, value in request.settings.items():
            which = value.WhichOneof("parameter_choice")
            changes[key] = getattr(value, which) if which is not None else None
        current = self.server.log_settings.update(changes) if changes else self.server.log_settings.get()
        response = pb.LogSettingsResponse()
        for key, value in current.items():
            setting = response.settings[key]
            if isinstance(value, bool):
                setting.bool_param = value
            elif isinstance(value, int):
                setting.uint32_param = value
            else:
                setting.string_param = value
        return response

    # -- repository ---------------------------------------------------------------------

    @_unary
    async def RepositoryIndex(
        self, request: pb.RepositoryIndexRequest, context: Any
    ) -> pb.RepositoryIndexResponse:
        refuse_repository_name(request.repository_name)
        response = pb.RepositoryIndexResponse()
        for entry in self.server.repository_index(ready=request.ready):
            response.models.add(
                name=entry["name"],
                version=entry.get("version", ""),
                state=entry.get("state", ""),
                reason=entry.get("reason", ""),
            )
        return response

    @_unary
    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Any
    ) -> pb.RepositoryModelLoadResponse:
        refuse_repository_name(request.repository_name)
        name = request.model_name
        params: dict[str, Any] = {}
        for key, param in request.parameters.items():
            which = param.WhichOneof("parameter_choice")
            params[key] = getattr(param, which) if which else None
        config, files = split_load_parameters(name, params)
        # A load takes as long as the model takes to initialize: off the event loop.
        await asyncio.to_thread(self.server.load_model, name, config, files)
        return pb.RepositoryModelLoadResponse()

    @_unary
    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Any
    ) -> pb.RepositoryModelUnloadResponse:
        refuse_repository_name(request.repository_name)
        dependents = False
        if "unload_dependents" in request.parameters:
            param = request.parameters["unload_dependents"]
            if param.WhichOneof("parameter_choice") != "bool_param":
                raise TritonError.invalid_arg("the 'unload_dependents' parameter must be a bool")
            dependents = param.bool_param
        await asyncio.to_thread(self.server.unload_model, request.model_name, dependents)
        return pb.RepositoryModelUnloadResponse()

    # -- inference ---------------------------------------------------------------------

    def _matched(self, context: Any) -> dict[str, ParameterValue]:
        """The call's metadata that ``--grpc-header-forward-pattern`` finds, as request
        parameters (text values only: ``-bin`` metadata is bytes)."""
        assert self._forward is not None
        metadata = context.invocation_metadata() or ()
        found: dict[str, ParameterValue] = {}
        forward_headers(self._forward, ((k, v) for k, v in metadata if isinstance(v, str)), found)
        return found

    def _forwarded(self, request: InferenceRequest, context: Any) -> None:
        """``_matched`` into ``request``'s parameters."""
        request.parameters.update(self._matched(context))

    def _explained(self, exc: Failure) -> Failure | TritonError:
        """A decoding error as Triton gives it: a request whose inputs brought data of the
        wrong size (``InputSizes``) is checked against its model's config first, and
        what Triton finds first reported (``validation.size_error``)."""
        if not isinstance(exc, InputSizes):
            return exc
        request = exc.request
        try:
            spec = self.server.model_spec(request.model_name, request.model_version)
        except TritonError as lookup:  # an unknown model (or version) first, as Triton's
            return lookup
        return size_error(spec, exc)

    @_unary
    async def ModelInfer(self, request: pb.ModelInferRequest, context: Any) -> pb.ModelInferResponse:
        try:
            core_request, slots = request_from_proto(request, self.server.shared_memory)
        except InputSizes as exc:
            raise self._explained(exc) from None
        core_request.trace_context = _traceparent(context)
        if self._forward is not None:
            self._forwarded(core_request, context)
        front = self._front()
        try:
            response = await self.server.infer_async(core_request, _DECOUPLED_UNARY, front)
        finally:
            if front is not None:
                front.dropped()  # grpc.aio sends after this returns: no send stamps
        return response_to_proto(response, slots)

    def start_model_infer(self, data: bytes, context: Any, call: Answerer) -> Callable[[], None] | None:
        """``ModelInfer`` without a coroutine or a task, for the native transport
        (``calls.Method.start``): the request message's bytes are decoded (from a plan
        when one fits, ``tensors.RequestPlans``) and queued here, and the call answered
        from the server's callback on the loop, with what ``ModelInfer`` through
        ``_unary`` answers. Returns what cancels the request (None: answered already)."""
        front = self._front()
        try:
            decoded = self._plans.decode(data, self.server.shared_memory)
            if decoded is None:  # as the transport's Method.parse
                call.fail(StatusCode.INTERNAL, DESERIALIZING)
                return None
            core_request, slots, _, _ = decoded
            del data, decoded
            core_request.trace_context = _traceparent(context)
            if self._forward is not None:
                self._forwarded(core_request, context)

            def stamped(response: InferenceResponse) -> None:
                """``answer`` between the front end's send stamps (a traced request)."""
                assert front is not None
                if not call.waiting:
                    front.dropped()
                    return
                front.sending()
                try:
                    answer(response)
                finally:
                    front.sent()

            def answer(response: InferenceResponse) -> None:
                if not call.waiting:  # cut short: as the cancelled handler, nothing more
                    return
                try:
                    if response.error is not None:
                        call.fail(*_error_status(response.error, "ModelInfer"))
                        return
                    try:
                        body = self._encoder.encode(response) if slots is None else None
                        out = response_to_proto(response, slots) if body is None else None
                    except Exception as exc:
                        call.fail(*_error_status(exc, "ModelInfer"))
                        return
                    if body is not None:
                        call.answer_encoded(body)
                    else:
                        call.answer(out)
                except Exception as exc:  # a bug: logged here, not left to the loop's handler
                    report(log, "answering ModelInfer failed", exc)

            # Answered on the loop's next turn, also on the loop's own thread (a stub's
            # answer is read there): the model's instance is released and its next
            # queued request sent before this call is answered, which keeps a busy model
            # busy (answering at once cost c=8 ~8 % of its throughput and ~6 % more CPU
            # per inference, and saved nothing at c=1: bench/grpc_floor.md).
            then = answer if front is None else stamped
            answered = functools.partial(call_soon_threadsafe, call.loop, then)
            self.server.start_infer(core_request, answered, _DECOUPLED_UNARY, front=front)
        except Exception as exc:
            call.fail(*_error_status(self._explained(exc), "ModelInfer"))
            return None
        return core_request.cancel

    def unary_starts(self) -> dict[str, Callable[[bytes, Any, Answerer], Callable[[], None] | None]]:
        """The RPCs the native transport may run without a task (``calls.Method.start``):
        ModelInfer, where the server takes callbacks (``start_infer``)."""
        if not callable(getattr(self.server, "start_infer", None)):
            return {}
        return {"ModelInfer": self.start_model_infer}

    def stream_starts(self) -> dict[str, Callable[[Any, Streamer], StreamInfer]]:
        """The streaming RPCs the native transport may run without a task
        (``calls.Method.stream_start``): ModelStreamInfer, where the server takes
        callbacks (``submit``)."""
        if not callable(getattr(self.server, "submit", None)):
            return {}
        return {"ModelStreamInfer": self.start_model_stream}

    def start_model_stream(self, context: Any, call: Streamer) -> StreamInfer:
        """``ModelStreamInfer`` without a coroutine or tasks, for the native transport."""
        stream = StreamInfer(self.server, self._plans, self._encoder, context, call, self._front)
        if self._forward is not None:
            try:
                stream.forwarded = self._matched(context)
            except TritonError as exc:  # a reserved header: each request of the stream fails
                stream.refused = exc.message
        return stream

    async def ModelStreamInfer(
        self, request_iterator: AsyncIterator[pb.ModelInferRequest], context: Context
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """Each request gets its response(s) in order of completion.

        Errors go into the stream as ``error_message``, or end the stream with
        their status when the client sent the ``triton_grpc_error: true`` header.
        """
        metadata = dict(context.invocation_metadata() or ())
        grpc_errors = str(metadata.get("triton_grpc_error", "")).lower() == "true"
        traceparent = metadata.get("traceparent")
        traceparent = traceparent if isinstance(traceparent, str) else ""
        forwarded: dict[str, ParameterValue] = {}
        refused = ""  # a reserved header forwarded: each request of the stream fails so
        if self._forward is not None:
            try:
                forwarded = self._matched(context)
            except TritonError as exc:
                refused = exc.message
        # Bounded both ways: at most ``inflight`` requests in the server (the next is read
        # from the client when one completes, so the transport's flow control holds the
        # client back), and responses wait in a queue of that size for the client to take
        # them (a decoupled model's sender waits meanwhile).
        inflight = max(1, self.server.options.grpc_stream_max_inflight)
        queue: asyncio.Queue[pb.ModelStreamInferResponse | TritonError | None] = asyncio.Queue(inflight)
        slots = asyncio.Semaphore(inflight)
        pending: set[asyncio.Task[None]] = set()

        def failed(
            msg: pb.ModelInferRequest, error: TritonError
        ) -> pb.ModelStreamInferResponse | TritonError:
            if grpc_errors:
                return error
            return pb.ModelStreamInferResponse(error_message=error.message, infer_response=_named(msg))

        async def one(msg: pb.ModelInferRequest) -> None:
            try:
                core_request, slots = request_from_proto(msg, self.server.shared_memory)
                core_request.trace_context = traceparent
                if refused:
                    raise TritonError.invalid_arg(refused)
                if forwarded:
                    core_request.parameters.update(forwarded)
            except TritonError as exc:
                exc.__traceback__ = None  # its frames hold the message
                await queue.put(failed(msg, self._explained(exc)))
                return
            flag_final = empty_final(msg)
            try:
                # Cancelling this task (the client closed the stream) cancels the request there.
                async with contextlib.aclosing(self.server.stream_flags_async(core_request)) as calls:
                    async for response, flags in calls:
                        final = bool(flags & RESPONSE_COMPLETE_FINAL)
                        if response is not None and response.error is not None:
                            await queue.put(failed(msg, response.error))
                            continue
                        if response is None:
                            if not flag_final:
                                continue
                            # Triton's empty final response: the request's name, id and
                            # version string as sent (empty when it named none), no outputs.
                            out = _named(msg)
                        else:
                            out = response_to_proto(response, slots)
                        # Triton flags every stream response, with or without
                        # triton_enable_empty_final_response: a non-decoupled model's
                        # one response is final (true), a decoupled model's are not
                        # unless sent with the final flag.
                        out.parameters[FINAL_RESPONSE].bool_param = final
                        await queue.put(pb.ModelStreamInferResponse(infer_response=out))
            except TritonError as exc:
                exc.__traceback__ = None  # its frames hold the request
                await queue.put(failed(msg, exc))
            except Exception as exc:  # never leave the stream hanging on a bug
                message = report(log, "stream request failed", exc)
                exc.__traceback__ = None
                await queue.put(pb.ModelStreamInferResponse(error_message=message))

        def done(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            slots.release()

        async def read() -> None:
            try:
                await slots.acquire()
                async for msg in request_iterator:
                    task = asyncio.create_task(one(msg))
                    del msg
                    pending.add(task)
                    task.add_done_callback(done)
                    await slots.acquire()  # read the next only when there is room for it
                if pending:
                    await asyncio.gather(*list(pending))
            finally:
                await queue.put(None)

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, TritonError):
                    await context.abort(status_of(item.code), item.message)
                else:
                    yield item
        finally:
            reader.cancel()
            for task in list(pending):
                task.cancel()

    # -- shared memory -------------------------------------------------------------------

    @_unary
    async def SystemSharedMemoryStatus(
        self, request: pb.SystemSharedMemoryStatusRequest, context: Any
    ) -> pb.SystemSharedMemoryStatusResponse:
        out = pb.SystemSharedMemoryStatusResponse()
        for region in self.server.shared_memory.status(request.name or None):
            out.regions[region["name"]].CopyFrom(pb.SystemSharedMemoryStatusResponse.RegionStatus(**region))
        return out

    @_unary
    async def SystemSharedMemoryRegister(
        self, request: pb.SystemSharedMemoryRegisterRequest, context: Any
    ) -> pb.SystemSharedMemoryRegisterResponse:
        check_client_shm(self.server.options.allow_client_shm)
        self.server.shared_memory.register(request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    @_unary
    async def SystemSharedMemoryUnregister(
        self, request: pb.SystemSharedMemoryUnregisterRequest, context: Any
    ) -> pb.SystemSharedMemoryUnregisterResponse:
        check_client_shm(self.server.options.allow_client_shm)
        self.server.shared_memory.unregister(request.name or None)
        return pb.SystemSharedMemoryUnregisterResponse()

    @_unary
    async def CudaSharedMemoryStatus(
        self, request: pb.CudaSharedMemoryStatusRequest, context: Any
    ) -> pb.CudaSharedMemoryStatusResponse:
        out = pb.CudaSharedMemoryStatusResponse()
        for region in self.server.shared_memory.cuda_status(request.name or None):
            out.regions[region["name"]].CopyFrom(pb.CudaSharedMemoryStatusResponse.RegionStatus(**region))
        return out

    @_unary
    async def CudaSharedMemoryRegister(
        self, request: pb.CudaSharedMemoryRegisterRequest, context: Any
    ) -> pb.CudaSharedMemoryRegisterResponse:
        check_client_shm(self.server.options.allow_client_shm)
        await asyncio.to_thread(
            self.server.shared_memory.register_cuda,
            request.name,
            request.raw_handle,
            request.device_id,
            request.byte_size,
        )
        return pb.CudaSharedMemoryRegisterResponse()

    @_unary
    async def CudaSharedMemoryUnregister(
        self, request: pb.CudaSharedMemoryUnregisterRequest, context: Any
    ) -> pb.CudaSharedMemoryUnregisterResponse:
        check_client_shm(self.server.options.allow_client_shm)
        self.server.shared_memory.unregister_cuda(request.name or None)
        return pb.CudaSharedMemoryUnregisterResponse()


class _Request:
    """One ModelStreamInfer request in flight (``StreamInfer``)."""

    __slots__ = ("data", "msg", "request", "slots", "empty_final", "front")

    def __init__(
        self,
        data: bytes,
        msg: pb.ModelInferRequest | None,
        request: InferenceRequest,
        slots: OutputSlots,
        empty_final: bool,
        front: FrontEnd | None,
    ) -> None:
        self.data = data  # the message's bytes, for ``message`` (the inputs are views of them)
        self.msg = msg
        self.request = request
        self.slots = slots
        self.empty_final = empty_final
        #: The trace's front-end stamps, while tracing is on.
        self.front = front

    def message(self) -> pb.ModelInferRequest:
        """The request message (parsed when first asked: its name, version and id as
        sent, for an error or the empty final response)."""
        if self.msg is None:
            self.msg = pb.ModelInferRequest.FromString(self.data)
        return self.msg


class StreamInfer:
    """``ModelStreamInfer`` for one call without tasks or queues (``calls.StreamHandler``):
    each request message is decoded (from a plan when one fits, as ``start_model_infer``)
    and submitted with a callback that carries its responses to the loop, where they are
    encoded (``ResponseEncoder.encode_stream``) and sent at once, in order of completion.

    What the coroutine ``ModelStreamInfer`` answers, byte for byte: the same in-stream
    errors (or statuses with ``triton_grpc_error``), the same ``triton_final_response``
    flags and empty final responses, at most ``grpc_stream_max_inflight`` requests in
    flight (the call parks the next message until one completes), and every request in
    flight cancelled when the call is cut short.
    """

    __slots__ = (
        "_server",
        "_plans",
        "_encoder",
        "_call",
        "_front",
        "_grpc_errors",
        "_traceparent",
        "forwarded",
        "refused",
        "_limit",
        "_inflight",
        "_ended",
    )

    def __init__(
        self,
        server: Server,
        plans: RequestPlans,
        encoder: ResponseEncoder,
        context: Any,
        call: Streamer,
        front: Callable[[], FrontEnd | None] = lambda: None,
    ) -> None:
        self._server = server
        self._plans = plans
        self._encoder = encoder
        self._call = call
        #: Makes a request's front-end stamps while tracing is on (``InferenceServicer._front``).
        self._front = front
        metadata = dict(context.invocation_metadata() or ())  # as ModelStreamInfer reads it
        self._grpc_errors = str(metadata.get("triton_grpc_error", "")).lower() == "true"
        traceparent = metadata.get("traceparent")
        self._traceparent = traceparent if isinstance(traceparent, str) else ""
        #: The call's metadata forwarded to every request of the stream (``_matched``).
        self.forwarded: dict[str, ParameterValue] = {}
        #: Why every request of the stream fails (a reserved header to forward), or "".
        self.refused = ""
        self._limit = max(1, server.options.grpc_stream_max_inflight)
        self._inflight: set[_Request] = set()
        self._ended = False

    @property
    def room(self) -> bool:
        return len(self._inflight) < self._limit

    def message(self, data: bytes) -> None:
        entry: _Request | None = None
        front = self._front()
        try:
            try:
                decoded = self._plans.decode(data, self._server.shared_memory)
            except TritonError as exc:
                exc.__traceback__ = None  # its frames hold the message
                self._failed(pb.ModelInferRequest.FromString(data), exc)
                return
            if decoded is None:  # as the transport's Method.parse
                self._call.fail(StatusCode.INTERNAL, DESERIALIZING)
                return
            request, slots, msg, empty_final = decoded
            del decoded
            if self.refused:
                named = msg or pb.ModelInferRequest.FromString(data)
                self._failed(named, TritonError.invalid_arg(self.refused))
                return
            request.trace_context = self._traceparent
            if self.forwarded:
                request.parameters.update(self.forwarded)
            entry = _Request(data, msg, request, slots, empty_final, front)
            del data, msg
            self._inflight.add(entry)
            try:
                # Answered on the loop's next turn, also on its own thread (start_model_infer).
                answered = functools.partial(call_soon_threadsafe, self._call.loop, self._answered, entry)
                self._server.submit(request, answered, front=front)
            except TritonError as exc:
                self._inflight.discard(entry)
                exc.__traceback__ = None
                self._failed(entry.message(), exc)
        except Exception as exc:  # never leave the stream hanging on a bug
            if entry is not None:
                self._inflight.discard(entry)
            self._call.send_message(
                pb.ModelStreamInferResponse(
                    error_message=report(log, "stream request failed", exc)
                ).SerializeToString()
            )
            exc.__traceback__ = None

    def end(self) -> None:
        self._ended = True
        if not self._inflight:
            self._call.close()

    def cancel(self) -> None:
        inflight, self._inflight = self._inflight, set()
        for entry in inflight:
            entry.request.cancel()
            if entry.front is not None:
                entry.front.dropped()  # what it still answers is dropped

    def _answered(self, entry: _Request, response: InferenceResponse | None, flags: int) -> None:
        """One of ``entry``'s responses (on the loop's thread), as ModelStreamInfer's ``one``
        handles it; dropped once the request was cancelled."""
        if entry not in self._inflight:
            return
        call = self._call
        final = bool(flags & RESPONSE_COMPLETE_FINAL)
        front = entry.front
        sends = response is not None or entry.empty_final  # a stream message goes out
        if front is not None and sends:
            front.sending()
        try:
            if response is not None and response.error is not None:
                self._failed(entry.message(), response.error)
            elif response is None:
                if entry.empty_final:
                    out = _named(entry.message())  # Triton's empty final response
                    out.parameters[FINAL_RESPONSE].bool_param = final
                    call.send_message(pb.ModelStreamInferResponse(infer_response=out).SerializeToString())
            else:
                body = self._encoder.encode_stream(response, final) if entry.slots is None else None
                if body is None:
                    out = response_to_proto(response, entry.slots)
                    out.parameters[FINAL_RESPONSE].bool_param = final
                    body = pb.ModelStreamInferResponse(infer_response=out).SerializeToString()
                call.send_message(body)
        except TritonError as exc:  # the request ends here, cancelled (as ``one``'s)
            exc.__traceback__ = None  # its frames hold the request
            if not final:
                entry.request.cancel()
                final = True
            self._failed(entry.message(), exc)
        except Exception as exc:  # never leave the stream hanging on a bug
            if not final:
                entry.request.cancel()
                final = True
            message = report(log, "stream request failed", exc)
            exc.__traceback__ = None
            call.send_message(pb.ModelStreamInferResponse(error_message=message).SerializeToString())
        if front is not None:
            if sends:
                front.sent(last=final)
            elif final:
                front.dropped()  # the final flag alone: nothing sent
        if final and entry in self._inflight:
            self._inflight.discard(entry)
            if self._ended and not self._inflight:
                call.close()
            else:
                call.take()

    def _failed(self, msg: pb.ModelInferRequest, error: TritonError) -> None:
        """A request's error: in the stream as ``error_message``, or the call's status
        with ``triton_grpc_error`` (ModelStreamInfer's ``failed``)."""
        if self._grpc_errors:
            self._call.fail(status_of(error.code), error.message)
            return
        response = pb.ModelStreamInferResponse(error_message=error.message, infer_response=_named(msg))
        self._call.send_message(response.SerializeToString())


def _named(msg: pb.ModelInferRequest) -> pb.ModelInferResponse:
    """A response naming ``msg``'s model, version and id as sent (the version empty when
    it named none), nothing else: an error's in the stream, or the empty final response."""
    return pb.ModelInferResponse(model_name=msg.model_name, model_version=msg.model_version, id=msg.id)


class HealthServicer:
    """grpc.health.v1: SERVING while the server is ready (service "" or the inference service)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: Context
    ) -> health_pb2.HealthCheckResponse:
        if request.service not in ("", "inference.GRPCInferenceService"):
            await context.abort(StatusCode.NOT_FOUND, f"unknown service '{request.service}'")
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if self.server.ready()
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        return health_pb2.HealthCheckResponse(status=status)


_DECOUPLED_UNARY = "ModelInfer RPC doesn't support models with decoupled transaction policy"


def _traceparent(context: Any) -> str:
    """The W3C ``traceparent`` of the call's metadata (OpenTelemetry tracing), or ""."""
    fast = getattr(context, "traceparent", None)  # the native transport's: from the headers
    if fast is not None:
        return str(fast())
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent" and isinstance(value, str):
            return value
    return ""
