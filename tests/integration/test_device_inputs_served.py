"""CUDA shared-memory inputs used in place by a served model (``gpu``): an in-process
Python model on ``KIND_GPU`` with ``FORCE_CPU_ONLY_INPUT_TENSORS: no`` sees its
input as a GPU tensor, hands it back as its output through DLPack, and the server
copies that output device to device into the client's output region. Another
model without the switch sees the same input as a CPU tensor."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonpy.memory import load_runtime

pytestmark = [pytest.mark.integration, pytest.mark.gpu]

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            on_gpu = pb_utils.Tensor("ON_GPU", np.array([0 if tensor.is_cpu() else 1], np.int32))
            same = pb_utils.Tensor.from_dlpack("OUTPUT0", tensor)
            responses.append(pb_utils.InferenceResponse([same, on_gpu]))
        return responses
"""


def _model(repo: Path, name: str, force_cpu: str) -> None:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""
            name: "{name}"
            backend: "python"
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
            output [
              {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }},
              {{ name: "ON_GPU" data_type: TYPE_INT32 dims: [ 1 ] }}
            ]
            instance_group [ {{ kind: KIND_GPU count: 1 gpus: [ 0 ] }} ]
            parameters {{ key: "EXECUTION_MODE" value: {{ string_value: "in_process" }} }}
            parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: {{ string_value: "{force_cpu}" }} }}
            """
        )
    )


@pytest.fixture(scope="module")
def server(server_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    if load_runtime() is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    repo = tmp_path_factory.mktemp("device_repo")
    _model(repo, "on_gpu", "no")
    _model(repo, "on_cpu", "yes")
    return server_factory([repo], "--allow-client-shm=true")


@pytest.mark.parametrize(("model", "expect_gpu"), [("on_gpu", 1), ("on_cpu", 0)])
def test_a_cuda_input_reaches_the_model_where_it_lies(server: Any, model: str, expect_gpu: int) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    client = httpclient.InferenceServerClient(server.url)
    values = np.arange(16, dtype=np.float32)
    ins = cudashm.create_shared_memory_region(f"{model}_in", values.nbytes, 0)
    outs = cudashm.create_shared_memory_region(f"{model}_out", values.nbytes, 0)
    try:
        cudashm.set_shared_memory_region(ins, [values])
        client.register_cuda_shared_memory(f"{model}_in", cudashm.get_raw_handle(ins), 0, values.nbytes)
        client.register_cuda_shared_memory(f"{model}_out", cudashm.get_raw_handle(outs), 0, values.nbytes)
        inp = httpclient.InferInput("INPUT0", [16], "FP32")
        inp.set_shared_memory(f"{model}_in", values.nbytes)
        out = httpclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory(f"{model}_out", values.nbytes)
        result = client.infer(model, [inp], outputs=[out, httpclient.InferRequestedOutput("ON_GPU")])
        assert result.as_numpy("ON_GPU").tolist() == [expect_gpu]
        np.testing.assert_array_equal(cudashm.get_contents_as_numpy(outs, np.float32, [16]), values)
    finally:
        client.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(ins)
        cudashm.destroy_shared_memory_region(outs)
        client.close()
