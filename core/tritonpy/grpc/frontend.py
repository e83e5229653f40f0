"""Build the gRPC server for a ``Server``: the native transport, or grpc.aio (``aio.py``,
imported only when chosen: grpcio is an extra); ``GrpcFrontend`` runs it for
``tritonpy serve`` (``frontends.Frontend``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Union

from ..frontends import Frontend, FrontendError
from ..options import ServerOptions
from ..ports import port_problem
from ..server import Server

if TYPE_CHECKING:
    import grpc

    from .native import NativeServer

#: Either transport: both have grpc.aio.Server's start, stop(grace) and wait_for_termination.
GrpcServer = Union["NativeServer", "grpc.aio.Server"]

#: ``--grpc-implementation grpcio`` where grpcio is not installed.
GRPCIO_MISSING = (
    "--grpc-implementation grpcio needs the grpcio package, which is not installed: "
    "pip install 'tritonpy[grpcio]' (or use the default --grpc-implementation tritonpy)"
)


def grpcio_problem(options: ServerOptions) -> str | None:
    """``GRPCIO_MISSING`` when the options serve gRPC on grpcio and grpcio cannot be imported."""
    if not options.allow_grpc or options.grpc_implementation != "grpcio":
        return None
    try:
        import grpc  # noqa: F401
    except ImportError:
        return GRPCIO_MISSING
    return None


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


def create_grpc_server(server: Server) -> tuple[GrpcServer, int]:
    """The gRPC server ``--grpc-implementation`` names, bound to
    ``--grpc-address``/``--grpc-port`` (not started).

    Returns the server and the bound port. Raises ValueError for bad TLS
    settings or limits, or grpcio missing for its transport, and OSError when
    the port cannot be bound.
    """
    check_limits(server.options)
    if server.options.grpc_implementation == "grpcio":
        try:
            from .aio import create_grpcio_server
        except ImportError as exc:
            if exc.name == "grpc" or str(exc.name).startswith("grpc."):
                raise ValueError(GRPCIO_MISSING) from None
            raise
        return create_grpcio_server(server)
    if server.options.grpc_implementation != "tritonpy":
        raise ValueError(f"unknown --grpc-implementation '{server.options.grpc_implementation}'")
    from .native import create_native_server

    return create_native_server(server)


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
