"""How an unexpected exception (a bug, not a refused request) reaches a client.

The client gets the exception's type and an incident id; the server log gets
the message and the traceback under the same id. An exception's text can
carry server file paths and internals, and a traceback always does: neither
belongs in a response. ``TritonError`` messages, which are written for
clients, are passed through unchanged elsewhere.
"""

from __future__ import annotations

import logging
import secrets


def report(log: logging.Logger, where: str, exc: BaseException) -> str:
    """Log ``exc`` with its traceback and return the message for the client."""
    incident = secrets.token_hex(4)
    log.error("%s [incident %s]", where, incident, exc_info=(type(exc), exc, exc.__traceback__))
    return f"internal error ({type(exc).__name__}); the server log has the details under incident {incident}"
