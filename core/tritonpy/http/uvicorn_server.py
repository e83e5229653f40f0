"""uvicorn's ``Server`` as tritonpy's front ends run it (HTTP and metrics).

No signal handling (``tritonpy serve`` owns the signals) and no logging set-up of
its own (``LogSettings`` sets the levels).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

#: uvicorn leaves logging alone: each ``uvicorn.Config`` would otherwise apply its
#: own logging setup to the process-wide ``uvicorn`` loggers, the last one made
#: winning (the metrics server's ``access_log=False`` removed the HTTP access log,
#: and uvicorn's handlers replaced the Triton-style one). ``LogSettings`` sets the
#: levels instead: the access log is on while the verbose level is above 0.
UVICORN_LOGGING: dict[str, Any] = {"log_config": None, "log_level": None, "access_log": True}

#: Triton's responses carry neither a ``Server`` nor a ``Date`` header; uvicorn would add
#: ``server: uvicorn`` (naming the software to anyone who asks) and the date to each.
TRITON_HEADERS: dict[str, Any] = {"server_header": False, "date_header": False}


class FrontendServer(uvicorn.Server):
    """uvicorn's server minus its signal handling: ``serving.serve`` owns the signals.

    uvicorn re-raises a captured SIGTERM once it has drained, which would end the
    process before the models are unloaded and the backends finalized.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve_started(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
        """Serve on ``sock`` in a task of ``loop``; return it once uvicorn takes
        connections (or has already ended)."""
        serving = loop.create_task(self.serve(sockets=[sock]))
        while not self.started and not serving.done():
            await asyncio.sleep(0.01)
        return serving
