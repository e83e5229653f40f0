"""Errors shared by the core and every backend.

``TritonError`` carries one of Triton's status codes (``TRITONSERVER_Error_Code``).
Each front end maps the code onto its transport (HTTP status, gRPC status) in its
own ``errors`` module; backends and the core only ever raise ``TritonError``.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.Enum):
    """Triton's error codes, in the order of ``TRITONSERVER_Error_Code``."""

    UNKNOWN = "Unknown"
    INTERNAL = "Internal"
    NOT_FOUND = "Not found"
    INVALID_ARG = "Invalid argument"
    UNAVAILABLE = "Unavailable"
    UNSUPPORTED = "Unsupported"
    ALREADY_EXISTS = "Already exists"
    CANCELLED = "Cancelled"


class TritonError(Exception):
    """An error with a Triton status code and a message meant for the client.

    The message is sent to the client as it is, so it should say what is wrong
    and, where it can, how to fix it.
    """

    code: ErrorCode
    message: str

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        return f"TritonError({self.message!r}, {self.code.name})"

    @classmethod
    def invalid_arg(cls, message: str) -> TritonError:
        return cls(message, ErrorCode.INVALID_ARG)

    @classmethod
    def not_found(cls, message: str) -> TritonError:
        return cls(message, ErrorCode.NOT_FOUND)

    @classmethod
    def unavailable(cls, message: str) -> TritonError:
        return cls(message, ErrorCode.UNAVAILABLE)

    @classmethod
    def unsupported(cls, message: str) -> TritonError:
        return cls(message, ErrorCode.UNSUPPORTED)

    @classmethod
    def internal(cls, message: str) -> TritonError:
        return cls(message, ErrorCode.INTERNAL)
