"""HTTP/REST front end: KServe v2 with Triton's extensions, on starlette."""

from .app import create_app

__all__ = ["create_app"]
