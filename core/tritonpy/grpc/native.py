"""The native gRPC server: HTTP/2 connections on the server's event loop, dispatching
``:path`` to the servicers' handlers (``--grpc-implementation tritonpy``).

It offers grpc.aio.Server's ``start``, ``stop(grace)`` and
``wait_for_termination``, so serving.py runs either the same way.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterable

from ..options import ServerOptions
from ..ports import listen
from ..server import Server
from . import grpc_service_pb2 as pb
from . import health_pb2, http2
from .calls import Call, Method, http_error, refuse, timeout_of, wbits_of
from .restricted import rpc_requirements
from .servicer import HealthServicer, InferenceServicer
from .status import StatusCode


def methods(server: Server) -> dict[bytes, Method]:
    """``:path`` -> Method for every RPC the servicers implement, with its restriction."""
    needs = rpc_requirements(server.grpc_restrictions)
    table: dict[bytes, Method] = {}
    services = (
        (pb.DESCRIPTOR.services_by_name["GRPCInferenceService"], pb, InferenceServicer(server)),
        (health_pb2.DESCRIPTOR.services_by_name["Health"], health_pb2, HealthServicer(server)),
    )
    for service, module, servicer in services:
        starts = servicer.unary_starts() if isinstance(servicer, InferenceServicer) else {}
        stream_starts = servicer.stream_starts() if isinstance(servicer, InferenceServicer) else {}
        for rpc in service.methods:
            if rpc.name not in type(servicer).__dict__:
                continue  # not implemented: UNIMPLEMENTED "Method not found!", as an unknown path
            request_type = getattr(module, rpc.input_type.name)
            table[f"/{service.full_name}/{rpc.name}".encode()] = Method(
                rpc.name,
                getattr(servicer, rpc.name),
                request_type.FromString,
                rpc.client_streaming or rpc.server_streaming,
                needs.get(rpc.name),
                None if rpc.client_streaming or rpc.server_streaming else starts.get(rpc.name),
                stream_starts.get(rpc.name) if rpc.client_streaming and rpc.server_streaming else None,
            )
    return table


def tls_context(options: ServerOptions) -> ssl.SSLContext | None:
    """An SSLContext (ALPN h2) from ``--grpc-use-ssl`` and friends, or None for plaintext."""
    from .frontend import _read

    if not options.grpc_use_ssl and not options.grpc_use_ssl_mutual:
        return None
    if not options.grpc_server_cert or not options.grpc_server_key:
        raise ValueError("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key")
    _read(options.grpc_server_key, "--grpc-server-key")
    _read(options.grpc_server_cert, "--grpc-server-cert")
    if options.grpc_use_ssl_mutual and not options.grpc_root_cert:
        raise ValueError("--grpc-use-ssl-mutual needs --grpc-root-cert")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["h2"])
    try:
        context.load_cert_chain(options.grpc_server_cert, options.grpc_server_key)
        if options.grpc_root_cert:
            _read(options.grpc_root_cert, "--grpc-root-cert")
            context.load_verify_locations(options.grpc_root_cert)
    except ssl.SSLError as exc:
        raise ValueError(f"bad gRPC TLS certificate or key: {exc}") from None
    if options.grpc_use_ssl_mutual:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def config_of(options: ServerOptions) -> http2.Config:
    return http2.Config(
        keepalive_time=options.grpc_keepalive_time / 1000,
        keepalive_timeout=options.grpc_keepalive_timeout / 1000,
        keepalive_permit_without_calls=options.grpc_keepalive_permit_without_calls,
        max_pings_without_data=options.grpc_http2_max_pings_without_data,
        min_recv_ping_interval_without_data=options.grpc_http2_min_recv_ping_interval_without_data / 1000,
        max_ping_strikes=options.grpc_http2_max_ping_strikes,
        max_concurrent_streams=options.grpc_max_concurrent_streams,
        reset_burst=options.grpc_http2_max_reset_burst,
        reset_rate=float(options.grpc_http2_max_reset_rate),
        max_connection_idle=options.grpc_max_connection_idle / 1000,
        max_connection_age=options.grpc_max_connection_age / 1000,
        max_connection_age_grace=options.grpc_max_connection_age_grace / 1000,
        buffer_limit=options.grpc_connection_buffer_limit,
    )


class NativeServer:
    """gRPC on asyncio: grpc.aio.Server's lifecycle methods over ``http2.Connection``s."""

    def __init__(self, server: Server, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
        self.options = server.options
        self.methods = methods(server)
        self.config = config_of(server.options)
        self._sock = sock
        self._tls = tls
        self._listener: asyncio.Server | None = None
        self._connections: set[http2.Connection] = set()
        self._refused: set[http2.Connection] = set()  # over --grpc-max-connections, closing
        self._tasks: set[asyncio.Task[None]] = set()
        self._terminated: asyncio.Event | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._terminated = asyncio.Event()
        self._listener = await loop.create_server(self._connection, sock=self._sock, ssl=self._tls)

    async def wait_for_termination(self) -> None:
        assert self._terminated is not None
        await self._terminated.wait()

    async def stop(self, grace: float | None) -> None:
        """Stop accepting; GOAWAY every connection; after ``grace`` seconds (None: at
        once) close those still open, cancelling their calls."""
        if self._listener is not None:
            self._listener.close()
        else:
            self._sock.close()  # never started
        connections = list(self._connections)
        for conn in connections:
            conn.shutdown()
        if grace and connections:
            waits = [asyncio.ensure_future(conn.closed_event.wait()) for conn in connections]
            _, pending = await asyncio.wait(waits, timeout=grace)
            for wait in pending:
                wait.cancel()
        closing = [*self._connections, *self._refused]  # until connection_lost
        for conn in closing:
            conn.abort()
        if closing:  # let the transports close their sockets while the loop still runs
            lost = [asyncio.ensure_future(conn.lost_event.wait()) for conn in closing]
            _, pending = await asyncio.wait(lost, timeout=1.0)
            for wait in pending:
                wait.cancel()
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
        if self._terminated is not None:
            self._terminated.set()

    # -- connections and calls -------------------------------------------------------

    def _connection(self) -> http2.Connection:
        limit = self.options.grpc_max_connections
        if limit and len(self._connections) >= limit:  # GOAWAY at once; closed a moment later
            refused = http2.Connection(self._dispatch, self.config, self._refused.discard, refuse=True)
            self._refused.add(refused)
            return refused
        conn = http2.Connection(self._dispatch, self.config, self._connections.discard)
        self._connections.add(conn)
        return conn

    def _dispatch(self, stream: http2.Stream) -> http2.Receiver:
        path = method = content_type = encoding = timeout = None
        for name, value in stream.headers:
            if name == b":path":
                path = value
            elif name == b":method":
                method = value
            elif name == b"content-type":
                content_type = value
            elif name == b"grpc-encoding":
                encoding = value
            elif name == b"grpc-timeout":
                timeout = value
        if path is None or method is None:  # a malformed request (RFC 9113 8.3.1): a stream error
            stream.reset(http2.PROTOCOL_ERROR)
            return _IGNORED
        if method != b"POST":
            http_error(stream, 405)
            return _IGNORED
        if content_type is None or not content_type.startswith(b"application/grpc"):
            http_error(stream, 415)
            return _IGNORED
        rpc = self.methods.get(path or b"")
        if rpc is None:
            refuse(stream, StatusCode.UNIMPLEMENTED, "Method not found!")
            return _IGNORED
        if rpc.requirement is not None and not rpc.requirement.met_by(_lowered(stream.headers)):
            message = f"This protocol is restricted, expecting header '{rpc.requirement.key}'"
            refuse(stream, StatusCode.UNAVAILABLE, message)
            return _IGNORED
        known, wbits = wbits_of(encoding)
        if not known:
            assert encoding is not None
            algorithm = encoding.decode("latin-1")
            refuse(stream, StatusCode.UNIMPLEMENTED, f"Compression algorithm '{algorithm}' is not supported")
            return _IGNORED
        deadline = None
        if timeout is not None and (seconds := timeout_of(timeout)) is not None:
            deadline = time.monotonic() + seconds
        limit = self.options.grpc_max_message_size
        return Call(stream, rpc, limit, wbits, deadline, self._tasks)


def _lowered(headers: Iterable[tuple[bytes, bytes]]) -> Iterable[tuple[str, str]]:
    return ((name.decode("latin-1"), value.decode("latin-1")) for name, value in headers)


class _Ignored:
    """The receiver of a stream answered at once: what the client still sends is dropped."""

    def data(self, chunk: bytes) -> None:
        pass

    def end(self) -> None:
        pass

    def reset(self, code: int) -> None:
        pass


_IGNORED = _Ignored()


def create_native_server(server: Server) -> tuple[NativeServer, int]:
    """A native gRPC server bound to ``--grpc-address``/``--grpc-port`` (not started).

    Raises ValueError for bad TLS settings and OSError when the port cannot be bound.
    """
    options = server.options
    tls = tls_context(options)
    sock = listen(options.grpc_address, options.grpc_port, options.reuse_grpc_port)
    return NativeServer(server, sock, tls), int(sock.getsockname()[1])
