"""Front ends: the contract a network front end keeps, and the registry ``serving`` starts.

A front end is made by a factory, ``factory(server) -> Frontend | None``, that
binds its ports (None: the server's options leave it off) and raises
``FrontendError`` with one line for the user when it cannot. ``tritonpy serve``
calls every factory before any front end serves, so a busy port is reported
before a client was answered; then it ``start``s each, and at shutdown drains the
server and ``stop``s them all by one deadline.

The registry: gRPC, HTTP, SageMaker and Vertex AI (each only when asked for) and metrics,
in that order (as Triton starts them),
then the factories that installed packages declare under the entry-point group
``tritonpy.frontends``::

    [project.entry-points."tritonpy.frontends"]
    lines = "my_package:create_frontend"

A front end uses of the server only what ``server.py``'s docstring lists. A
registered front end that fails to import is logged, naming its distribution,
and serving goes on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from .restricted import Requirement

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("tritonpy")

#: The entry-point group of third-party front ends: each names a ``FrontendFactory``.
ENTRY_POINT_GROUP = "tritonpy.frontends"


class FrontendError(Exception):
    """A front end that cannot serve (a port taken, bad TLS files): its message is the
    one line ``tritonpy serve`` prints before it exits with status 1."""


class Frontend(Protocol):
    """A network front end as ``tritonpy serve`` runs it.

    Front ends subclass this protocol to inherit the defaults of ``restricted`` and
    ``wait``. Every method runs on the server's event loop.
    """

    #: The service's name in ``Started <name> at <address>:<port>``.
    name: str
    #: The restricted API groups it enforces and what each needs (``restricted.py``).
    restricted: Mapping[str, Requirement] = MappingProxyType({})

    def ports(self) -> list[tuple[str, int]]:
        """The addresses and ports it listens on, as configured; bound by its factory."""
        ...

    def services(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """The services it runs, each with its ports, for the ``Started <name> at ...``
        lines; by default one, ``name`` on ``ports()``."""
        return [(self.name, self.ports())]

    async def start(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        """Serve ``server`` on ``loop``; return once it takes connections."""
        ...

    async def stop(self, deadline: float | None) -> None:
        """Take no new connections, let what is open finish until ``deadline`` (a
        ``time.monotonic()`` value; None: no limit), then close. Also called on a
        front end that was bound but never started."""
        ...

    async def wait(self) -> None:
        """Return when it stopped serving by itself: the server then shuts down. By
        default it never does (a front end whose end leaves the others serving)."""
        await asyncio.get_running_loop().create_future()


#: Binds a front end for ``server`` (None: left off by its options); FrontendError if it cannot.
FrontendFactory = Callable[["Server"], "Frontend | None"]


def _grpc(server: Server) -> Frontend | None:
    if not server.options.allow_grpc:
        return None
    from .grpc.frontend import GrpcFrontend  # imports grpc: only when serving it

    return GrpcFrontend(server)


def _http(server: Server) -> Frontend | None:
    if not server.options.allow_http:
        return None
    from .http.frontend import HttpFrontend  # imports starlette: only when serving it

    return HttpFrontend(server)


def _sagemaker(server: Server) -> Frontend | None:
    if not server.options.allow_sagemaker:
        return None
    from .http.frontend import SagemakerFrontend

    return SagemakerFrontend(server)


def _vertex_ai(server: Server) -> Frontend | None:
    if not server.options.allow_vertex_ai:
        return None
    from .http.frontend import VertexFrontend

    return VertexFrontend(server)


def _metrics(server: Server) -> Frontend | None:
    if not server.options.allow_metrics:
        return None
    from .metrics.frontend import MetricsFrontend

    return MetricsFrontend(server)


#: The front ends tritonpy ships, in the order they bind and start.
BUILTIN: tuple[tuple[str, FrontendFactory], ...] = (
    ("grpc", _grpc),
    ("http", _http),
    ("sagemaker", _sagemaker),
    ("vertex_ai", _vertex_ai),
    ("metrics", _metrics),
)


def registered() -> list[tuple[str, FrontendFactory]]:
    """The built-in front ends, then those of the entry-point group, each as
    ``(name, factory)``; a registered one that does not load is logged and left out."""
    found = list(BUILTIN)
    taken = {name for name, _ in found}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "?"
        if ep.name in taken:
            log.error("front end '%s' of %s is not started: the name is taken", ep.name, dist)
            continue
        try:
            factory = ep.load()
        except Exception as exc:  # one bad package must not keep the server from serving
            log.error("front end '%s' of %s failed to load: %s: %s", ep.name, dist, type(exc).__name__, exc)
            continue
        if not callable(factory):
            log.error("front end '%s' of %s is not started: '%s' is not callable", ep.name, dist, ep.value)
            continue
        taken.add(ep.name)
        found.append((ep.name, factory))
    return found
