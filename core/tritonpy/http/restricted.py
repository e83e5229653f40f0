"""Restricted API groups over HTTP: an ASGI wrapper in front of every route.

Placed outermost (ahead of the inference fast path) and only when a group is
restricted, so an unrestricted server pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..restricted import Requirement
from .errors import error_body

if TYPE_CHECKING:
    from .fastpath import ASGIApp, Receive, Scope, Send

#: The group of each last path segment under /v2/models/<m>[/versions/<v>].
_MODEL_ROUTES = {
    "ready": "health",
    "config": "model-config",
    "stats": "statistics",
    "infer": "inference",
    "generate": "inference",
    "generate_stream": "inference",
    "trace": "trace",
}


def http_group(path: str) -> str | None:
    """The API group of an HTTP path as Triton groups them (None: no group, e.g. unknown)."""
    if path in ("/v2/health/live", "/v2/health/ready"):
        return "health"
    if path == "/v2":
        return "metadata"
    if path == "/v2/logging":
        return "logging"
    if path == "/v2/trace/setting":
        return "trace"
    if path.startswith("/v2/repository/"):
        return "model-repository"
    if path.startswith(("/v2/systemsharedmemory", "/v2/cudasharedmemory")):
        return "shared-memory"
    if path.startswith("/v2/models/"):
        parts = path[len("/v2/models/") :].split("/")
        if parts == ["stats"]:
            return "statistics"
        tail = parts[1:]
        if tail[:1] == ["versions"]:
            tail = tail[2:]
        return _MODEL_ROUTES.get(tail[0]) if tail else "metadata"
    return None


class RestrictedApi:
    """ASGI app: requests to a restricted group without its header get Triton's 403."""

    def __init__(
        self, app: ASGIApp, groups: dict[str, Requirement], group_of: Callable[[str], str | None] = http_group
    ) -> None:
        self.app = app
        self.groups = groups
        #: The group of a path (the KServe routes' by default; a front end of its own passes its).
        self.group_of = group_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            group = self.group_of(scope["path"])
            need = self.groups.get(group) if group is not None else None
            if need is not None:
                headers = ((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"])
                if not need.met_by(headers):
                    await _forbid(send, need.key)
                    return
        await self.app(scope, receive, send)


async def _forbid(send: Send, key: str) -> None:
    body = error_body(f"This API is restricted, expecting header '{key}'")
    # text/plain, as Triton labels it, though the body is its JSON error document
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})
