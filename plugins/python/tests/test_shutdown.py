"""Stopping a server with stub processes: models are finalized, no process is left behind."""

from __future__ import annotations

import os
import shutil
import signal
import threading
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


def _shm_files(pid: int) -> list[Path]:
    shm = Path("/dev/shm")
    return list(shm.glob(f"tritonpy-{pid}-*")) if shm.is_dir() else []


def test_a_stopped_stub_does_not_stretch_the_exit_timeout(tmp_path: Path) -> None:
    """SIGSTOP a stub with a request in it: shutdown still ends within --exit-timeout-secs
    (it took ~100 s with 30 s: each stage waited the whole limit), the stub is killed and
    the client gets an answer."""
    repo = tmp_path / "models"
    for name in ("add_sub", "busy"):
        shutil.copytree(MODELS / name, repo / name)
    server = ServerProcess([repo], "--exit-timeout-secs", "3", log=tmp_path / "server.log")
    pids: set[int] = set()
    result: dict[str, object] = {}

    def call() -> None:
        n = httpclient.InferInput("N", [1], "INT64")
        n.set_data_from_numpy(np.array([10], np.int64))
        try:
            client = httpclient.InferenceServerClient(server.url, network_timeout=60)
            result["answer"] = client.infer("busy", [n])
        except Exception as exc:  # the stub cannot answer: an error, not a hang
            result["error"] = exc

    caller = threading.Thread(target=call)
    started = time.monotonic()
    try:
        http = httpclient.InferenceServerClient(server.url, network_timeout=60)
        pids = set(_stub_pids(http))
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        caller.start()
        time.sleep(0.5)  # the request reaches the stopped stub
        started = time.monotonic()
    finally:
        code = server.stop(timeout=60)  # never leave the server behind a failed step
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    took = time.monotonic() - started
    caller.join(30)
    assert not caller.is_alive() and "error" in result, result
    assert code == 0, server.output()
    assert took < 15, f"shutdown took {took:.1f} s with --exit-timeout-secs 3"
    assert not any(_alive(p) for p in pids)
    assert not _shm_files(server.proc.pid)


SLOW_INIT = """
import time
from pathlib import Path

class TritonPythonModel:
    def initialize(self, args):
        Path(args["model_repository"], "initializing").write_text("yes")
        time.sleep(3)

    def execute(self, requests):
        return []
"""


def test_sigterm_while_a_python_model_initializes_leaves_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "1" / "model.py").write_text(SLOW_INIT)
    (repo / "slow" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
    )
    server = ServerProcess([repo], log=tmp_path / "server.log", wait_ready=False)
    try:
        marker = repo / "slow" / "initializing"
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), server.output()
        stubs = _children(server.proc.pid)
        assert stubs and _shm_files(server.proc.pid)  # the stub and its arenas exist now
    finally:
        code = server.stop()
    assert code == 0, server.output()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in stubs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in stubs)
    assert not _shm_files(server.proc.pid)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_error_frames_can_be_kept_out_of_responses(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    shutil.copytree(MODELS / "raiser", repo / "raiser")
    shutil.copytree(MODELS / "raiser", repo / "raiser_inproc")
    config = repo / "raiser_inproc" / "config.pbtxt"
    config.write_text(
        config.read_text().replace('name: "raiser"', 'name: "raiser_inproc"')
        + 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    )
    server = ServerProcess([repo], "--backend-config=python,error-frames=false", log=tmp_path / "server.log")
    try:
        http = httpclient.InferenceServerClient(server.url)
        for model in ("raiser", "raiser_inproc"):
            x = httpclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([0], np.int32))
            with pytest.raises(Exception) as info:
                http.infer(model, [x])
            message = str(info.value)
            assert message.endswith("message: ValueError: the model raised on purpose"), message
            assert "At:" not in message and "model.py" not in message
        log = server.wait_for_output("model.py")  # the frames went to the server log
        assert "the model raised on purpose" in log
    finally:
        assert server.stop() == 0


def test_a_signal_to_the_whole_process_group_is_the_server_s_to_handle(tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the foreground process group: the stubs
    must not die of it (and be restarted mid-shutdown); the server finalizes them."""
    repo = tmp_path / "models"
    shutil.copytree(MODELS / "add_sub", repo / "add_sub")
    server = ServerProcess([repo], log=tmp_path / "server.log")
    try:
        http = httpclient.InferenceServerClient(server.url)
        a = np.ones(4, np.float32)
        inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        http.infer("add_sub", inputs)
        stubs = _children(server.proc.pid)
        assert stubs
        assert all(os.getpgid(p) != os.getpgid(server.proc.pid) for p in stubs)
        os.kill(server.proc.pid, signal.SIGINT)
        assert server.proc.wait(30) == 0
    finally:
        code = server.stop()
    output = server.output()
    assert code == 0 and "Cleaning up..." in output  # finalize() ran in the stub
    assert "exited" not in output and "restarted" not in output
