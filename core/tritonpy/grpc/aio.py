"""The grpcio transport (``--grpc-implementation grpcio``): the servicers on a grpc.aio server.

The only module of the server, with the generated ``*_pb2_grpc.py`` it
registers the servicers through, that imports grpcio (the ``grpcio`` extra);
``frontend.py`` imports it only when this transport is chosen.

The servicers are the native transport's (``servicer.py``): they abort with
``status.StatusCode`` and raise ``status.Aborted``. Here each handler is given a
``Context`` around grpc's, whose ``abort`` raises ``Aborted``, and the
handler's wrapper turns that into grpc's own abort with the same
``grpc.StatusCode``, so grpc.aio answers exactly as it would have. The RPCs the
servicers do not define are left to the generated base classes (grpcio's
UNIMPLEMENTED "Method not implemented!").

The wrapper also writes the native transport's line per answered call at
verbose level 1 (``calls.Call._access``): same logger, same layout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc
from google.protobuf.descriptor import ServiceDescriptor

from ..options import ServerOptions
from ..restricted import Requirement
from ..server import Server
from . import grpc_service_pb2 as pb
from . import grpc_service_pb2_grpc as pb_grpc
from . import health_pb2, health_pb2_grpc
from .restricted import rpc_requirements
from .servicer import HealthServicer, InferenceServicer
from .status import Aborted, StatusCode

log = logging.getLogger("tritonpy.grpc")

#: Our status codes as grpc's (the same names and numbers).
GRPC_STATUS: dict[StatusCode, grpc.StatusCode] = {code: grpc.StatusCode[code.name] for code in StatusCode}


def channel_options(options: ServerOptions) -> list[tuple[str, int]]:
    """grpc core arguments for tritonserver's keepalive and message-size flags."""
    return [
        ("grpc.max_send_message_length", options.grpc_max_message_size),
        ("grpc.max_receive_message_length", options.grpc_max_message_size),
        ("grpc.keepalive_time_ms", options.grpc_keepalive_time),
        ("grpc.keepalive_timeout_ms", options.grpc_keepalive_timeout),
        ("grpc.keepalive_permit_without_calls", int(options.grpc_keepalive_permit_without_calls)),
        ("grpc.http2.max_pings_without_data", options.grpc_http2_max_pings_without_data),
        (
            "grpc.http2.min_recv_ping_interval_without_data_ms",
            options.grpc_http2_min_recv_ping_interval_without_data,
        ),
        ("grpc.http2.max_ping_strikes", options.grpc_http2_max_ping_strikes),
        ("grpc.max_concurrent_streams", options.grpc_max_concurrent_streams),
        *[
            (name, value)
            for name, value in (
                ("grpc.max_connection_idle_ms", options.grpc_max_connection_idle),
                ("grpc.max_connection_age_ms", options.grpc_max_connection_age),
                ("grpc.max_connection_age_grace_ms", options.grpc_max_connection_age_grace),
            )
            if value > 0  # 0: grpc core's default, infinite
        ],
        # A busy port must fail, not be shared silently, unless --reuse-grpc-port asks to share it.
        ("grpc.so_reuseport", 1 if options.reuse_grpc_port else 0),
    ]


def credentials(options: ServerOptions) -> grpc.ServerCredentials | None:
    """TLS credentials from ``--grpc-use-ssl`` and friends, or None for plaintext."""
    from .frontend import _read

    if not options.grpc_use_ssl and not options.grpc_use_ssl_mutual:
        return None
    if not options.grpc_server_cert or not options.grpc_server_key:
        raise ValueError("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key")
    pair = (
        _read(options.grpc_server_key, "--grpc-server-key"),
        _read(options.grpc_server_cert, "--grpc-server-cert"),
    )
    root = _read(options.grpc_root_cert, "--grpc-root-cert") if options.grpc_root_cert else None
    if options.grpc_use_ssl_mutual and root is None:
        raise ValueError("--grpc-use-ssl-mutual needs --grpc-root-cert")
    return grpc.ssl_server_credentials(
        [pair], root_certificates=root, require_client_auth=options.grpc_use_ssl_mutual
    )


def create_grpcio_server(server: Server) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server bound to ``--grpc-address``/``--grpc-port`` (not started)."""
    options = server.options
    interceptors = [RestrictedProtocol(server.grpc_restrictions)] if server.grpc_restrictions else []
    aio = grpc.aio.server(options=channel_options(options), interceptors=interceptors)
    inference = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    health = health_pb2.DESCRIPTOR.services_by_name["Health"]
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        on_grpcio(InferenceServicer(server), pb_grpc.GRPCInferenceServiceServicer, inference), aio
    )
    health_pb2_grpc.add_HealthServicer_to_server(  # type: ignore[no-untyped-call]
        on_grpcio(HealthServicer(server), health_pb2_grpc.HealthServicer, health), aio
    )
    address = f"{options.grpc_address}:{options.grpc_port}"
    if ":" in options.grpc_address:
        address = f"[{options.grpc_address}]:{options.grpc_port}"
    creds = credentials(options)
    try:
        port = aio.add_secure_port(address, creds) if creds else aio.add_insecure_port(address)
    except RuntimeError as exc:  # grpc reports a failed bind this way
        raise OSError(f"failed to bind {address}: {exc}") from None
    if port == 0:
        raise OSError(f"failed to bind {address}")
    return aio, port


# -- the servicers on grpc.aio ------------------------------------------------------------


class Context:
    """grpc.aio's ServicerContext as the servicers use it (``servicer.Context``):
    ``abort`` raises ``Aborted``, which the handler's wrapper hands to grpc."""

    __slots__ = ("_context",)

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context

    async def abort(self, code: StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        raise Aborted(code, details)

    def invocation_metadata(self) -> Any:
        return self._context.invocation_metadata()

    def time_remaining(self) -> float | None:
        remaining: float | None = self._context.time_remaining()
        return remaining

    def peer(self) -> str:
        return str(self._context.peer())


def on_grpcio(servicer: object, base: type, service: ServiceDescriptor) -> Any:
    """An instance of the generated ``base`` whose RPCs are ``servicer``'s, each wrapped
    for grpc.aio; an RPC ``servicer`` does not define keeps the base's answer."""
    adapted = base()
    for rpc in service.methods:
        if rpc.name not in type(servicer).__dict__:  # as the native transport looks them up
            continue
        handler = getattr(servicer, rpc.name)
        streaming = rpc.client_streaming or rpc.server_streaming
        wrap = _streaming if streaming else _unary
        setattr(adapted, rpc.name, wrap(handler, rpc.name))
    return adapted


def _unary(
    handler: Callable[[Any, Any], Awaitable[Any]], name: str
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            response = await handler(request, Context(context))
        except Aborted as exc:
            code, details = exc.code, exc.details
            exc.__traceback__ = None  # its frames can hold a large request
        except BaseException as exc:
            _access_failed(context, name, exc)
            raise
        else:
            _answered(context, name, StatusCode.OK)
            return response
        del request  # grpc's abort below must not keep the message alive
        _answered(context, name, code)
        await context.abort(GRPC_STATUS[code], details)

    return call


def _streaming(
    handler: Callable[[Any, Any], AsyncIterator[Any]], name: str
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    async def call(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async with contextlib.aclosing(handler(requests, Context(context))) as responses:  # type: ignore[type-var]
                async for response in responses:
                    yield response
        except Aborted as exc:
            code, details = exc.code, exc.details
            exc.__traceback__ = None
        except BaseException as exc:
            _access_failed(context, name, exc)
            raise
        else:
            _answered(context, name, StatusCode.OK)
            return
        _answered(context, name, code)
        await context.abort(GRPC_STATUS[code], details)

    return call


def _answered(context: grpc.aio.ServicerContext, name: str, code: StatusCode) -> None:
    """The native transport's line per answered call (``calls.Call._access``), at a verbose
    level: a call costs one level check when it is off."""
    if log.isEnabledFor(logging.DEBUG):
        _access(context, name, code)


def _access(context: grpc.aio.ServicerContext, name: str, code: StatusCode) -> None:
    log.debug('%s - "%s" %s', context.peer(), name, code.name)


def _access_failed(context: grpc.aio.ServicerContext, name: str, exc: BaseException) -> None:
    """The line for a handler that raised: grpc.aio answers an exception UNKNOWN; a
    cancelled handler is logged, as on the native transport, only when its deadline
    passed (a client that went away gets no answer, and no line)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    if isinstance(exc, Exception):
        _access(context, name, StatusCode.UNKNOWN)
    elif isinstance(exc, asyncio.CancelledError):
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            _access(context, name, StatusCode.DEADLINE_EXCEEDED)


# -- restricted API groups ----------------------------------------------------------------

_STREAMING = {"ModelStreamInfer", "Watch"}


class RestrictedProtocol(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Calls to a restricted group without ``triton-grpc-protocol-<key>`` get Triton's UNAVAILABLE."""

    def __init__(self, groups: dict[str, Requirement]) -> None:
        # Metadata keys arrive in lower case; the message names the key as configured.
        self._needs = rpc_requirements(groups)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        rpc = handler_call_details.method.rsplit("/", 1)[-1]
        header = self._needs.get(rpc)
        if header is not None:
            metadata = handler_call_details.invocation_metadata or ()
            pairs = ((str(k).lower(), v if isinstance(v, str) else "") for k, v in metadata)
            if not header.met_by(pairs):
                return _refusal(f"This protocol is restricted, expecting header '{header.key}'", rpc)
        return await continuation(handler_call_details)


def _refusal(message: str, rpc: str) -> grpc.RpcMethodHandler:
    if rpc in _STREAMING:

        async def refuse_stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAVAILABLE, message)
            yield  # an async generator, as a streaming handler must be

        return grpc.stream_stream_rpc_method_handler(refuse_stream)

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    return grpc.unary_unary_rpc_method_handler(refuse)


__all__ = [
    "GRPC_STATUS",
    "Context",
    "RestrictedProtocol",
    "channel_options",
    "create_grpcio_server",
    "credentials",
    "on_grpcio",
]
