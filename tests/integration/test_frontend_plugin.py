"""A third-party front end, installed as a package with an entry point in
``tritonpy.frontends``: ``tritonpy serve`` binds it with the others, serves through
it, and stops it at shutdown; a registered front end that does not load is one
logged line, and the server serves without it."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from tritonpy_serverprocess import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]

#: One line in (a model name and 16 integers), one line out (OUTPUT0, or the error).
LINE_FRONTEND = """
import asyncio
import os
import socket

import numpy as np
from tritonpy.frontends import Frontend
from tritonpy_sdk import InferenceRequest, Tensor, TritonError


class LineFrontend(Frontend):
    name = "LineService"

    def __init__(self, server):
        self._port = int(os.environ["TP_LINE_PORT"])
        self._stopped = os.environ["TP_LINE_STOPPED"]
        self._sock = socket.create_server(("127.0.0.1", self._port))
        self._listener = None

    def ports(self):
        return [("127.0.0.1", self._port)]

    async def start(self, server, loop):
        async def answer(reader, writer):
            model, *numbers = (await reader.readline()).decode().split()
            data = np.array([numbers], dtype=np.int32)
            request = InferenceRequest(
                model_name=model,
                model_version=-1,
                inputs={name: Tensor.from_numpy(name, data) for name in ("INPUT0", "INPUT1")},
            )
            try:
                response = await server.infer_async(request)
                text = " ".join(str(v) for v in response.outputs["OUTPUT0"].data.flat)
            except TritonError as exc:
                text = f"error: {exc.message}"
            writer.write(text.encode() + b"\\n")
            await writer.drain()
            writer.close()

        self._listener = await asyncio.start_server(answer, sock=self._sock)

    async def stop(self, deadline):
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
        else:
            self._sock.close()
        with open(self._stopped, "w") as f:
            f.write("stopped")


def create(server):
    return LineFrontend(server)
"""


def _install(site: Path) -> None:
    (site / "tp_line_frontend.py").write_text(LINE_FRONTEND)
    info = site / "tp_line_frontend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tp-line-frontend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[tritonpy.frontends]\nlines = tp_line_frontend:create\nbroken = tp_line_frontend:missing\n"
    )


def _ask(port: int, line: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(line.encode() + b"\n")
        return conn.makefile().readline().strip()


@pytest.mark.integration
def test_an_installed_front_end_serves_and_stops(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site)
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    port = free_port()
    stopped = tmp_path / "stopped"
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "TP_LINE_PORT": str(port),
        "TP_LINE_STOPPED": str(stopped),
    }
    server = ServerProcess([repo], log=tmp_path / "server.log", env=env)
    try:
        out = server.wait_for_output(f"Started LineService at 127.0.0.1:{port}", timeout=30)
        # After the built-in front ends, as registered.
        assert out.index("Started HTTPService") < out.index("Started LineService")
        assert "front end 'broken' of tp-line-frontend 0.1 failed to load: AttributeError" in out
        numbers = " ".join(str(i) for i in range(16))
        assert _ask(port, f"simple {numbers}") == " ".join(str(2 * i) for i in range(16))
        assert _ask(port, f"nosuch {numbers}") == "error: Request for unknown model: 'nosuch' is not found"
    finally:
        assert server.stop() == 0
    assert stopped.read_text() == "stopped"
    assert "Traceback" not in server.output()
