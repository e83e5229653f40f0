"""Triton's logging extension: log settings readable and changeable while serving.

Settings are Triton's: ``log_file``, ``log_info``, ``log_warning``,
``log_error``, ``log_verbose_level``, ``log_format`` (``default`` or
``ISO8601``). They drive the ``tritonpy`` logger: a message is written when its
severity is enabled (verbose messages, logged at DEBUG, need a verbose level
> 0). The log file is set at start only, as in Triton.

Lines are Triton's: ``<preamble> <file>:<line>] <message>``, the message written as a
JSON string (quoted, its newlines and control characters escaped, so no client-chosen
text can forge a line) unless ``TRITON_SERVER_ESCAPE_LOG_MESSAGES=0`` was set when the
process started. A record with a ``tritonpy_object`` (a table, a model configuration)
shows it unescaped on the lines after its message, as Triton's tables and protobufs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from tritonpy_sdk import TritonError

FORMATS = ("default", "ISO8601")
_LETTER = {
    logging.DEBUG: "I",
    logging.INFO: "I",
    logging.WARNING: "W",
    logging.ERROR: "E",
    logging.CRITICAL: "E",
}

#: Triton's switch: "0" when the process starts writes messages as they are.
ESCAPE_VARIABLE = "TRITON_SERVER_ESCAPE_LOG_MESSAGES"
#: The ``extra`` key of a record's object: server-made text shown unescaped after the message.
OBJECT = "tritonpy_object"


def escape_messages() -> bool:
    """Whether this process escapes log messages (Triton's reading of ``ESCAPE_VARIABLE``)."""
    return os.environ.get(ESCAPE_VARIABLE) != "0"


@dataclass
class LogState:
    log_file: str = ""
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_verbose_level: int = 0
    log_format: str = "default"


class _TritonFormatter(logging.Formatter):
    """Triton's line layout, ``I1122 12:05:52.519328 21883 loader.py:120] "message"`` (UTC, as
    Triton's ``gmtime_r``), or ISO 8601's ``2026-11-22T12:05:52Z I 21883 loader.py:120] ...``."""

    def __init__(self, state: LogState, escape: bool) -> None:
        super().__init__()
        self.state = state
        self.escape = escape

    def format(self, record: logging.LogRecord) -> str:
        letter = _LETTER.get(record.levelno, "I")
        t = record.created
        # Triton's <file>:<line>, the file's name without its folders. A Python model's
        # pb_utils.Logger record carries its model.py and line (``_services.log``).
        where = f"{record.filename}:{record.lineno}"
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if self.escape:
            message = json.dumps(message, ensure_ascii=False)
        shown = getattr(record, OBJECT, None)
        if shown is not None:  # an empty heading is left out, as Triton's tables have none
            message = (message if record.msg else "") + "\n" + shown
        if self.state.log_format == "ISO8601":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            return f"{stamp} {letter} {os.getpid()} {where}] {message}"
        micros = int((t - int(t)) * 1_000_000)
        stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(t))
        return f"{letter}{stamp}.{micros:06d} {os.getpid()} {where}] {message}"


class _SeverityFilter(logging.Filter):
    def __init__(self, state: LogState) -> None:
        super().__init__()
        self.state = state

    def filter(self, record: logging.LogRecord) -> bool:
        s = self.state
        if record.levelno >= logging.ERROR:
            return s.log_error
        if record.levelno >= logging.WARNING:
            return s.log_warning
        if record.levelno >= logging.INFO:
            return s.log_info
        return s.log_verbose_level > 0


class LogSettings:
    """The live log settings of one server."""

    def __init__(self, state: LogState | None = None) -> None:
        self.state = state or LogState()
        self._lock = threading.Lock()
        self._handler: logging.Handler | None = None
        #: Read once, when the settings are made (the process's start), as Triton reads it.
        self.escape = escape_messages()

    def install(self, logger_names: tuple[str, ...] = ("tritonpy",), stream: TextIO | None = None) -> None:
        """Write the named loggers through handlers that follow these settings (CLI use):
        to ``--log-file``, to ``stream``, or, as Triton since 2.59 writes them, INFO and
        verbose lines to standard output and warnings and errors to standard error."""
        handlers: list[logging.Handler]
        if self.state.log_file:
            handlers = [logging.FileHandler(self.state.log_file)]
        elif stream is not None:
            handlers = [logging.StreamHandler(stream)]
        else:
            low, high = logging.StreamHandler(sys.stdout), logging.StreamHandler(sys.stderr)
            low.addFilter(lambda record: record.levelno < logging.WARNING)
            high.addFilter(lambda record: record.levelno >= logging.WARNING)
            handlers = [low, high]
        for handler in handlers:
            handler.setFormatter(_TritonFormatter(self.state, self.escape))
            handler.addFilter(_SeverityFilter(self.state))
        self._handler = handlers[0]
        for name in logger_names:
            logger = logging.getLogger(name)
            for handler in handlers:
                logger.addHandler(handler)
            logger.propagate = False
        self._apply_levels()

    def _apply_levels(self) -> None:
        verbose = self.state.log_verbose_level > 0
        logging.getLogger("tritonpy").setLevel(logging.DEBUG if verbose else logging.INFO)
        if self._handler is not None:
            # The front ends' uvicorn: its access log ("uvicorn.access", one INFO line per
            # HTTP request) and its info messages only at a verbose level, as Triton logs
            # each HTTP request at verbose level 1; its warnings and errors always.
            for name in ("uvicorn.access", "uvicorn.error"):
                logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)

    def get(self) -> dict[str, Any]:
        with self._lock:
            return asdict(self.state)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (all or nothing); TritonError naming a bad setting."""
        with self._lock:
            new = LogState(**asdict(self.state))
            for key, value in changes.items():
                if value is None:
                    continue
                if key == "log_file":
                    raise TritonError.unsupported(
                        "log file location can not be updated through network protocol"
                    )
                if key in ("log_info", "log_warning", "log_error"):
                    if not isinstance(value, bool):
                        raise TritonError.invalid_arg(f"expect boolean for '{key}', got {value!r}")
                    setattr(new, key, value)
                elif key == "log_verbose_level":
                    # uint32 on both protocols (gRPC's LogSettings carries it as uint32_param);
                    # Triton truncates larger values silently.
                    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
                        raise TritonError.invalid_arg(
                            f"expect unsigned 32-bit integer (0 to {2**32 - 1}) for '{key}', got {value!r}"
                        )
                    new.log_verbose_level = value
                elif key == "log_format":
                    if value not in FORMATS:
                        raise TritonError.invalid_arg(
                            f"invalid argument for --log_format, got: {value} (use default or ISO8601)"
                        )
                    new.log_format = value
                # Other keys are ignored, as Triton ignores them.
            for key, value in asdict(new).items():
                setattr(self.state, key, value)
            self._apply_levels()
            return asdict(self.state)
