"""tritonpy's protobuf messages live apart from tritonclient's copies of the same
``inference.*`` names, under either protobuf implementation and in either import
order: a process may hold both (an embedding application, a Python model that calls
another server with tritonclient, a test process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BOTH_ORDERS = """
import sys
first, second = sys.argv[1:3]
import importlib
from google.protobuf.internal import api_implementation
for name in (first, second):
    importlib.import_module(name)
import tritonclient.grpc.service_pb2 as theirs
import tritonpy.config
from tritonpy.grpc import grpc_service_pb2 as ours, health_pb2

request = ours.ModelInferRequest(model_name="m", id="7")
request.inputs.add(name="IN", datatype="FP32", shape=[1, 2])
assert theirs.ModelInferRequest.FromString(request.SerializeToString()).inputs[0].shape == [1, 2]
config = tritonpy.config.ModelConfig(name="m", max_batch_size=4)
assert config.DESCRIPTOR.file.name == "tritonpy/config/model_config.proto"
assert ours.ModelInferRequest.InferInputTensor.__qualname__ == "ModelInferRequest.InferInputTensor"
assert ours.ModelInferRequest.__module__ == "tritonpy.grpc.grpc_service_pb2"
assert health_pb2.HealthCheckResponse.SERVING == 1
print(api_implementation.Type())
"""


@pytest.mark.parametrize("implementation", ["python", "upb"])
@pytest.mark.parametrize(
    "order",
    [("tritonpy.grpc.grpc_service_pb2", "tritonclient.grpc"), ("tritonclient.grpc", "tritonpy.config")],
    ids=["tritonpy-first", "tritonclient-first"],
)
def test_tritonpy_and_tritonclient_messages_in_one_process(
    implementation: str, order: tuple[str, str]
) -> None:
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": implementation}
    run = subprocess.run(
        [sys.executable, "-c", BOTH_ORDERS, *order], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == implementation
