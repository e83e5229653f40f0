"""Build the gRPC server for a ``Server``: the native transport, or grpc.aio with its services and options;
``GrpcFrontend`` runs it for ``tritonpy serve`` (``frontends.Frontend``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Union

import grpc

from ..frontends import Frontend, FrontendError
from ..options import ServerOptions
from ..ports import port_problem
from ..server import Server
from . import grpc_service_pb2_grpc as pb_grpc
from . import health_pb2_grpc
from .restricted import RestrictedProtocol
from .servicer import HealthServicer, InferenceServicer

if TYPE_CHECKING:
    from .native import NativeServer

#: Either transport: both have grpc.aio.Server's start, stop(grace) and wait_for_termination.
GrpcServer = Union["NativeServer", grpc.aio.Server]


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
        ("grpc.so_reuseport", 0),  # a busy port must fail, not be shared silently
    ]


def check_limits(options: ServerOptions) -> None:
    """ValueError for a connection limit flag out of its range."""
    if not 1 <= options.grpc_max_concurrent_streams <= 2**31 - 1:
        raise ValueError("--grpc-max-concurrent-streams must be between 1 and 2147483647")
    for flag, value in (
        ("--grpc-http2-max-reset-burst", options.grpc_http2_max_reset_burst),
        ("--grpc-http2-max-reset-rate", options.grpc_http2_max_reset_rate),
        ("--grpc-max-connection-idle", options.grpc_max_connection_idle),
        ("--grpc-max-connection-age", options.grpc_max_connection_age),
        ("--grpc-max-connection-age-grace", options.grpc_max_connection_age_grace),
        ("--grpc-max-connections", options.grpc_max_connections),
    ):
        if value < 0:
            raise ValueError(f"{flag} must not be negative")


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None


def credentials(options: ServerOptions) -> grpc.ServerCredentials | None:
    """TLS credentials from ``--grpc-use-ssl`` and friends, or None for plaintext."""
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


def create_grpc_server(server: Server) -> tuple[GrpcServer, int]:
    """The gRPC server ``--grpc-implementation`` names, bound to
    ``--grpc-address``/``--grpc-port`` (not started).

    Returns the server and the bound port. Raises ValueError for bad TLS
    settings or limits and OSError when the port cannot be bound.
    """
    check_limits(server.options)
    if server.options.grpc_implementation == "grpcio":
        return create_grpcio_server(server)
    if server.options.grpc_implementation != "tritonpy":
        raise ValueError(f"unknown --grpc-implementation '{server.options.grpc_implementation}'")
    from .native import create_native_server

    return create_native_server(server)


def create_grpcio_server(server: Server) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server bound to ``--grpc-address``/``--grpc-port`` (not started)."""
    options = server.options
    interceptors = [RestrictedProtocol(server.grpc_restrictions)] if server.grpc_restrictions else []
    aio = grpc.aio.server(options=channel_options(options), interceptors=interceptors)
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(server), aio)  # type: ignore[no-untyped-call]
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(server), aio)  # type: ignore[no-untyped-call]
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


class GrpcFrontend(Frontend):
    """The gRPC server of ``create_grpc_server``, bound when made, as a front end."""

    name = "GRPCInferenceService"

    def __init__(self, server: Server) -> None:
        options = server.options
        self._where = (options.grpc_address, options.grpc_port)
        self.restricted = server.grpc_restrictions
        try:
            self._grpc, _ = create_grpc_server(server)
        except (OSError, ValueError) as exc:
            # Taken while the models loaded? Then say so, not in gRPC's words.
            busy = port_problem(options) if isinstance(exc, OSError) else None
            where = f"{options.grpc_address}:{options.grpc_port}"
            raise FrontendError(busy or f"failed to start GRPC service at {where}: {exc}") from None

    def ports(self) -> list[tuple[str, int]]:
        return [self._where]

    async def start(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        await self._grpc.start()

    async def wait(self) -> None:
        await self._grpc.wait_for_termination()

    async def stop(self, deadline: float | None) -> None:
        await self._grpc.stop(None if deadline is None else max(0.0, deadline - time.monotonic()))
