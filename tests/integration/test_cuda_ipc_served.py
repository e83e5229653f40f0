"""GPU tensors between the server and a stub process through CUDA IPC (``gpu``).

A stub-mode (the default) ``KIND_GPU`` Python model with
``FORCE_CPU_ONLY_INPUT_TENSORS: no`` takes its input from a client's CUDA
shared-memory region as a GPU tensor and answers with a torch CUDA tensor, which
reaches the client as a normal output and, device to device, in a CUDA
shared-memory output region. Many requests in a row and at once (the arenas'
blocks reused, regions freed and made again), a GPU output of a stub whose
inputs are host data, and BLS outputs where each ``PreferredMemory`` wants them.

Every model reports what it saw (``SEEN``, a string) so a failure says so.
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

pytestmark = [pytest.mark.integration, pytest.mark.gpu]

#: Doubles INPUT0 on the GPU; fails, saying what it saw, when the input is not a GPU tensor
#: and the model expects one (parameter EXPECT_GPU_INPUT).
MODEL = """
import json

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.expect_gpu = config["parameters"]["EXPECT_GPU_INPUT"]["string_value"] == "yes"

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            seen = f"input {x!r} is_cpu={x.is_cpu()} memory_type={x.memory_type()}"
            if self.expect_gpu and x.is_cpu():
                raise pb_utils.TritonModelException("expected a GPU input; model.py saw " + seen)
            if x.is_cpu():
                t = torch.from_numpy(x.as_numpy()).cuda()
            else:
                t = torch.from_dlpack(x.to_dlpack())
                seen += f" torch device={t.device}"
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", t * 2)
            seen += f" output is_cpu={out.is_cpu()}"
            text = pb_utils.Tensor("SEEN", np.array([seen.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([out, text]))
        return responses
"""

#: Calls ``host_in`` (whose OUTPUT0 is a GPU tensor) through BLS three times: with no
#: PreferredMemory, preferring GPU 0 and preferring the CPU; says where each output was.
BLS_MODEL = """
import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            seen = []
            out = None
            for label, preferred in (
                ("default", None),
                ("gpu", pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 0)),
                ("cpu", pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)),
            ):
                call = pb_utils.InferenceRequest(
                    model_name="host_in",
                    inputs=[pb_utils.Tensor("INPUT0", x.as_numpy())],
                    requested_output_names=["OUTPUT0"],
                    preferred_memory=preferred,
                )
                response = call.exec()
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
                y = pb_utils.get_output_tensor_by_name(response, "OUTPUT0")
                seen.append(f"{label} is_cpu={y.is_cpu()}")
                host = y.as_numpy() if y.is_cpu() else torch.from_dlpack(y.to_dlpack()).cpu().numpy()
                out = host if out is None else out
            text = pb_utils.Tensor("SEEN", np.array([" ".join(seen).encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out), text]))
        return responses
"""

N = 16


def _model(repo: Path, name: str, force_cpu: str, source: str = MODEL) -> None:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(source)
    expect = "yes" if force_cpu == "no" else "no"
    (folder / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""
            name: "{name}"
            backend: "python"
            max_batch_size: 0
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {N} ] }} ]
            output [
              {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {N} ] }},
              {{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }}
            ]
            instance_group [ {{ kind: KIND_GPU count: 2 gpus: [ 0 ] }} ]
            parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: {{ string_value: "{force_cpu}" }} }}
            parameters {{ key: "EXPECT_GPU_INPUT" value: {{ string_value: "{expect}" }} }}
            """
        )
    )


@pytest.fixture(scope="module")
def server(server_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from triton_python_backend_utils._cuda import load
    from tritonpy.memory import load_runtime

    torch = pytest.importorskip("torch")
    if load_runtime() is None or load() is None or not torch.cuda.is_available():
        pytest.skip("no GPU with cuda-python and torch")
    repo = tmp_path_factory.mktemp("cuda_ipc_repo")
    _model(repo, "gpu_in", "no")  # stub mode (the default), GPU inputs through CUDA IPC
    _model(repo, "host_in", "yes")  # stub mode, host inputs, GPU output
    _model(repo, "bls_gpu", "yes", BLS_MODEL)  # BLS to host_in with each PreferredMemory
    return server_factory([repo], "--allow-client-shm=true")


def _seen(result: Any) -> str:
    return " | ".join(s.decode() for s in result.as_numpy("SEEN").reshape(-1))


def _infer_from_region(client: Any, model: str, tag: str, values: np.ndarray[Any, Any]) -> None:
    """One request whose input lies in a fresh CUDA region and whose OUTPUT0 is read
    both as a normal output and from a CUDA output region."""
    import tritonclient.utils.cuda_shared_memory as cudashm

    ins = cudashm.create_shared_memory_region(f"{tag}_in", values.nbytes, 0)
    outs = cudashm.create_shared_memory_region(f"{tag}_out", values.nbytes, 0)
    try:
        cudashm.set_shared_memory_region(ins, [values])
        client.register_cuda_shared_memory(f"{tag}_in", cudashm.get_raw_handle(ins), 0, values.nbytes)
        client.register_cuda_shared_memory(f"{tag}_out", cudashm.get_raw_handle(outs), 0, values.nbytes)
        inp = httpclient.InferInput("INPUT0", [N], "FP32")
        inp.set_shared_memory(f"{tag}_in", values.nbytes)
        # A normal output first ...
        result = client.infer(
            model,
            [inp],
            outputs=[httpclient.InferRequestedOutput("OUTPUT0"), httpclient.InferRequestedOutput("SEEN")],
        )
        seen = _seen(result)
        assert "is_cpu=False" in seen and "torch device=cuda" in seen, seen
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values * 2, err_msg=seen)
        # ... then into the client's CUDA output region (device to device in the server).
        out = httpclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory(f"{tag}_out", values.nbytes)
        result = client.infer(model, [inp], outputs=[out, httpclient.InferRequestedOutput("SEEN")])
        got = cudashm.get_contents_as_numpy(outs, np.float32, [N])
        np.testing.assert_array_equal(got, values * 2, err_msg=_seen(result))
    finally:
        client.unregister_cuda_shared_memory(f"{tag}_in")
        client.unregister_cuda_shared_memory(f"{tag}_out")
        cudashm.destroy_shared_memory_region(ins)
        cudashm.destroy_shared_memory_region(outs)


def test_a_cuda_input_reaches_a_stub_as_a_gpu_tensor_and_its_gpu_output_comes_back(server: Any) -> None:
    client = httpclient.InferenceServerClient(server.url)
    try:
        _infer_from_region(client, "gpu_in", "one", np.arange(N, dtype=np.float32))
    finally:
        client.close()


def test_many_requests_in_a_row_with_regions_freed_and_made_again(server: Any) -> None:
    """Each request a fresh client region (the driver may hand back the same memory):
    no "already mapped", no stale data from a reused block."""
    client = httpclient.InferenceServerClient(server.url)
    try:
        for i in range(60):
            _infer_from_region(
                client, "gpu_in", f"row{i}", np.full(N, i, dtype=np.float32) + np.arange(N, dtype=np.float32)
            )
    finally:
        client.close()


def test_many_requests_at_once_share_one_region(server: Any) -> None:
    """8 clients, 40 requests each, every input at its own offset of one region."""
    import tritonclient.utils.cuda_shared_memory as cudashm

    clients, rounds = 8, 40
    size = N * 4
    region = cudashm.create_shared_memory_region("many_in", size * clients, 0)
    setup = httpclient.InferenceServerClient(server.url)
    errors: list[str] = []
    try:
        # tritonclient writes a region from its start: every client's rows in one write
        cudashm.set_shared_memory_region(
            region, [np.concatenate([np.full(N, c, np.float32) for c in range(clients)])]
        )
        setup.register_cuda_shared_memory("many_in", cudashm.get_raw_handle(region), 0, size * clients)

        def run(c: int) -> None:
            client = httpclient.InferenceServerClient(server.url)
            try:
                for r in range(rounds):
                    inp = httpclient.InferInput("INPUT0", [N], "FP32")
                    inp.set_shared_memory("many_in", size, offset=c * size)
                    result = client.infer("gpu_in", [inp])
                    got = result.as_numpy("OUTPUT0")
                    if got is None or not np.array_equal(got, np.full(N, 2 * c, np.float32)):
                        errors.append(f"client {c} round {r}: got {got}; model.py saw {_seen(result)}")
                        return
            except Exception as exc:  # reported below, with the others
                errors.append(f"client {c}: {exc}")
            finally:
                client.close()

        threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not errors, "\n".join(errors[:10])
    finally:
        setup.unregister_cuda_shared_memory("many_in")
        setup.close()
        cudashm.destroy_shared_memory_region(region)


def test_a_gpu_output_of_a_stub_with_host_inputs(server: Any) -> None:
    import tritonclient.utils.cuda_shared_memory as cudashm

    client = httpclient.InferenceServerClient(server.url)
    values = np.arange(N, dtype=np.float32) - 3
    outs = cudashm.create_shared_memory_region("host_in_out", values.nbytes, 0)
    try:
        for i in range(20):
            inp = httpclient.InferInput("INPUT0", [N], "FP32")
            inp.set_data_from_numpy(values + i)
            result = client.infer("host_in", [inp])
            seen = _seen(result)
            assert "is_cpu=True" in seen and "output is_cpu=False" in seen, seen
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), (values + i) * 2, err_msg=seen)
        client.register_cuda_shared_memory("host_in_out", cudashm.get_raw_handle(outs), 0, values.nbytes)
        inp = httpclient.InferInput("INPUT0", [N], "FP32")
        inp.set_data_from_numpy(values)
        out = httpclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("host_in_out", values.nbytes)
        result = client.infer("host_in", [inp], outputs=[out, httpclient.InferRequestedOutput("SEEN")])
        got = cudashm.get_contents_as_numpy(outs, np.float32, [N])
        np.testing.assert_array_equal(got, values * 2, err_msg=_seen(result))
    finally:
        client.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(outs)
        client.close()


def test_bls_outputs_come_where_their_preferred_memory_says(server: Any) -> None:
    client = httpclient.InferenceServerClient(server.url)
    try:
        values = np.arange(N, dtype=np.float32)
        inp = httpclient.InferInput("INPUT0", [N], "FP32")
        inp.set_data_from_numpy(values)
        result = client.infer("bls_gpu", [inp])
        seen = _seen(result)
        assert seen == "default is_cpu=False gpu is_cpu=False cpu is_cpu=True", seen
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values * 2, err_msg=seen)
    finally:
        client.close()


def test_the_stubs_took_the_cuda_ipc_path(server: Any) -> None:
    """The server's log names no fallback to host data for these models."""
    text = Path(server.log).read_text(errors="replace")
    assert "as host data" not in text, text[-4000:]
