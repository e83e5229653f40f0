"""Triton error codes as gRPC status codes (Triton's own mapping)."""

from __future__ import annotations

from tritonpy_sdk import ErrorCode

from .status import StatusCode

STATUS = {
    ErrorCode.UNKNOWN: StatusCode.UNKNOWN,
    ErrorCode.INTERNAL: StatusCode.INTERNAL,
    ErrorCode.NOT_FOUND: StatusCode.NOT_FOUND,
    ErrorCode.INVALID_ARG: StatusCode.INVALID_ARGUMENT,
    ErrorCode.UNAVAILABLE: StatusCode.UNAVAILABLE,
    ErrorCode.UNSUPPORTED: StatusCode.UNIMPLEMENTED,
    ErrorCode.ALREADY_EXISTS: StatusCode.ALREADY_EXISTS,
    ErrorCode.CANCELLED: StatusCode.CANCELLED,
}


def status_of(code: ErrorCode) -> StatusCode:
    return STATUS.get(code, StatusCode.UNKNOWN)
