"""Triton error codes as HTTP statuses, and the ``{"error": "..."}`` body."""

from __future__ import annotations

import json
import logging

from starlette.responses import Response
from tritonpy_sdk import ErrorCode, TritonError

from ..failures import report

log = logging.getLogger("tritonpy.http")

#: Triton's mapping (http_server.cc): everything not listed is 400 Bad Request.
STATUS = {
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNSUPPORTED: 501,
}


def status_of(error: TritonError) -> int:
    return STATUS.get(error.code, 400)


def error_body(message: str) -> bytes:
    """Triton's error document, ``{"error":"..."}``, written compactly as its JSON writer does."""
    return json.dumps({"error": message}, separators=(",", ":")).encode()


def error_response(message: str, status: int, media_type: str = "application/json") -> Response:
    """An error answer. Triton labels a few of them ``text/plain`` (an unknown route, a model
    that is not ready), though their body is the same JSON document."""
    return Response(error_body(message), status_code=status, headers={"content-type": media_type})


#: As a header, not a media type: starlette would add a charset Triton does not send.
TEXT_PLAIN = {"content-type": "text/plain"}


def bare(status: int) -> Response:
    """An answer without a body, labelled ``text/plain`` as Triton labels its health
    answers and its bare refusals."""
    return Response(status_code=status, headers=TEXT_PLAIN)


def not_allowed() -> Response:
    """Triton's 405: its JSON error document, labelled ``text/plain``."""
    return error_response("Method Not Allowed", 405, "text/plain")


def triton_error_response(error: TritonError) -> Response:
    return error_response(error.message, status_of(error))


def error_answer(exc: Exception, path: str) -> tuple[int, bytes]:
    """The status and JSON body answering an inference that failed with ``exc``:
    a TritonError's own; anything else (a bug must not take the server down) 500,
    logged under an incident id the answer names."""
    if isinstance(exc, TritonError):
        status, message = status_of(exc), exc.message
    else:
        status, message = 500, report(log, f"unhandled error in POST {path}", exc)
    exc.__traceback__ = None  # its frames hold the request body: no cycle until a GC
    return status, error_body(message)
