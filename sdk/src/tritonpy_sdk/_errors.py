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

    ``TritonError(message, code)`` is an instance of the code's own subclass, as
    ``tritonserver`` (Triton's in-process API) raises them: ``InvalidArgumentError``,
    ``NotFoundError``, ``InternalError`` ... so ``except InvalidArgumentError`` works.
    """

    code: ErrorCode
    message: str

    def __new__(cls, *args: object, **kwargs: object) -> TritonError:
        if cls is TritonError:
            code = kwargs.get("code", args[1] if len(args) > 1 else ErrorCode.INTERNAL)
            if isinstance(code, ErrorCode):
                cls = _BY_CODE[code]
        return super().__new__(cls, *args)

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        return f"TritonError({self.message!r}, {self.code.name})"

    def __reduce__(self) -> str | tuple[object, ...]:
        if type(self) in _CODED:  # pickled with its code (a subclass of the core's keeps its own way)
            return (TritonError, (self.message, self.code))
        return super().__reduce__()

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


class UnknownError(TritonError):
    """A ``TritonError`` with code ``UNKNOWN``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.UNKNOWN) -> None:
        super().__init__(message, code)


class InternalError(TritonError):
    """A ``TritonError`` with code ``INTERNAL``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        super().__init__(message, code)


class NotFoundError(TritonError):
    """A ``TritonError`` with code ``NOT_FOUND``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.NOT_FOUND) -> None:
        super().__init__(message, code)


class InvalidArgumentError(TritonError):
    """A ``TritonError`` with code ``INVALID_ARG``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_ARG) -> None:
        super().__init__(message, code)


class UnavailableError(TritonError):
    """A ``TritonError`` with code ``UNAVAILABLE``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.UNAVAILABLE) -> None:
        super().__init__(message, code)


class UnsupportedError(TritonError):
    """A ``TritonError`` with code ``UNSUPPORTED``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.UNSUPPORTED) -> None:
        super().__init__(message, code)


class AlreadyExistsError(TritonError):
    """A ``TritonError`` with code ``ALREADY_EXISTS``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.ALREADY_EXISTS) -> None:
        super().__init__(message, code)


class CancelledError(TritonError):
    """A ``TritonError`` with code ``CANCELLED``."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.CANCELLED) -> None:
        super().__init__(message, code)


#: The class ``TritonError(message, code)`` makes for each code.
_BY_CODE: dict[ErrorCode, type[TritonError]] = {
    ErrorCode.UNKNOWN: UnknownError,
    ErrorCode.INTERNAL: InternalError,
    ErrorCode.NOT_FOUND: NotFoundError,
    ErrorCode.INVALID_ARG: InvalidArgumentError,
    ErrorCode.UNAVAILABLE: UnavailableError,
    ErrorCode.UNSUPPORTED: UnsupportedError,
    ErrorCode.ALREADY_EXISTS: AlreadyExistsError,
    ErrorCode.CANCELLED: CancelledError,
}
_CODED = frozenset(_BY_CODE.values())
