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


def error_response(message: str, status: int) -> Response:
    return Response(json.dumps({"error": message}), status_code=status, media_type="application/json")


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
    return status, json.dumps({"error": message}).encode()
