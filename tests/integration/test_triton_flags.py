"""tritonserver flags served for real: header forwarding (HTTP, gRPC unary and streamed),
``--model-config-name``, ``--reuse-http-port`` / ``--reuse-grpc-port``, and a Triton
command line's flags without effect (logged, the server serving)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonpy_serverprocess import ServerProcess, free_port

pytestmark = pytest.mark.integration

ECHO = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("PARAMS", np.array([r.parameters().encode()], dtype=object))]
            )
            for r in requests
        ]
"""


def _echo_model(repo: Path, name: str = "echo", max_batch_size: int = 0) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(ECHO)
    (folder / "config.pbtxt").write_text(
        f'backend: "python"\nmax_batch_size: {max_batch_size}\n'
        'input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "PARAMS" data_type: TYPE_STRING dims: [1] }]\n'
    )
    return folder


@pytest.fixture(scope="module")
def server(server_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    repo = tmp_path_factory.mktemp("forwarding")
    _echo_model(repo)
    folder = _echo_model(repo, "configured", max_batch_size=2)
    (folder / "configs").mkdir()
    (folder / "configs" / "small.pbtxt").write_text(
        (folder / "config.pbtxt").read_text().replace("max_batch_size: 2", "max_batch_size: 7")
    )
    return server_factory(  # type: ignore[no-any-return]
        [repo],
        "--http-header-forward-pattern=x-tenant.*|^timeout$|^triton_",
        "--grpc-header-forward-pattern=(?-i)x-Tenant|trace|^priority$",
        "--model-config-name=small",
        "--http-thread-count=16",
        "--grpc-infer-allocation-pool-size=8",
    )


def _params(result: Any) -> dict[str, Any]:
    return dict(json.loads(result.as_numpy("PARAMS")[0].decode()))


def _input(module: Any) -> Any:
    tensor = module.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    return tensor


def test_http_headers_the_pattern_finds_reach_the_model(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url)
    try:
        result = client.infer(
            "echo",
            [_input(httpclient)],
            headers={"X-Tenant-Id": "acme", "my-x-tenant": "b", "X-Other": "no", "sequence_id": "9"},
            parameters={"x-tenant-id": "from the body", "kept": 1},
        )
    finally:
        client.close()
    # Searched anywhere in the name, any case; a header wins over a parameter of its name.
    assert _params(result) == {"x-tenant-id": "acme", "kept": 1, "my-x-tenant": "b"}


def test_grpc_metadata_the_pattern_finds_reach_the_model(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        result = client.infer(
            "echo", [_input(grpcclient)], headers={"x-tenant": "acme", "traceparent-ish": "t", "other": "no"}
        )
        # The pattern turned case back on with (?-i): metadata keys are lowercase, so
        # "x-Tenant" finds nothing; "trace" still finds its key.
        assert _params(result) == {"traceparent-ish": "t"}
        answers: queue.Queue[Any] = queue.Queue()
        client.start_stream(lambda result, error: answers.put(error or result), headers={"trace-id": "7"})
        client.async_stream_infer("echo", [_input(grpcclient)])
        streamed = answers.get(timeout=30)
        client.stop_stream()
        assert _params(streamed) == {"trace-id": "7"}
    finally:
        client.close()


RESERVED = "Header '{}' is reserved for Triton usage and cannot be forwarded."


def test_a_reserved_header_to_forward_refuses_the_request(server: ServerProcess) -> None:
    """A header the pattern finds that is named like a reserved parameter would steer the
    request: INVALID_ARG in Triton's words (since 26.05), for HTTP, gRPC and each request
    of a gRPC stream; the server serves on."""
    http = httpclient.InferenceServerClient(server.url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for name in ("timeout", "triton_anything"):
            with pytest.raises(Exception) as info:
                http.infer("echo", [_input(httpclient)], headers={name: "1"})
            assert str(info.value) == "[400] " + RESERVED.format(name)
        with pytest.raises(Exception) as info:
            grpc.infer("echo", [_input(grpcclient)], headers={"priority": "1"})
        assert str(info.value) == "[StatusCode.INVALID_ARGUMENT] " + RESERVED.format("priority")
        answers: queue.Queue[Any] = queue.Queue()
        grpc.start_stream(lambda result, error: answers.put(error or result), headers={"priority": "1"})
        for _ in range(2):
            grpc.async_stream_infer("echo", [_input(grpcclient)])
        streamed = [answers.get(timeout=30) for _ in range(2)]
        grpc.stop_stream()
        assert [str(e) for e in streamed] == [RESERVED.format("priority")] * 2
        # Not matched by the pattern, a reserved name is just another header.
        assert _params(http.infer("echo", [_input(httpclient)], headers={"priority": "1"})) == {}
        assert _params(grpc.infer("echo", [_input(grpcclient)], headers={"timeout": "1"})) == {}
    finally:
        http.close()
        grpc.close()


def test_a_models_custom_config_is_read_and_flags_without_effect_are_logged(server: ServerProcess) -> None:
    config = httpx.get(f"http://{server.url}/v2/models/configured/config", timeout=10).json()
    assert config["max_batch_size"] == 7  # configs/small.pbtxt
    echo = httpx.get(f"http://{server.url}/v2/models/echo/config", timeout=10).json()
    assert echo["max_batch_size"] == 0  # no configs/ folder: its config.pbtxt
    out = server.output()
    assert "--http-thread-count=16 has no effect in tritonpy" in out
    assert "--grpc-infer-allocation-pool-size=8 has no effect in tritonpy" in out


def _serve_on(repo: Path, log: Path, http: int, grpc: int, *flags: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tritonpy",
                "serve",
                f"--model-repository={repo}",
                "--http-address=127.0.0.1",
                f"--http-port={http}",
                "--grpc-address=127.0.0.1",
                f"--grpc-port={grpc}",
                f"--metrics-port={free_port()}",
                *flags,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _live(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(f"http://{url}/v2/health/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never became ready")


@pytest.fixture
def two_servers_one_port(tmp_path: Path) -> Iterator[tuple[list[subprocess.Popen[bytes]], int, int, Path]]:
    repo = tmp_path / "repo"
    _echo_model(repo)
    http, grpc = free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []
    yield started, http, grpc, repo
    for proc in started:
        proc.terminate()
    for proc in started:
        proc.wait(30)


@pytest.mark.slow
def test_reuse_ports_lets_two_servers_share_them(
    two_servers_one_port: tuple[list[subprocess.Popen[bytes]], int, int, Path], tmp_path: Path
) -> None:
    started, http, grpc, repo = two_servers_one_port
    flags = ("--reuse-http-port=true", "--reuse-grpc-port=true")
    started.append(_serve_on(repo, tmp_path / "a.log", http, grpc, *flags))
    _live(f"127.0.0.1:{http}", started[0])
    started.append(_serve_on(repo, tmp_path / "b.log", http, grpc, *flags))
    time.sleep(3)  # it loads its model, then listens beside the first
    assert started[1].poll() is None, (tmp_path / "b.log").read_text()
    assert "Started HTTPService at 127.0.0.1" in (tmp_path / "b.log").read_text()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc}")
    try:
        for _ in range(4):
            assert _params(client.infer("echo", [_input(grpcclient)])) == {}
    finally:
        client.close()
    # Without the flags a third finds the port busy and says so before loading anything.
    third = _serve_on(repo, tmp_path / "c.log", http, grpc)
    assert third.wait(60) == 1
    assert "address already in use" in (tmp_path / "c.log").read_text()
