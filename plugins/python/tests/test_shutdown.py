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
from tritonclient.utils import InferenceServerException
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
        client = httpclient.InferenceServerClient(server.url, network_timeout=60)
        try:
            result["answer"] = client.infer("busy", [n])
        except Exception as exc:  # the stub cannot answer: an error, not a hang
            result["error"] = exc
        finally:
            client.close()  # on this thread: collected on another, it trips gevent

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


HUNG_FINALIZE = """
import time

class TritonPythonModel:
    def execute(self, requests):
        return []

    def finalize(self):
        time.sleep(300)
"""


def test_a_hung_in_process_finalize_does_not_hold_the_exit(tmp_path: Path) -> None:
    """An in-process model's finalize gets what is left of --exit-timeout-secs too
    (a thread cannot be killed: it is left behind and the server exits)."""
    repo = tmp_path / "models"
    (repo / "stuck" / "1").mkdir(parents=True)
    (repo / "stuck" / "1" / "model.py").write_text(HUNG_FINALIZE)
    (repo / "stuck" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    )
    server = ServerProcess([repo], "--exit-timeout-secs", "2", log=tmp_path / "server.log")
    # finalize sleeps 300 s; a server held by it would be killed at the 60 s wait (no 0 exit)
    code = server.stop(timeout=60)
    assert code == 0, server.output()
    assert "did not finish within" in server.output()


def _slow_model(repo: Path, seconds: float) -> Path:
    """A python model ``slow`` whose initialize writes a marker file, then sleeps."""
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "1" / "model.py").write_text(
        "import time\nfrom pathlib import Path\n\n"
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        '        Path(args["model_repository"], "initializing").write_text("yes")\n'
        f"        time.sleep({seconds})\n\n"
        "    def execute(self, requests):\n"
        "        return []\n"
    )
    (repo / "slow" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
    )
    return repo / "slow" / "initializing"


def _wait_for(path: Path, server: ServerProcess) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline and server.proc.poll() is None:
        time.sleep(0.02)
    assert path.exists(), server.output()


def _wait_gone(pids: list[int], kill_left: bool = False) -> None:
    """Wait until ``pids`` exited (assert they did); ``kill_left`` kills those that
    did not, so a failing test leaves no process behind."""
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    if kill_left:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert not left


def test_sigterm_while_a_python_model_initializes_leaves_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    marker = _slow_model(repo, 3)
    server = ServerProcess([repo], log=tmp_path / "server.log", wait_ready=False)
    try:
        _wait_for(marker, server)
        stubs = _children(server.proc.pid)
        assert stubs
    finally:
        code = server.stop()
    assert code == 0, server.output()  # the core stops cleanly while models load
    _wait_gone(stubs)
    assert not _shm_files(server.proc.pid)


def test_kill_9_while_a_python_model_initializes_leaves_nothing(tmp_path: Path) -> None:
    """No handler, no atexit: the stub removed the arena files as soon as it had mapped
    them (not after initialize), and exits by itself though its model is still busy."""
    repo = tmp_path / "models"
    marker = _slow_model(repo, 120)
    server = ServerProcess([repo], log=tmp_path / "server.log", wait_ready=False)
    stubs: list[int] = []
    try:
        _wait_for(marker, server)
        stubs = _children(server.proc.pid)
        assert stubs
    finally:
        server.stop(signal.SIGKILL)
        _wait_gone(stubs, kill_left=True)
    assert not _shm_files(server.proc.pid)


def test_a_stub_that_never_started_leaves_no_shared_memory_at_exit(tmp_path: Path) -> None:
    """The server exits (--exit-timeout-secs while a model loads) before its stub mapped
    the arenas: they are removed at exit, and the stub process is ended."""
    repo = tmp_path / "models"
    shutil.copytree(MODELS / "add_sub", repo / "add_sub")
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    started = tmp_path / "started"
    python = env / "bin" / "python"
    # An interpreter that takes for ever to start (it never reaches the stub's code).
    python.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 120\n")
    python.chmod(0o755)
    config = repo / "add_sub" / "config.pbtxt"
    config.write_text(
        config.read_text()
        + f'parameters {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env}" }} }}\n'
    )
    server = ServerProcess(
        [repo],
        "--exit-timeout-secs",
        "1",
        log=tmp_path / "server.log",
        wait_ready=False,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    stubs: list[int] = []
    try:
        _wait_for(started, server)
        stubs = _children(server.proc.pid)
        assert stubs and _shm_files(server.proc.pid)  # not mapped, so not removed yet
    finally:
        code = server.stop()
        _wait_gone(stubs, kill_left=True)
    assert code == 0, server.output()
    assert not _shm_files(server.proc.pid)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


BROKEN = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("cannot initialize on purpose")

    def execute(self, requests):
        return []
"""


def _copy_in_process(repo: Path, name: str) -> None:
    shutil.copytree(repo / name, repo / f"{name}_inproc")
    config = repo / f"{name}_inproc" / "config.pbtxt"
    config.write_text(
        config.read_text().replace(f'name: "{name}"', f'name: "{name}_inproc"')
        + 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    )


@pytest.mark.parametrize("frames", [False, True])
def test_error_frames_can_be_kept_out_of_responses(tmp_path: Path, frames: bool) -> None:
    """``--backend-config=python,error-frames=false``: a model's exception (in execute,
    or in initialize as a load error) reaches clients as ``Type: message`` only, its
    frames go to the server log. The default is Triton's format, frames included."""
    repo = tmp_path / "models"
    shutil.copytree(MODELS / "raiser", repo / "raiser")
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.py").write_text(BROKEN)
    (repo / "broken" / "config.pbtxt").write_text(
        'name: "broken"\nbackend: "python"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
    )
    for name in ("raiser", "broken"):
        _copy_in_process(repo, name)
    flags = ["--exit-on-error=false"] + ([] if frames else ["--backend-config=python,error-frames=false"])
    server = ServerProcess([repo], *flags, log=tmp_path / "server.log")
    try:
        server.wait_for_output("Started HTTPService", timeout=60)
        http = httpclient.InferenceServerClient(server.url)
        for model in ("raiser", "raiser_inproc"):
            x = httpclient.InferInput("X", [1], "INT32")
            x.set_data_from_numpy(np.array([0], np.int32))
            with pytest.raises(InferenceServerException) as info:
                http.infer(model, [x])
            message = info.value.message()
            head = "message: ValueError: the model raised on purpose"
            if frames:
                assert head + "\n\nAt:\n" in message and "model.py" in message, message
            else:
                assert message.endswith(head), message
                assert "At:" not in message and "model.py" not in message
        reasons = {m["name"]: m.get("reason", "") for m in http.get_model_repository_index()}
        for model in ("broken", "broken_inproc"):
            assert "RuntimeError: cannot initialize on purpose" in reasons[model], reasons
            assert ("model.py" in reasons[model]) == frames, reasons[model]
        if not frames:  # the frames went to the server log
            log = server.wait_for_output("model.py")
            assert "the model raised on purpose" in log and "cannot initialize on purpose" in log
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
