"""A front-end worker process: ``python -m tritonpy.workers.worker``, started by the core's ``WorkerPool``.

It serves the HTTP and gRPC ports on the listening sockets its core bound and
handed down, with the same front ends as a single-process server, over a
``RemoteServer``. It takes no signals of its own (Ctrl-C reaches the whole
process group; the core drains and then tells each worker to stop) and ends when
its core tells it to or when its core is gone (its link closes): a worker never
outlives its core.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pickle
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

#: The environment variable that carries a worker's ``Boot``.
BOOT_ENV = "TRITONPY_WORKER_BOOT"


@dataclass
class Boot:
    """What a worker is told when it starts."""

    index: int
    options: Any  # ServerOptions (imported by the worker only after its logging is set up)
    control_path: str
    link_fd: int
    #: ``(address, port, fd)`` of each listening socket, address and port as configured.
    listening: list[tuple[str, int, int]]
    metadata: dict[str, Any]
    log_state: dict[str, Any]
    cuda: bool = False

    def encode(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode()


async def serve(boot: Boot, log_settings: Any) -> int:
    from ..frontends import Frontend, FrontendError, _grpc, _http
    from ..ipc.link import Link
    from ..memory.cuda import load_runtime
    from ..ports import adopt
    from ..server import Server
    from . import wire
    from .control import ControlClient
    from .remote import RemoteServer

    loop = asyncio.get_running_loop()
    control = ControlClient(boot.control_path, boot.index)
    remote = RemoteServer(
        boot.options, boot.metadata, control, log_settings, load_runtime() if boot.cuda else None
    )
    try:
        link = await Link.open(socket.socket(fileno=boot.link_fd), remote.on_frames, remote.on_close)
    except OSError:  # the core is gone already (ConnectionError included): nothing to serve
        return 0
    remote.attach(link, loop)
    threading.Thread(
        target=control.receive_broadcasts,
        args=(remote.apply, remote.core_gone_threadsafe),
        name="tritonpy-broadcasts",
        daemon=True,
    ).start()
    for address, port, fd in boot.listening:
        adopt(address, port, socket.socket(fileno=fd))

    # The front ends take the facade they use: RemoteServer answers every call of it.
    facade = cast(Server, remote)
    frontends: list[Frontend] = []
    try:
        for factory in (_grpc, _http):
            frontend = factory(facade)
            if frontend is not None:
                frontends.append(frontend)
        for frontend in frontends:
            await frontend.start(facade, loop)
    except FrontendError as exc:
        with contextlib.suppress(ConnectionError):
            link.send(*wire.encode_failed(str(exc)))
            await asyncio.sleep(0.1)  # let the frame go out before the link closes
        return 1
    with contextlib.suppress(ConnectionError):  # a core gone meanwhile has set ``stopped``
        link.send(*wire.encode_ready())
    assert remote.stopped is not None
    deadline = await remote.stopped
    if deadline is None:  # the core is gone: nothing in flight can be answered any more
        deadline = time.monotonic()
        # A core killed outright left its control socket's directory: whoever sees it gone removes it.
        shutil.rmtree(os.path.dirname(boot.control_path), ignore_errors=True)
    await asyncio.gather(*(f.stop(deadline) for f in frontends), return_exceptions=True)
    link.close()
    return 0


def main() -> int:
    boot: Boot = pickle.loads(base64.b64decode(os.environ.pop(BOOT_ENV)))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # the core drains, then stops its workers
    from ..logsettings import LogSettings, LogState

    log_settings = LogSettings(LogState(**boot.log_state))
    log_settings.install(("tritonpy", "uvicorn"))
    try:
        import uvloop
    except ImportError:
        return asyncio.run(serve(boot, log_settings))
    return uvloop.run(serve(boot, log_settings))


if __name__ == "__main__":
    sys.exit(main())
