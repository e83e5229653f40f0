"""The parts of uvicorn that are not its public API and that tritonpy relies on.

The HTTP front end subclasses uvicorn's protocol classes (``protocol.py``: the
connection limits, and inference answered without an ASGI cycle) and sets
fields of its request cycle (``direct.py``). None of that is uvicorn's public
API, so a uvicorn release may change it. Two guards keep such a change from
going unnoticed:

- the dependency is pinned to the releases this surface was checked against
  (``TESTED``, the same range as in pyproject.toml);
- ``problems()`` lists every name below that the installed uvicorn lacks; the
  test suite asserts the list is empty, and ``tritonpy serve`` refuses to start
  the HTTP front end with a uvicorn outside the range whose surface differs.

To support a newer uvicorn: install it, run ``tests/http/test_uvicorn_surface.py``
and the HTTP tests, then widen ``TESTED`` and the pin in pyproject.toml together.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from importlib import metadata

log = logging.getLogger("tritonpy.http")

#: The uvicorn releases this surface was checked against (lowest, first not checked).
#: Before 0.45 there is no ``_start_asgi_task`` (inference would silently take the
#: ASGI cycle); before 0.53 the ASGI cycle answers an HTTP/1.0 request without
#: ``connection: close``, where the direct path says it.
TESTED = ((0, 53), (0, 55))

#: "module:Class" -> the methods tritonpy overrides or calls on it.
METHODS: dict[str, tuple[str, ...]] = {
    "uvicorn.protocols.http.httptools_impl:HttpToolsProtocol": (
        "_start_asgi_task",
        "_unset_keepalive_if_required",
        "_should_upgrade",
        "_unsupported_upgrade_warning",
        "handle_websocket_upgrade",
        "send_400_response",
        "on_message_begin",
        "on_headers_complete",
        "on_message_complete",
        "on_body",
        "on_response_complete",
        "timeout_keep_alive_handler",
        "shutdown",
        "data_received",
        "connection_made",
        "connection_lost",
    ),
    "uvicorn.protocols.http.h11_impl:H11Protocol": (
        "handle_events",
        "_unset_keepalive_if_required",
        "on_response_complete",
        "shutdown",
        "data_received",
        "connection_made",
        "connection_lost",
    ),
    "uvicorn.protocols.http.flow_control:FlowControl": ("resume_reading",),
    "uvicorn.server:Server": ("capture_signals",),
}

#: "module:Class" -> the instance attributes tritonpy reads or sets (assigned in that class).
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "uvicorn.protocols.http.httptools_impl:HttpToolsProtocol": (
        "parser",
        "pipeline",
        "cycle",
        "flow",
        "headers",
        "url",
        "scope",
        "expect_100_continue",
        "transport",
        "loop",
        "server_state",
        "app",
        "logger",
        "client",
        "limit_concurrency",
        "root_path",
        "timeout_keep_alive",
    ),
    "uvicorn.protocols.http.httptools_impl:RequestResponseCycle": (
        "scope",
        "body",
        "more_body",
        "response_started",
        "response_complete",
        "disconnected",
        "keep_alive",
        "message_event",
        "default_headers",
        "waiting_for_100_continue",
    ),
    "uvicorn.protocols.http.h11_impl:H11Protocol": (
        "conn",
        "cycle",
        "flow",
        "transport",
        "loop",
        "server_state",
        "logger",
        "client",
    ),
    "uvicorn.protocols.http.flow_control:FlowControl": ("read_paused",),
    "uvicorn.server:ServerState": ("default_headers", "total_requests"),
}


def version() -> tuple[int, ...]:
    """The installed uvicorn's release numbers (``0.54.0`` -> ``(0, 54, 0)``)."""
    parts: list[int] = []
    for part in metadata.version("uvicorn").split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def tested() -> bool:
    """Whether the installed uvicorn is in the range this surface was checked against."""
    low, high = TESTED
    return low <= version()[:2] < high


def _class(path: str) -> type | None:
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    found = getattr(module, name, None)
    return found if isinstance(found, type) else None


def problems() -> list[str]:
    """What the installed uvicorn lacks of the surface above, one line each (empty: all there)."""
    out: list[str] = []
    for path, names in METHODS.items():
        cls = _class(path)
        if cls is None:
            out.append(f"{path} is gone")
            continue
        out += [f"{path}.{name}() is gone" for name in names if not callable(getattr(cls, name, None))]
    for path, names in ATTRIBUTES.items():
        cls = _class(path)
        if cls is None:
            out.append(f"{path} is gone")
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            out.append(f"{path}: no source to check")
            continue
        for name in names:
            if f"self.{name} =" not in source and f"self.{name}:" not in source:
                out.append(f"{path} no longer sets self.{name}")
    return out


def check() -> None:
    """Raise RuntimeError when an untested uvicorn lacks part of the surface (warn when it
    is untested but has all of it)."""
    if tested():
        return
    missing = problems()
    low, high = TESTED
    if not missing:
        log.warning(
            "uvicorn %s is outside the releases tritonpy was checked against (>=%d.%d,<%d.%d); "
            "its private protocol surface is all there, serving with it",
            metadata.version("uvicorn"),
            *low,
            *high,
        )
        return
    raise RuntimeError(
        f"uvicorn {metadata.version('uvicorn')} is not supported: tritonpy's HTTP front end was "
        f"checked against uvicorn >={low[0]}.{low[1]},<{high[0]}.{high[1]}, and this one "
        f"differs ({'; '.join(missing)}); install a uvicorn in that range"
    )
