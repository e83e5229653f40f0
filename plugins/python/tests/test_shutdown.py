"""Stopping a server with stub processes: models are finalized, no process is left behind."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

MODELS = Path(__file__).resolve().parent / "models"


def _alive(pid: int) -> bool:
    """Running (an exited process its new parent has not reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _stub_pids(http: httpclient.InferenceServerClient) -> list[int]:
    a = np.ones(4, np.float32)
    inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    http.infer("add_sub", inputs)  # served by a stub
    n = np.array([10], np.int64)
    busy = httpclient.InferInput("N", [1], "INT64")
    busy.set_data_from_numpy(n)
    return [int(http.infer("busy", [busy]).as_numpy("PID")[0]) for _ in range(4)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_server_ends_its_stubs(tmp_path: Path, sig: int) -> None:
    repo = tmp_path / "models"
    for name in ("add_sub", "busy"):
        shutil.copytree(MODELS / name, repo / name)
    server = ServerProcess([repo], log=tmp_path / "server.log")
    try:
        http = httpclient.InferenceServerClient(server.url)
        pids = set(_stub_pids(http))
        http.close()
        assert pids and server.proc.pid not in pids and all(_alive(p) for p in pids)
    finally:
        code = server.stop(sig)
    if sig == signal.SIGTERM:
        assert code == 0
        assert "Cleaning up..." in server.output()  # add_sub's finalize() ran in its stub
    # Even after kill -9 of the server, each stub sees its socket close and exits.
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    shm = Path("/dev/shm")
    if shm.is_dir():  # nothing left in shared memory either
        assert not list(shm.glob(f"tritonpy-{server.proc.pid}-*"))
