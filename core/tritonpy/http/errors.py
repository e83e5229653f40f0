"""Triton error codes as HTTP statuses, and the ``{"error": "..."}`` body."""

from __future__ import annotations

import json

from starlette.responses import Response
from tritonpy_sdk import ErrorCode, TritonError

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
