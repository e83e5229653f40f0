"""Start-up, readiness, shutdown and third-party backends, through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SLOW = """
import time
from pathlib import Path
from tritonpy_sdk import BackendInfo, InferenceResponse, Tensor, hookimpl

@hookimpl
def backend_info():
    return BackendInfo(default_model_filename="model.slow")

@hookimpl
def model_initialize(model):
    seconds = float(model.parameters.get("init_seconds", "0"))
    if seconds:
        Path(model.parameters["marker"]).write_text("initializing")
        time.sleep(seconds)

@hookimpl
def execute(instance, requests):
    marker = Path(instance.model.parameters["marker"])
    marker.write_text("executing")
    time.sleep(float(instance.model.parameters.get("seconds", "1.5")))
    return [InferenceResponse({"OUT": Tensor.from_numpy("OUT", r.inputs["IN"].data + 1)})
            for r in requests]
"""


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _slow_repo(root: Path, marker: Path, **parameters: str) -> Path:
    repo = root / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "1" / "model.slow").write_text("")
    (repo / "slow" / "config.pbtxt").write_text(
        f"""
backend: "slowbk"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 2 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] }} ]
parameters {{ key: "marker" value: {{ string_value: "{marker}" }} }}
"""
        + "".join(_param(k, v) for k, v in parameters.items())
    )
    return repo


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def _wait_for(path: Path, server: ServerProcess) -> None:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists(), server.output()


def _wait_for_pending(server: ServerProcess, model: str, count: int) -> None:
    """Wait until the metrics show ``count`` requests queued for ``model``."""
    line = f'nv_inference_pending_request_count{{model="{model}",version="1"}} {count}'
    deadline = time.monotonic() + 30
    text = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(server.metrics_url, timeout=5) as r:
            text = r.read().decode()
        if line in text:
            return
        time.sleep(0.02)
    raise AssertionError(f"never saw {line!r}:\n{text}")


@pytest.fixture(scope="module")
def slow_env(tmp_path_factory: pytest.TempPathFactory, backend_dist: Callable[..., None]) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    backend_dist(site, "slowbk", SLOW)
    backend_dist(site, "brokenbk", "import not_a_module_anywhere\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_sigterm_drains_in_flight_requests(server_factory, slow_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "marker"
    server = server_factory([_slow_repo(tmp_path, marker)], env=slow_env)
    client = httpclient.InferenceServerClient(server.url, network_timeout=30)
    result: dict[str, object] = {}

    def call() -> None:
        inp = httpclient.InferInput("IN", [2], "INT32")
        inp.set_data_from_numpy(np.array([1, 2], np.int32))
        try:
            result["out"] = client.infer("slow", [inp]).as_numpy("OUT")
        except Exception as exc:  # recorded and asserted on below
            result["error"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), server.output()
    code = server.stop()
    worker.join(30)
    assert "error" not in result, result.get("error")
    np.testing.assert_array_equal(result["out"], [2, 3])
    assert code == 0
    assert '"Waiting for in-flight requests to complete."' in server.output()  # Triton's line
    assert "Server stopped" in server.output()


def test_sigterm_drains_in_flight_grpc_requests(server_factory, slow_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "marker"
    server = server_factory([_slow_repo(tmp_path, marker)], env=slow_env)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: list[object] = []

    def call() -> None:
        inp = grpcclient.InferInput("IN", [2], "INT32")
        inp.set_data_from_numpy(np.array([1, 2], np.int32))
        try:
            results.append(client.infer("slow", [inp], client_timeout=30).as_numpy("OUT"))
        except Exception as exc:  # recorded and asserted on below
            results.append(exc)

    workers = [threading.Thread(target=call) for _ in range(3)]
    for worker in workers:
        worker.start()
    _wait_for(marker, server)
    _wait_for_pending(server, "slow", 2)  # SIGTERM only once all three are at the server
    code = server.stop()
    for worker in workers:
        worker.join(30)
    assert len(results) == 3
    for result in results:  # one executing, two queued behind it: all finish
        assert isinstance(result, np.ndarray), result
        np.testing.assert_array_equal(result, [2, 3])
    assert code == 0


def test_sigterm_while_a_model_loads_exits_cleanly(slow_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "marker"
    repo = _slow_repo(tmp_path, marker, init_seconds="2")
    server = ServerProcess([repo], log=tmp_path / "server.log", env=slow_env, wait_ready=False)
    try:
        _wait_for(marker, server)
    finally:
        started = time.monotonic()
        code = server.stop()
    assert code == 0, server.output()
    assert time.monotonic() - started < 20
    assert "Server stopped" in server.output()


def test_shutdown_takes_no_longer_than_the_exit_timeout(slow_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "marker"
    repo = _slow_repo(tmp_path, marker, seconds="120")
    server = ServerProcess([repo], "--exit-timeout-secs", "2", log=tmp_path / "server.log", env=slow_env)
    client = httpclient.InferenceServerClient(server.url, network_timeout=60)
    result: dict[str, object] = {}

    def call() -> None:
        inp = httpclient.InferInput("IN", [2], "INT32")
        inp.set_data_from_numpy(np.array([1, 2], np.int32))
        try:
            result["out"] = client.infer("slow", [inp])
        except Exception as exc:  # the request cannot finish: it must end, not hang
            result["error"] = exc

    worker = threading.Thread(target=call)
    try:
        worker.start()
        _wait_for(marker, server)
    finally:
        started = time.monotonic()
        code = server.stop(timeout=60)
    took = time.monotonic() - started
    worker.join(30)
    assert not worker.is_alive()
    assert "error" in result
    assert code == 0, server.output()
    # One 2 s limit for the whole shutdown (it used to be spent once per stage);
    # generous slack for a loaded machine, far below the 120 s execute.
    assert took < 20, f"shutdown took {took:.1f} s with --exit-timeout-secs 2"


def test_exit_on_error_is_the_default(tmp_path: Path, slow_env: dict[str, str]) -> None:
    repo = tmp_path / "repo"
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text('backend: "brokenbk"\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--model-repository",
            str(repo),
            "--http-port",
            "0",
            "--http-address",
            "127.0.0.1",
            "--allow-grpc=false",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **slow_env},
    )
    assert proc.returncode == 1
    assert "UNAVAILABLE" in proc.stdout
    assert "tp-test-brokenbk" in proc.stdout and "not_a_module_anywhere" in proc.stdout
    assert "--exit-on-error" in proc.stdout


def test_strict_readiness(server_factory, slow_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = _slow_repo(tmp_path, tmp_path / "marker")
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text('backend: "brokenbk"\n')
    server = server_factory([repo], "--exit-on-error=false", env=slow_env)
    base = f"http://{server.url}/v2"
    assert _status(f"{base}/health/live") == 200
    assert _status(f"{base}/health/ready") != 200  # strict readiness: a model failed
    assert _status(f"{base}/models/slow/ready") == 200
    relaxed = server_factory([repo], "--exit-on-error=false", "--strict-readiness=false", env=slow_env)
    assert _status(f"http://{relaxed.url}/v2/health/ready") == 200


@pytest.mark.parametrize("busy", ["HTTP", "GRPC"])
def test_busy_port_is_a_one_line_error(tmp_path: Path, busy: str) -> None:
    import socket

    with socket.socket() as taken, socket.socket() as spare:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spare.bind(("127.0.0.1", 0))
        other = spare.getsockname()[1]
        spare.close()
        http, grpc = (port, other) if busy == "HTTP" else (other, port)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tritonpy",
                "serve",
                "--model-repository",
                str(tmp_path),
                "--http-address",
                "127.0.0.1",
                "--http-port",
                str(http),
                "--grpc-address",
                "127.0.0.1",
                "--grpc-port",
                str(grpc),
                "--allow-metrics=false",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1
    assert f"error: failed to start {busy} service at 127.0.0.1:{port}" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_grpc_only_server(tmp_path: Path) -> None:
    """--allow-http=false: the gRPC front end serves alone; no HTTP port is opened."""
    import socket

    import tritonclient.grpc as grpcclient

    def port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    http_port, grpc_port = port(), port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--model-repository",
            str(ROOT / "examples" / "model_repository"),
            "--allow-http=false",
            "--allow-metrics=false",
            "--http-port",
            str(http_port),
            "--grpc-address",
            "127.0.0.1",
            "--grpc-port",
            str(grpc_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if client.is_server_ready():
                    break
            except Exception:  # not listening yet
                time.sleep(0.1)
        assert client.is_model_ready("simple")
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", http_port)) != 0  # nothing listens for HTTP
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
