"""The ports a server will listen on, checked before any model loads.

Triton binds its front ends only once every model has loaded, so a busy port is
found after a long load, in gRPC's own words. tritonpy binds the same way, but
first tries each port here, with the semantics of the real listeners
(``SO_REUSEADDR``; ``SO_REUSEPORT`` only with ``--reuse-http-port`` /
``--reuse-grpc-port``; an IPv6 address binds IPv6 only), so a busy or impossible
port is one line before anything loads. The socket is closed at once, never
listened on: a client meanwhile is refused, as it would be.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

from .options import ServerOptions

_WILDCARDS = ("", "0.0.0.0", "::")


#: Listening sockets a front-end worker was handed by its core, by (address, port) as configured.
_ADOPTED: dict[tuple[str, int], socket.socket] = {}


def adopt(address: str, port: int, sock: socket.socket) -> None:
    """Make ``listen(address, port)`` return ``sock``, bound by another process (a
    front-end worker's core), instead of binding the port again."""
    sock.setblocking(False)
    _ADOPTED[(address, port)] = sock


def listen(address: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A front end's listening socket, non-blocking, bound here so a busy port is a
    one-line error, not a traceback. ``SO_REUSEPORT`` only when ``reuse_port``
    (``--reuse-http-port``, ``--reuse-grpc-port``): else a busy port must fail, not be
    shared."""
    adopted = _ADOPTED.pop((address, port), None)
    if adopted is not None:
        return adopted
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.create_server((address, port), family=family, backlog=2048, reuse_port=reuse_port)
    sock.setblocking(False)
    return sock


@dataclass(frozen=True)
class Listener:
    """One front end's address: its service name as the start-up lines say it, and its port flag."""

    service: str
    flag: str
    address: str
    port: int
    #: Bound with ``SO_REUSEPORT`` (``--reuse-http-port``, ``--reuse-grpc-port``).
    reuse_port: bool = False

    @property
    def where(self) -> str:
        return f"{self.address}:{self.port}"


def listeners(options: ServerOptions) -> list[Listener]:
    """The addresses the enabled front ends of ``options`` will bind."""
    found = []
    if options.allow_grpc:
        found.append(
            Listener("GRPC", "--grpc-port", options.grpc_address, options.grpc_port, options.reuse_grpc_port)
        )
    if options.allow_http:
        found.append(
            Listener("HTTP", "--http-port", options.http_address, options.http_port, options.reuse_http_port)
        )
    if options.allow_sagemaker:
        port = options.sagemaker_port
        found.append(Listener("Sagemaker HTTP", "--sagemaker-port", options.http_address, port))
    if options.allow_vertex_ai:
        port = options.vertex_ai_port
        found.append(Listener("Vertex AI HTTP", "--vertex-ai-port", options.http_address, port))
    if options.allow_metrics:
        address = options.metrics_address or options.http_address
        found.append(Listener("Metrics", "--metrics-port", address, options.metrics_port))
    return found


def port_problem(options: ServerOptions) -> str | None:
    """Why a front end of ``options`` could not listen, as one line, or None."""
    enabled = listeners(options)
    for n, listener in enumerate(enabled):
        for earlier in enabled[:n]:
            if listener.port and listener.port == earlier.port and _overlap(listener, earlier):
                return (
                    f"failed to start {listener.service} service at {listener.where}: address already "
                    f"in use: the {earlier.service} service is given port {listener.port} too "
                    f"({earlier.flag}, {listener.flag})"
                )
        error = _bind_error(listener.address, listener.port, listener.reuse_port)
        if error is None:
            continue
        if error.errno == errno.EADDRINUSE:
            return (
                f"failed to start {listener.service} service at {listener.where}: address already in "
                f"use: another process listens on port {listener.port} (choose another with {listener.flag})"
            )
        reason = error.strerror or str(error)
        return f"failed to start {listener.service} service at {listener.where}: {reason}"
    return None


def _overlap(a: Listener, b: Listener) -> bool:
    return a.address == b.address or a.address in _WILDCARDS or b.address in _WILDCARDS


def _bind_error(address: str, port: int, reuse_port: bool = False) -> OSError | None:
    """The error binding ``address:port`` as the front ends bind, or None if it binds."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as both servers set it
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # as socket.create_server
            sock.bind((address, port))
    except OSError as exc:  # includes socket.gaierror for an address that does not resolve
        return exc
    return None
