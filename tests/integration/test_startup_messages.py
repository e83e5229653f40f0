"""What a new user sees when a start goes wrong, and the access log they were promised.

Each case runs ``python -m tritonpy serve`` as a user would: busy ports are found
before any model loads, a bad repository path or a model folder without version
folders says what is wrong, and ``--log-verbose 1`` writes one access-log line
per HTTP request.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"


def _serve(repo: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tritonpy", "serve", "--model-repository", str(repo), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on, bound as servers bind (SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize(
    ("service", "flag"), [("GRPC", "--grpc-port"), ("HTTP", "--http-port"), ("Metrics", "--metrics-port")]
)
def test_busy_port_is_named_before_any_model_loads(taken_port: int, service: str, flag: str) -> None:
    ports = {"--grpc-port": free_port(), "--http-port": free_port(), "--metrics-port": free_port()}
    ports[flag] = taken_port
    flags = ["--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1"]
    for name, port in ports.items():
        flags += [name, str(port)]
    run = _serve(EXAMPLES, *flags)
    assert run.returncode == 1, run.stdout + run.stderr
    assert (
        f"error: failed to start {service} service at 127.0.0.1:{taken_port}: address already in use: "
        f"another process listens on port {taken_port} (choose another with {flag})"
    ) in run.stdout
    assert "| Model" not in run.stdout  # no model was loaded first
    assert "Traceback" not in run.stdout + run.stderr


def test_one_port_for_two_services_is_refused() -> None:
    port = str(free_port())
    run = _serve(EXAMPLES, "--http-address", "127.0.0.1", "--http-port", port, "--metrics-port", port)
    assert run.returncode == 1
    assert f"address already in use: the HTTP service is given port {port} too" in run.stdout
    assert "| Model" not in run.stdout


def test_repository_path_that_is_a_file_or_missing(tmp_path: Path) -> None:
    afile = tmp_path / "repo.txt"
    afile.write_text("not a folder")
    run = _serve(afile)
    assert run.returncode == 1
    assert f"error: repository path is not a valid directory: '{afile}' is a file" in run.stderr
    run = _serve(tmp_path / "nowhere")
    assert run.returncode == 1
    assert f"error: failed to stat model repository path '{tmp_path / 'nowhere'}': no such directory" in (
        run.stderr
    )


def test_model_without_version_folder_says_so(tmp_path: Path) -> None:
    """The model file beside config.pbtxt instead of in simple/1/: the message says where it goes,
    and the table's state is not repeated as an error code (no "UNAVAILABLE: Unavailable:")."""
    (tmp_path / "simple").mkdir()
    shutil.copy(EXAMPLES / "simple" / "config.pbtxt", tmp_path / "simple")
    shutil.copy(EXAMPLES / "simple" / "1" / "model.onnx", tmp_path / "simple")
    run = _serve(tmp_path, "--http-address", "127.0.0.1", "--http-port", "0", "--allow-grpc=false")
    assert run.returncode == 1
    row = next(line for line in run.stdout.splitlines() if line.startswith("| simple"))
    assert (
        "| UNAVAILABLE: no version directory found for model 'simple': its model files belong in a "
        "numbered folder such as 'simple/1/' (move 'simple/model.onnx' to 'simple/1/model.onnx'); "
        "at least one version must be available under the version policy of model 'simple'"
    ) in row
    assert "Unavailable:" not in run.stdout


def test_info_lines_go_to_standard_output_and_errors_to_standard_error(tmp_path: Path) -> None:
    """As Triton since 2.59 (NVIDIA's L0_logging): INFO lines on stdout, WARNING and
    ERROR lines on stderr, so a log collector tells them apart by stream."""
    shutil.copytree(EXAMPLES / "simple", tmp_path / "simple")  # loads: INFO lines
    shutil.copytree(EXAMPLES / "simple", tmp_path / "broken")
    (tmp_path / "broken" / "1").rename(tmp_path / "broken" / "01")  # no version folder: an ERROR line
    config = tmp_path / "broken" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "simple"', 'name: "broken"'))
    run = _serve(tmp_path, "--http-address", "127.0.0.1", "--http-port", "0", "--allow-grpc=false")
    assert run.returncode == 1
    out_letters = {line[0] for line in run.stdout.splitlines() if line[:1] in "IWE" and line[1:5].isdigit()}
    err_letters = {line[0] for line in run.stderr.splitlines() if line[:1] in "IWE" and line[1:5].isdigit()}
    assert out_letters == {"I"}
    assert "E" in err_letters and "I" not in err_letters


def _infer(url: str) -> None:
    client = httpclient.InferenceServerClient(url)
    inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(np.ones((1, 16), np.int32))
    client.infer("simple", inputs)


def _logged(text: str) -> str:
    """``text`` as the log writes it inside a message (a JSON string's escapes)."""
    return json.dumps(text)[1:-1]


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200


def test_access_log_at_verbose_level_1(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([EXAMPLES], "--log-verbose", "1")
    _infer(server.url)
    _get(server.metrics_url)
    out = server.wait_for_output(_logged('"POST /v2/models/simple/infer HTTP/1.1" 200'))
    line = next(line for line in out.splitlines() if "/v2/models/simple/infer" in line)
    # Triton's layout: file:line, the message a JSON string
    assert re.fullmatch(r'I\d{4} [\d:.]+ \d+ [\w.]+:\d+\] "127\.0\.0\.1:\d+ - \\"POST .*\\" 200"', line), line
    server.wait_for_output(_logged('"GET /metrics HTTP/1.1" 200'))


@pytest.mark.parametrize("implementation", ["tritonpy", "grpcio"])
def test_grpc_calls_are_logged_at_verbose_level_1(server_factory, implementation: str) -> None:  # type: ignore[no-untyped-def]
    """One line per answered call, the same on both transports: the native one and grpc.aio."""
    flags = ("--log-verbose", "1", "--grpc-implementation", implementation)
    server = server_factory([EXAMPLES], *flags)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(np.ones((1, 16), np.int32))
    client.infer("simple", inputs)
    with pytest.raises(InferenceServerException):
        client.infer("no_such_model", inputs)
    out = server.wait_for_output(_logged('"ModelInfer" NOT_FOUND'))
    line = next(line for line in out.splitlines() if _logged('"ModelInfer" OK') in line)
    pattern = r'I\d{4} [\d:.]+ \d+ [\w.]+:\d+\] "ipv4:127\.0\.0\.1:\d+ - \\"ModelInfer\\" OK"'
    assert re.fullmatch(pattern, line), line


def test_no_access_log_at_verbose_level_0(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([EXAMPLES])
    _infer(server.url)
    _get(f"http://{server.url}/v2/health/ready")
    # Raised while serving, the level turns the access log on for the requests that
    # follow, inference requests included.
    body = b'{"log_verbose_level": 1}'
    urllib.request.urlopen(urllib.request.Request(f"http://{server.url}/v2/logging", data=body), timeout=10)
    _get(f"http://{server.url}/v2/models/simple/ready")
    out = server.wait_for_output(_logged('"GET /v2/models/simple/ready HTTP/1.1" 200'))
    # (the POST that raised it is logged: its line is written once it answered)
    assert "/v2/health/ready" not in out and "/infer" not in out, out
    _infer(server.url)
    server.wait_for_output(_logged('"POST /v2/models/simple/infer HTTP/1.1" 200'))
    # And lowered again, the lines stop: the next inference goes the direct way again.
    body = b'{"log_verbose_level": 0}'
    urllib.request.urlopen(urllib.request.Request(f"http://{server.url}/v2/logging", data=body), timeout=10)
    _infer(server.url)
    # A line written now would stand before the next logged one (one thread writes them).
    body = b'{"log_verbose_level": 1}'
    urllib.request.urlopen(urllib.request.Request(f"http://{server.url}/v2/logging", data=body), timeout=10)
    _get(f"http://{server.url}/v2/health/live")
    out = server.wait_for_output(_logged('"GET /v2/health/live HTTP/1.1" 200'))
    assert out.count(_logged('"POST /v2/models/simple/infer HTTP/1.1" 200')) == 1, out
