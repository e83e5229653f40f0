"""``ConfigError``: a model configuration that cannot be used."""

from __future__ import annotations

from tritonpy_sdk import ErrorCode, TritonError


class ConfigError(TritonError):
    """An invalid ``config.pbtxt`` (or auto-completed config); INVALID_ARG.

    The message names the file and the field at fault.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.INVALID_ARG)
