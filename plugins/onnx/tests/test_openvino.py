"""The OpenVINO execution accelerator for real: onnxruntime's OpenVINO build
(onnxruntime-openvino, which ``./dev setup`` installs into .cache/ort-openvino, apart from the
CPU build it would replace) first on the server's PYTHONPATH, serving the sequence model of
test_onnx_sequence.py on OpenVINO's CPU device."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx_testmodels import accumulator
from test_onnx_sequence import step
from tritonpy_serverprocess import ServerProcess

ORT_OPENVINO = Path(__file__).resolve().parents[3] / ".cache" / "ort-openvino"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (ORT_OPENVINO / ".installed").is_file(), reason="no onnxruntime-openvino in .cache (./dev setup)"
    ),
]

OPENVINO = """
instance_group [{ kind: KIND_CPU count: 1 }]
optimization { execution_accelerators { cpu_execution_accelerator: [{ name: "openvino" }] } }
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("openvino_repo")
    accumulator(root / "acc", OPENVINO)
    path = os.pathsep.join([str(ORT_OPENVINO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = ServerProcess([root], log=tmp_path_factory.mktemp("logs") / "server.log", env={"PYTHONPATH": path})
    yield proc
    proc.stop()


def test_the_model_runs_on_openvino(server: ServerProcess) -> None:
    server.wait_for_output(
        "instance 'acc_0_0' of model 'acc' runs on onnxruntime's "
        "OpenVINOExecutionProvider, CPUExecutionProvider"
    )
    http = httpclient.InferenceServerClient(server.url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert http.is_model_ready("acc")
        assert step(http, httpclient, 1, 1.5, True, False) == (1.5, 1, 1)
        assert step(grpc, grpcclient, 2, 10, True, False) == (10, 1, 2)
        assert step(grpc, grpcclient, 1, 2, False, False) == (3.5, 0, 1)
        assert step(http, httpclient, 2, 5, False, True) == (15, 0, 2)
        assert step(http, httpclient, 1, 4, False, True) == (7.5, 0, 1)
    finally:
        http.close()
        grpc.close()
