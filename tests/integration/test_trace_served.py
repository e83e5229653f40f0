"""Trace files of a served model with the front ends' stamps (Triton's ``HTTP_RECV_START`` …
``HTTP_SEND_END``, ``GRPC_WAITREAD_START`` … ``GRPC_SEND_END``), read by NVIDIA's own
``trace_summary.py`` (``qa/common``), which summarizes only traces that carry them."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonpy_traces import CORE_STAMPS, read_traces

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
SUMMARY = ROOT / "tests" / "data" / "nvidia_examples" / "server_qa" / "common" / "trace_summary.py"
CORE = CORE_STAMPS
HTTP = ["HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"]
GRPC = ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"]


def _infer(module: Any, url: str, request_id: str) -> None:
    client = module.InferenceServerClient(url)
    inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones((1, 16), np.int32))
    client.infer("simple", inputs, request_id=request_id)
    client.close()


def _stream(url: str, request_id: str) -> None:
    client = grpcclient.InferenceServerClient(url)
    inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones((1, 16), np.int32))
    answers: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put(error or result))
    client.async_stream_infer("simple", inputs, request_id=request_id)
    answer = answers.get(timeout=30)
    client.stop_stream()
    client.close()
    assert not isinstance(answer, Exception), answer


def _verbose(url: str, level: int) -> None:
    body = json.dumps({"log_verbose_level": level}).encode()
    urllib.request.urlopen(urllib.request.Request(f"http://{url}/v2/logging", data=body), timeout=10)


def _traces(server_factory: Any, tmp_path: Path, *flags: str) -> tuple[dict[str, dict[str, int]], Path]:
    """Serve ``simple`` traced at every request, answer one request per front-end path, stop
    (the file is written then): ``{request id: {stamp: ns}}`` and the file."""
    trace_file = tmp_path / "trace.json"
    config = ["--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"]
    server = server_factory(
        [EXAMPLES], *config, "--trace-config", f"triton,file={trace_file}", *flags, frontend_workers=1
    )
    _infer(httpclient, server.url, "http-direct")
    _verbose(server.url, 1)  # the access log on: inference takes uvicorn's ASGI cycle
    _infer(httpclient, server.url, "http-asgi")
    _verbose(server.url, 0)
    _infer(grpcclient, server.grpc_url, "grpc")
    _stream(server.grpc_url, "grpc-stream")
    assert server.stop() == 0
    traces = {}
    for record in read_traces(trace_file):
        names = [t["name"] for t in record["timestamps"]]
        assert len(names) == len(set(names)), names
        traces[record["request_id"]] = {t["name"]: t["ns"] for t in record["timestamps"]}
    return traces, trace_file


def _in_order(stamps: dict[str, int], *names: str) -> None:
    assert [stamps[n] for n in names] == sorted(stamps[n] for n in names), stamps


def test_every_front_end_path_stamps_its_receive_and_send(server_factory: Any, tmp_path: Path) -> None:
    traces, trace_file = _traces(server_factory, tmp_path)
    for request_id in ("http-direct", "http-asgi"):
        stamps = traces[request_id]
        assert sorted(stamps) == sorted(CORE + HTTP), (request_id, stamps)
        _in_order(stamps, "HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "COMPUTE_START")
        _in_order(stamps, "COMPUTE_END", "HTTP_SEND_START", "HTTP_SEND_END")
        _in_order(stamps, "INFER_RESPONSE_COMPLETE", "HTTP_SEND_END")
    for request_id in ("grpc", "grpc-stream"):
        stamps = traces[request_id]
        assert sorted(stamps) == sorted(CORE + GRPC), (request_id, stamps)
        _in_order(stamps, "GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START")
        _in_order(stamps, "COMPUTE_END", "GRPC_SEND_START", "GRPC_SEND_END")

    # NVIDIA's summary tool finds the traces of both front ends (without the front ends'
    # stamps it prints no summary at all).
    out = subprocess.run(
        [sys.executable, str(SUMMARY), str(trace_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.count("Summary for simple (1): trace count = 2") == 2, out  # HTTP: 2, gRPC: 2
    assert "HTTP infer request (avg):" in out and "GRPC infer request (avg):" in out, out
    assert "\tReceive (avg):" in out and "Infer (avg):" in out, out


@pytest.mark.parametrize("implementation", ["grpcio"])
def test_grpc_aio_stamps_its_receive_only(server_factory: Any, tmp_path: Path, implementation: str) -> None:
    """grpc.aio writes the answer after the handler returned: no moment to stamp its send."""
    traces, _ = _traces(server_factory, tmp_path, "--grpc-implementation", implementation)
    assert sorted(traces["grpc"]) == sorted(CORE + GRPC[:2])
    assert sorted(traces["grpc-stream"]) == sorted(CORE)  # grpc.aio's stream: no stamps
    assert sorted(traces["http-direct"]) == sorted(CORE + HTTP)
