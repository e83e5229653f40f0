"""gRPC status codes and the abort exception, without grpcio.

``StatusCode`` has the names and numbers of grpc's ``grpc.StatusCode``: the
gRPC protocol defines them (the ``grpc-status`` trailer carries the number).
The native transport writes them as they are; the grpcio transport
(``aio.py``) turns them into ``grpc.StatusCode`` at its boundary.
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """A gRPC status: its number is the wire's ``grpc-status``."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Aborted(Exception):
    """``context.abort`` on either transport: the call ends with ``code`` and ``details``."""

    def __init__(self, code: StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


__all__ = ["Aborted", "StatusCode"]
