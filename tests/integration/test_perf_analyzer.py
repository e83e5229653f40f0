"""Unmodified perf_analyzer against tritonpy, over HTTP, gRPC and gRPC streaming.

A short run at concurrency 1 and 8 that must finish without errors; speed is
for bench/, never asserted here. perf_analyzer is provisioned (cached) by
scripts/get_perf_analyzer.py; the test skips, saying why, only if that fails.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def perf_analyzer() -> Path:
    spec = importlib.util.spec_from_file_location(
        "get_perf_analyzer", ROOT / "scripts" / "get_perf_analyzer.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return Path(module.provision())
    except Exception as exc:  # no network, no apt, not x86_64: say so and skip
        pytest.skip(f"perf_analyzer could not be provisioned: {exc}")


@pytest.mark.parametrize(
    ("model", "protocol"),
    [
        ("simple", "http"),
        ("simple", "grpc"),
        ("simple", "grpc-streaming"),
        # A Python-backend model in a stub process, calling an ONNX model through BLS.
        ("iris_species", "http"),
        ("iris_species", "grpc"),
    ],
)
def test_perf_analyzer_runs_without_errors(
    server_factory, perf_analyzer: Path, model: str, protocol: str
) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([ROOT / "examples" / "model_repository"])
    url = server.url if protocol == "http" else server.grpc_url
    args = [
        str(perf_analyzer),
        "-m",
        model,
        "-u",
        url,
        "-i",
        protocol.split("-")[0],
        "--concurrency-range",
        "1:8:7",
        "--measurement-mode",
        "count_windows",
        "--measurement-request-count",
        "100",
        "--stability-percentage",
        "999",
        "--max-trials",
        "3",
    ]
    if protocol == "grpc-streaming":
        args.append("--streaming")
    run = subprocess.run(args, capture_output=True, text=True, timeout=240)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Concurrency: 1, throughput" in output and "Concurrency: 8, throughput" in output, output
    assert "error" not in output.lower(), output
    with urllib.request.urlopen(f"http://{server.url}/v2/models/{model}/stats", timeout=10) as resp:
        (stats,) = json.load(resp)["model_stats"]
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["inference_stats"]["success"]["count"] >= 200


def test_sigterm_under_grpc_load_refuses_new_requests_and_cancels_none(
    server_factory, perf_analyzer: Path
) -> None:  # type: ignore[no-untyped-def]
    """The server drains: clients still sending are refused with "Server is stopping"
    (before, every thread ended on CANCELLED or a refused connection). Calls that
    reach grpc in the instant its transport stops may still be cancelled by grpc
    itself (seen only on a loaded machine); nothing else may end a call. A thread
    whose last call was answered just before the listener closed finds no server
    for its next one ("Connection refused"): that call never reached the server
    (as with Triton, which also stops listening once nothing is in flight)."""
    server = server_factory([ROOT / "examples" / "model_repository"])
    load = subprocess.Popen(
        [
            str(perf_analyzer),
            *("-m", "simple", "-u", server.grpc_url, "-i", "grpc"),
            *("--concurrency-range", "8:8", "--measurement-interval", "5000"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _executions(server) < 200 and time.monotonic() < deadline:  # under load
            time.sleep(0.1)
        assert server.stop() == 0
        output, _ = load.communicate(timeout=60)
    finally:
        if load.poll() is None:
            load.kill()
    errors = [line for line in output.splitlines() if "had error" in line]
    never_reached = "Failed to connect to remote host: Connection refused"
    # Every thread ends on an error; on a loaded machine the drain may find no call in
    # flight, so every thread's next call meets the closed listener (seen 1 run in 10):
    # "Server is stopping" is then seen by none.
    assert errors, output
    if not all(line.rstrip().endswith(never_reached) for line in errors):
        assert any("Server is stopping" in line for line in errors), output
    assert all(
        line.rstrip().endswith(("Server is stopping", "CANCELLED", never_reached)) for line in errors
    ), output


def _executions(server) -> int:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(f"http://{server.url}/v2/models/simple/stats", timeout=5) as r:
        stats = json.load(r)["model_stats"]
    return int(stats[0]["execution_count"]) if stats else 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_through_system_shared_memory(
    server_factory, perf_analyzer: Path, protocol: str
) -> None:  # type: ignore[no-untyped-def]
    """``--shared-memory system``: perf_analyzer registers its regions, sends every
    input and receives every output through them, and unregisters them."""
    server = server_factory([ROOT / "examples" / "model_repository"], "--allow-client-shm=true")
    url = server.url if protocol == "http" else server.grpc_url
    args = [
        str(perf_analyzer),
        *("-m", "simple", "-u", url, "-i", protocol),
        *("--shared-memory", "system", "--output-shared-memory-size", "1024"),
        *("--concurrency-range", "2:2", "--measurement-mode", "count_windows"),
        *("--measurement-request-count", "100", "--stability-percentage", "999", "--max-trials", "3"),
    ]
    run = subprocess.run(args, capture_output=True, text=True, timeout=240)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Concurrency: 2, throughput" in output and "error" not in output.lower(), output
    with urllib.request.urlopen(f"http://{server.url}/v2/models/simple/stats", timeout=10) as resp:
        (stats,) = json.load(resp)["model_stats"]
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["inference_stats"]["success"]["count"] >= 100
    with urllib.request.urlopen(f"http://{server.url}/v2/systemsharedmemory/status", timeout=10) as resp:
        assert json.load(resp) == []  # perf_analyzer unregistered what it registered
