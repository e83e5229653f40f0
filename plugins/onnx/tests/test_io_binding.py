"""The IOBinding path of the ONNX backend (what CUDA sessions run): on the CPU with
real onnxruntime for host inputs and host memory read by pointer, and outputs left
in their OrtValues (bound to "cpu", standing in for "cuda"); marked ``gpu``, with
CUDA inputs used in place and outputs left on the GPU by the CUDAExecutionProvider."""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonpy_backend_onnx as backend
from onnx import TensorProto, helper
from tritonpy_backend_onnx._binding import DeviceOutput, run_bound
from tritonpy_sdk import KDLCPU, KDLCUDA, DataType, DeviceArray, RequestedOutput, Tensor
from tritonpy_sdk.testing import BackendHarness


def _save(path: Path, nodes: list[Any], inputs: list[Any], outputs: list[Any]) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (path / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, path / "1" / "model.onnx")
    return path


def _add_sub(path: Path, shape: list[Any]) -> Path:
    vi = helper.make_tensor_value_info
    return _save(
        path,
        [helper.make_node("Add", ["A", "B"], ["SUM"]), helper.make_node("Sub", ["A", "B"], ["DIFF"])],
        [vi("A", TensorProto.FLOAT, shape), vi("B", TensorProto.FLOAT, shape)],
        [vi("SUM", TensorProto.FLOAT, shape), vi("DIFF", TensorProto.FLOAT, shape)],
    )


def test_run_bound_matches_run_for_host_inputs(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", ["N", 3])
    session = ort.InferenceSession(str(path / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    a = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(4, 6)).astype(np.float32)[:, ::2]  # not contiguous: bound from a copy
    expected = session.run(["DIFF", "SUM"], {"A": a, "B": b})
    got = run_bound(session, ort.RunOptions(), {"A": a, "B": b}, ["DIFF", "SUM"])
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)


def test_a_host_pointer_is_read_in_place(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", ["N", 3])
    session = ort.InferenceSession(str(path / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    buffer = (ctypes.c_float * 6)(*range(6))
    a = DeviceArray(ctypes.addressof(buffer), (2, 3), np.float32, owner=buffer, device_type=KDLCPU)
    b = np.ones((2, 3), np.float32)
    (total,) = run_bound(session, ort.RunOptions(), {"A": a, "B": b}, ["SUM"])
    np.testing.assert_array_equal(total, np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
    buffer[0] = 100.0  # the next run reads the memory as it is now
    (total,) = run_bound(session, ort.RunOptions(), {"A": a, "B": b}, ["SUM"])
    assert total[0, 0] == 101.0


def _binding(h: BackendHarness) -> None:
    """Make the CPU session run as a CUDA one does: through IOBinding."""
    h.instance.state.io_binding = True


def test_the_backend_batches_through_the_binding(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", ["N", 3])
    session = ort.InferenceSession(str(path / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    with BackendHarness(backend, path, config={"name": "m"}) as h:
        assert h.instance.state.io_binding is False and h.instance.device_inputs is False  # CPU: run()
        _binding(h)
        rng = np.random.default_rng(2)
        feeds = [
            (rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(n, 3)).astype(np.float32))
            for n in (1, 3, 2)
        ]
        responses = h.execute([h.request({"A": a, "B": b}) for a, b in feeds])
        for (a, b), response in zip(feeds, responses):
            expected = session.run(None, {"A": a, "B": b})
            np.testing.assert_allclose(response.outputs["SUM"].data, expected[0])
            np.testing.assert_allclose(response.outputs["DIFF"].data, expected[1])


def test_device_arrays_of_host_memory_are_bound_by_pointer(tmp_path: Path) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 2]), config={"name": "m"}) as h:
        _binding(h)
        buffer = (ctypes.c_float * 4)(1, 2, 3, 4)
        array = DeviceArray(ctypes.addressof(buffer), (2, 2), np.float32, owner=buffer, device_type=KDLCPU)
        request = h.request({"A": np.zeros((2, 2), np.float32), "B": np.ones((2, 2), np.float32)})
        request.inputs["A"] = Tensor.on_device("A", array, DataType.FP32)
        (response,) = h.execute([request])
        assert response.outputs["SUM"].data.tolist() == [[2, 3], [4, 5]]


def test_scalars_go_through_the_binding(tmp_path: Path) -> None:
    vi = helper.make_tensor_value_info
    path = _save(
        tmp_path / "s",
        [helper.make_node("Identity", ["X"], ["Y"])],
        [vi("X", TensorProto.FLOAT, [])],
        [vi("Y", TensorProto.FLOAT, [])],
    )
    with BackendHarness(backend, path, config={"name": "s"}) as h:
        _binding(h)
        assert h.infer({"X": np.array([2.5], np.float32)})["Y"].tolist() == [2.5]
        buffer = ctypes.c_float(4.5)
        array = DeviceArray(ctypes.addressof(buffer), (1,), np.float32, owner=buffer, device_type=KDLCPU)
        request = h.request({"X": np.zeros(1, np.float32)})
        request.inputs["X"] = Tensor.on_device("X", array, DataType.FP32)
        (response,) = h.execute([request])
        assert response.outputs["Y"].data.tolist() == [4.5]


@pytest.mark.gpu
def test_cuda_inputs_are_used_in_place_and_batched_in_the_pool(tmp_path: Path) -> None:
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("no CUDAExecutionProvider in this onnxruntime build")
    from tritonpy.memory import load_runtime
    from tritonpy.memory.manager import MemoryManager

    runtime = load_runtime()
    if runtime is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    manager = MemoryManager(runtime)
    device_memory = manager.device_memory
    assert device_memory is not None

    def on_gpu(values: np.ndarray[Any, Any]) -> Tensor:
        array = device_memory.allocate(0, values.shape, values.dtype)
        runtime.copy_to_device(0, array.address, values.ctypes.data, values.nbytes)
        assert array.__dlpack_device__() == (KDLCUDA, 0)
        return Tensor.on_device("A", array, DataType.FP32)

    path = _add_sub(tmp_path / "m", ["N", 3])
    with BackendHarness(backend, path, config={"name": "m"}, instance_kind="KIND_GPU") as h:
        assert h.instance.device_inputs and h.instance.state.io_binding
        h.instance.device_memory = device_memory
        a1 = np.arange(6, dtype=np.float32).reshape(2, 3)
        a2 = np.full((1, 3), 7, np.float32)
        requests = []
        for a in (a1, a2):
            request = h.request({"A": a, "B": np.ones_like(a)})
            request.inputs["A"] = on_gpu(a)
            requests.append(request)
        used = manager.device_pools[0].pool.used_bytes
        responses = h.execute(requests)
        np.testing.assert_array_equal(responses[0].outputs["SUM"].data, a1 + 1)
        np.testing.assert_array_equal(responses[1].outputs["DIFF"].data, a2 - 1)
        del requests, responses
        gc.collect()
        assert manager.device_pools[0].pool.used_bytes <= used  # the gathered batch went back
    manager.close()


# -- outputs left where ORT wrote them -------------------------------------------------------


def test_run_bound_leaves_outputs_on_device_in_their_ortvalues(tmp_path: Path) -> None:
    """``"cpu"`` stands in for ``"cuda"``: the same binding, get_outputs and DeviceArray."""
    path = _add_sub(tmp_path / "m", ["N", 3])
    session = ort.InferenceSession(str(path / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    on_device = {"SUM": DeviceOutput("cpu", 0, np.dtype(np.float32))}
    total, diff = run_bound(session, ort.RunOptions(), {"A": a, "B": b}, ["SUM", "DIFF"], on_device)
    assert isinstance(total, DeviceArray) and isinstance(diff, np.ndarray)
    assert (total.shape, total.dtype, total.device_type) == ((2, 3), np.float32, KDLCPU)
    assert isinstance(total.owner, ort.OrtValue) and total.address == total.owner.data_ptr()
    np.testing.assert_array_equal(total.to_host(), a + b)
    np.testing.assert_array_equal(np.from_dlpack(total), a + b)  # read in place
    np.testing.assert_array_equal(diff, a - b)


def _wanting(request: Any, *outputs: RequestedOutput) -> Any:
    request.requested_outputs = list(outputs)
    return request


def test_the_backend_hands_out_a_batchs_output_on_device_only_when_all_want_it(tmp_path: Path) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config={"name": "m"}) as h:
        _binding(h)
        state = h.instance.state
        state.output_device = "cpu"  # host memory stands in for GPU 0's
        rng = np.random.default_rng(4)
        feeds = [rng.normal(size=(n, 3)).astype(np.float32) for n in (2, 1)]
        wants = [RequestedOutput("SUM", device_id=0), RequestedOutput("DIFF")]
        requests = [_wanting(h.request({"A": x, "B": x}), *wants) for x in feeds]
        assert set(state.on_device(requests, ["SUM", "DIFF"])) == {"SUM"}
        responses = h.execute(requests)
        first, second = (r.outputs["SUM"].device for r in responses)
        assert first is not None and second is not None, "SUM is handed out where ORT wrote it"
        assert second.address == first.address + 2 * 3 * 4  # rows of one OrtValue, in place
        for x, response in zip(feeds, responses):
            np.testing.assert_array_equal(response.outputs["SUM"].data, x + x)
            assert response.outputs["DIFF"].device is None
            np.testing.assert_array_equal(response.outputs["DIFF"].data, x - x)
        assert state.device_outputs == 2
        # A mixed batch: the host for every request (one binding per output).
        mixed = [
            _wanting(h.request({"A": feeds[0], "B": feeds[0]}), *wants),
            _wanting(h.request({"A": feeds[1], "B": feeds[1]}), RequestedOutput("SUM")),
        ]
        assert state.on_device(mixed, ["SUM", "DIFF"]) == {}
        assert all(r.outputs["SUM"].device is None for r in h.execute(mixed))
        other_gpu = [_wanting(h.request({"A": feeds[0], "B": feeds[0]}), RequestedOutput("SUM", device_id=1))]
        assert state.on_device(other_gpu, ["SUM"]) == {}


@pytest.mark.gpu
def test_cuda_outputs_wanted_on_the_gpu_stay_there(tmp_path: Path) -> None:
    """Not yet run: no onnxruntime CUDA provider where tritonpy's GPU tests have run."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("no CUDAExecutionProvider in this onnxruntime build")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch (reads the outputs on the GPU)")
    path = _add_sub(tmp_path / "m", ["N", 3])
    with BackendHarness(backend, path, config={"name": "m"}, instance_kind="KIND_GPU") as h:
        state = h.instance.state
        assert state.io_binding and state.output_device == "cuda" and state.device_id == 0
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        wants = [RequestedOutput("SUM", device_id=0), RequestedOutput("DIFF")]
        (response,) = h.execute([_wanting(h.request({"A": a, "B": np.ones_like(a)}), *wants)])
        total = response.outputs["SUM"]
        assert total.is_device and total.device_id == 0, f"SUM: {total!r}"
        on_gpu = torch.from_dlpack(total)
        assert on_gpu.device == torch.device("cuda", 0)
        np.testing.assert_array_equal(on_gpu.cpu().numpy(), a + 1)
        assert not response.outputs["DIFF"].is_device
        np.testing.assert_array_equal(response.outputs["DIFF"].data, a - 1)
        assert state.device_outputs == 1
