"""The ONNX backend without a server (tritonpy_sdk.testing), against onnxruntime run directly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonpy_backend_onnx as backend
from onnx import TensorProto, helper
from tritonpy_backend_onnx._session import session_options
from tritonpy_sdk import DataType, ErrorCode, RequestedOutput, TritonError
from tritonpy_sdk.host import validate_backend
from tritonpy_sdk.testing import BackendHarness


def _save(path: Path, nodes: list, inputs: list, outputs: list, inits: list | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (path / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, path / "1" / "model.onnx")
    return path


def _add_sub(path: Path, shape: list[Any], elem: int = TensorProto.FLOAT) -> Path:
    vi = helper.make_tensor_value_info
    return _save(
        path,
        [helper.make_node("Add", ["A", "B"], ["SUM"]), helper.make_node("Sub", ["A", "B"], ["DIFF"])],
        [vi("A", elem, shape), vi("B", elem, shape)],
        [vi("SUM", elem, shape), vi("DIFF", elem, shape)],
    )


def test_auto_complete_of_a_batching_model(tmp_path: Path) -> None:
    h = BackendHarness(
        backend,
        _add_sub(tmp_path / "m", ["N", 3]),
        config={"name": "m"},
        backend_config={"default-max-batch-size": "6"},
    )
    with h:
        cfg = h.model.config
        assert cfg["max_batch_size"] == 6
        assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [
            ("A", "TYPE_FP32", [3]),
            ("B", "TYPE_FP32", [3]),
        ]
        assert [o["name"] for o in cfg["output"]] == ["SUM", "DIFF"]


def test_auto_complete_keeps_fixed_shapes_unbatched(tmp_path: Path) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", [2, 3]), config={"name": "m"}) as h:
        assert h.model.config.get("max_batch_size", 0) == 0
        assert h.model.config["input"][0]["dims"] == [2, 3]


def test_user_config_is_kept_and_checked(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", ["N", 3])
    user = {"name": "m", "max_batch_size": 2, "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [3]}]}
    with BackendHarness(backend, path, config=user) as h:
        assert h.model.config["max_batch_size"] == 2
        assert {i["name"] for i in h.model.config["input"]} == {"A", "B"}
    wrong_type = {"name": "m", "input": [{"name": "A", "data_type": "TYPE_INT32", "dims": [3]}]}
    with pytest.raises(
        TritonError, match="configuration expects datatype TYPE_INT32 for input 'A', model provides TYPE_FP32"
    ):
        BackendHarness(backend, path, config=wrong_type).start()
    wrong_name = {"name": "m", "input": [{"name": "Z", "data_type": "TYPE_FP32", "dims": [3]}]}
    with pytest.raises(TritonError, match="unexpected inference input 'Z', allowed inputs are: A, B"):
        BackendHarness(backend, path, config=wrong_name).start()
    wrong_dims = {
        "name": "m",
        "max_batch_size": 2,
        "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    with pytest.raises(
        TritonError, match=re.escape("tensor 'A': the model expects 2 dimensions (shape [-1,3])")
    ):
        BackendHarness(backend, path, config=wrong_dims).start()


def test_batched_execute_matches_onnxruntime(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", ["N", 3])
    session = ort.InferenceSession(str(path / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    with BackendHarness(backend, path, config={"name": "m"}) as h:
        requests = []
        feeds = []
        for n in (1, 3, 2):
            a, b = rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(n, 3)).astype(np.float32)
            feeds.append((a, b))
            requests.append(h.request({"A": a, "B": b}))
        responses = h.execute(requests)  # one session.run for the three requests
        for (a, b), response in zip(feeds, responses):
            expected = session.run(None, {"A": a, "B": b})
            np.testing.assert_allclose(response.outputs["SUM"].data, expected[0])
            np.testing.assert_allclose(response.outputs["DIFF"].data, expected[1])


def test_only_requested_outputs_are_computed(tmp_path: Path) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config={"name": "m"}) as h:
        req = h.request({"A": np.ones((1, 3), np.float32), "B": np.ones((1, 3), np.float32)})
        req.requested_outputs = [RequestedOutput("DIFF")]
        (resp,) = h.execute([req])
        assert list(resp.outputs) == ["DIFF"]


@pytest.mark.parametrize(
    ("elem", "dtype"),
    [(TensorProto.FLOAT16, np.float16), (TensorProto.INT64, np.int64), (TensorProto.DOUBLE, np.float64)],
)
def test_dtypes(tmp_path: Path, elem: int, dtype: type) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 2], elem), config={"name": "m"}) as h:
        out = h.infer({"A": np.array([[1, 2]], dtype), "B": np.array([[3, 4]], dtype)})
        assert out["SUM"].dtype == dtype and out["SUM"].tolist() == [[4, 6]]


def test_strings(tmp_path: Path) -> None:
    vi = helper.make_tensor_value_info
    path = _save(
        tmp_path / "s",
        [helper.make_node("Identity", ["T"], ["U"])],
        [vi("T", TensorProto.STRING, ["N", 2])],
        [vi("U", TensorProto.STRING, ["N", 2])],
    )
    with BackendHarness(backend, path, config={"name": "s"}) as h:
        assert h.model.config["input"][0]["data_type"] == "TYPE_STRING"
        out = h.infer({"T": np.array([[b"x", "é".encode()]], dtype=object)})
        assert out["U"].tolist() == [[b"x", "é".encode()]]


def test_session_parameters_reach_onnxruntime(tmp_path: Path) -> None:
    config = {
        "name": "m",
        "parameters": {
            "intra_op_thread_count": {"string_value": "1"},
            "inter_op_thread_count": {"string_value": "2"},
            "execution_mode": {"string_value": "1"},
            "enable_mem_arena": {"string_value": "false"},
        },
        "optimization": {"graph": {"level": 1}},
    }
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config=config) as h:
        options = h.instance.state.session.get_session_options()
        assert options.intra_op_num_threads == 1
        assert options.inter_op_num_threads == 2
        assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
        assert options.enable_cpu_mem_arena is False
        assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("intra_op_thread_count", "many", "'intra_op_thread_count' must be an integer"),
        ("execution_mode", "3", "'execution_mode' must be 0 (sequential) or 1 (parallel)"),
        ("enable_mem_arena", "maybe", "'enable_mem_arena' must be true or false"),
    ],
)
def test_bad_parameters_fail_the_load(tmp_path: Path, key: str, value: str, message: str) -> None:
    config = {"name": "m", "parameters": {key: {"string_value": value}}}
    with pytest.raises(TritonError, match=re.escape(message)):
        BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config=config).start()


def test_missing_and_corrupt_model_files(tmp_path: Path) -> None:
    (tmp_path / "empty" / "1").mkdir(parents=True)
    with pytest.raises(TritonError, match="unable to find '.*model.onnx' for model 'empty'") as missing:
        BackendHarness(backend, tmp_path / "empty", config={"name": "empty"}).start()
    assert missing.value.code is ErrorCode.UNAVAILABLE
    (tmp_path / "bad" / "1").mkdir(parents=True)
    (tmp_path / "bad" / "1" / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(TritonError, match="onnxruntime failed to load"):
        BackendHarness(backend, tmp_path / "bad", config={"name": "bad"}).start()


@pytest.mark.gpu
def test_cuda_provider(tmp_path: Path) -> None:
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("no CUDAExecutionProvider in this onnxruntime build")
    path = _add_sub(tmp_path / "m", ["N", 3])
    with BackendHarness(backend, path, config={"name": "m"}, instance_kind="KIND_GPU") as h:
        assert h.instance.state.session.get_providers()[0] == "CUDAExecutionProvider"
        out = h.infer({"A": np.ones((2, 3), np.float32), "B": np.ones((2, 3), np.float32)})
        np.testing.assert_array_equal(out["SUM"], 2 * np.ones((2, 3)))


def test_kind_gpu_without_cuda_is_a_clear_error(tmp_path: Path) -> None:
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    path = _add_sub(tmp_path / "m", ["N", 3])
    with pytest.raises(TritonError, match="no CUDAExecutionProvider"):
        BackendHarness(backend, path, config={"name": "m"}, instance_kind="KIND_GPU").start()


def test_optional_input_with_a_default_in_the_graph(tmp_path: Path) -> None:
    """An input with an initializer may be left out when the config marks it optional."""
    vi = helper.make_tensor_value_info
    bias = onnx.numpy_helper.from_array(np.full((1, 2), 10, np.float32), "BIAS")
    path = _save(
        tmp_path / "m",
        [helper.make_node("Add", ["X", "BIAS"], ["Y"])],
        [vi("X", TensorProto.FLOAT, [1, 2]), vi("BIAS", TensorProto.FLOAT, [1, 2])],
        [vi("Y", TensorProto.FLOAT, [1, 2])],
        [bias],
    )
    config = {
        "name": "m",
        "input": [{"name": "BIAS", "data_type": "TYPE_FP32", "dims": [1, 2], "optional": True}],
    }
    with BackendHarness(backend, path, config=config) as h:
        assert h.infer({"X": np.ones((1, 2), np.float32)})["Y"].tolist() == [[11, 11]]
        both = {"X": np.ones((1, 2), np.float32), "BIAS": np.zeros((1, 2), np.float32)}
        assert h.infer(both)["Y"].tolist() == [[1, 1]]


def test_ragged_batch_with_batch_input(tmp_path: Path) -> None:
    """Requests of different lengths batch together; BATCH_ELEMENT_COUNT tells the model each one's size."""
    vi = helper.make_tensor_value_info
    shape = onnx.numpy_helper.from_array(np.array([-1, 1], np.int64), "SHAPE")
    path = _save(
        tmp_path / "ragged",
        [
            helper.make_node("Identity", ["X"], ["X_ALL"]),
            helper.make_node("Reshape", ["COUNT", "SHAPE"], ["Y"]),
        ],
        [vi("X", TensorProto.FLOAT, ["total"]), vi("COUNT", TensorProto.FLOAT, ["items"])],
        [vi("Y", TensorProto.FLOAT, ["items", 1]), vi("X_ALL", TensorProto.FLOAT, ["total"])],
        [shape],
    )
    config = {
        "name": "ragged",
        "max_batch_size": 8,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1], "allow_ragged_batch": True}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [1]}],
        "batch_input": [
            {
                "kind": "BATCH_ELEMENT_COUNT",
                "target_name": ["COUNT"],
                "data_type": "TYPE_FP32",
                "source_input": ["X"],
            }
        ],
    }
    with BackendHarness(backend, path, config=config) as h:
        assert [i["name"] for i in h.model.config["input"]] == ["X"]  # COUNT is the core's, not the client's
        requests = [h.request({"X": np.ones((1, n), np.float32)}) for n in (3, 1, 5)]
        for r in requests:
            r.requested_outputs = [RequestedOutput("Y")]
        responses = h.execute(requests)
        assert [resp.outputs["Y"].data.tolist() for resp in responses] == [[[3.0]], [[1.0]], [[5.0]]]


def test_batch_output_scattered_by_each_requests_input_shape(tmp_path: Path) -> None:
    """A ragged batch's flat output comes back to each request in its input's shape
    (Triton's BATCH_SCATTER_WITH_INPUT_SHAPE); its dims need not match the graph's."""
    vi = helper.make_tensor_value_info
    two = onnx.numpy_helper.from_array(np.array(2, np.float32), "TWO")
    path = _save(
        tmp_path / "scatter",
        [helper.make_node("Mul", ["X", "TWO"], ["Y"])],
        [vi("X", TensorProto.FLOAT, ["total"])],
        [vi("Y", TensorProto.FLOAT, ["total"])],
        [two],
    )
    config = {
        "name": "scatter",
        "max_batch_size": 8,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1], "allow_ragged_batch": True}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}],
        "batch_output": [
            {"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["Y"], "source_input": ["X"]}
        ],
    }
    with BackendHarness(backend, path, config=config) as h:
        feeds = [np.arange(n, dtype=np.float32).reshape(1, n) + n for n in (3, 1, 5)]
        responses = h.execute([h.request({"X": x}) for x in feeds])
        for x, response in zip(feeds, responses):
            assert response.outputs["Y"].data.shape == x.shape
            np.testing.assert_array_equal(response.outputs["Y"].data, x * 2)
        alone = np.ones((2, 2), np.float32)  # one request: its input's shape too
        assert h.infer({"X": alone})["Y"].tolist() == [[2, 2], [2, 2]]


def test_backend_info_and_lazy_import() -> None:
    hooks = validate_backend("onnxruntime", backend)
    assert hooks.info.platforms == ("onnxruntime_onnx",)
    assert hooks.info.default_model_filename == "model.onnx"
    assert hooks.has_auto_complete
    code = "import sys, tritonpy_backend_onnx; sys.exit('onnxruntime' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (None, "ORT_ENABLE_ALL"),
        (-1, "ORT_ENABLE_BASIC"),
        (1, "ORT_ENABLE_EXTENDED"),
        (2, "ORT_DISABLE_ALL"),
    ],
)
def test_graph_optimization_level(tmp_path: Path, level: int | None, expected: str) -> None:
    config: dict[str, Any] = {"name": "m"}
    if level is not None:
        config["optimization"] = {"graph": {"level": level}}
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config=config) as h:
        options = h.instance.state.session.get_session_options()
        assert options.graph_optimization_level == getattr(ort.GraphOptimizationLevel, expected)


def test_memory_parameters(tmp_path: Path) -> None:
    config = {
        "name": "m",
        "parameters": {
            "enable_mem_pattern": {"string_value": "false"},
            "memory.enable_memory_arena_shrinkage": {"string_value": "cpu:0"},
        },
    }
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config=config) as h:
        state = h.instance.state
        assert state.session.get_session_options().enable_mem_pattern is False
        assert state.run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        out = h.infer({"A": np.ones((2, 3), np.float32), "B": np.ones((2, 3), np.float32)})
        assert out["SUM"].tolist() == [[2, 2, 2]] * 2
    bad = {"name": "m", "parameters": {"memory.enable_memory_arena_shrinkage": {"string_value": "tpu"}}}
    with pytest.raises(TritonError, match="'memory.enable_memory_arena_shrinkage' must list devices"):
        BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config=bad).start()


def test_default_threads_are_left_to_onnxruntime(tmp_path: Path) -> None:
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config={"name": "m"}) as h:
        options = h.instance.state.session.get_session_options()
        assert options.intra_op_num_threads == ort.SessionOptions().intra_op_num_threads
        assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL


def test_contradictions_are_caught_without_auto_complete(tmp_path: Path) -> None:
    """With --disable-auto-complete-config the session's own signature still checks the config."""
    path = _add_sub(tmp_path / "m", ["N", 3])
    good_out = [{"name": "SUM", "data_type": "TYPE_FP32", "dims": [3]}]
    a = {"name": "A", "data_type": "TYPE_FP32", "dims": [3]}
    cases = [
        (
            [{**a, "data_type": "TYPE_INT64"}, {**a, "name": "B"}],
            "configuration expects datatype TYPE_INT64 for input 'A', model provides TYPE_FP32",
        ),
        ([a], "configuration expects 1 inputs, model provides 2: input 'B'"),
        ([a, {**a, "name": "B", "dims": [3, 1]}], "tensor 'B': the model expects 2 dimensions"),
    ]
    for inputs, message in cases:
        config = {"name": "m", "max_batch_size": 4, "input": inputs, "output": good_out}
        with pytest.raises(TritonError, match=re.escape(message)) as info:
            BackendHarness(backend, path, config=config, auto_complete=False).start()
        assert info.value.code is ErrorCode.INVALID_ARG
    bad_output = {
        "name": "m",
        "max_batch_size": 4,
        "input": [a, {**a, "name": "B"}],
        "output": [{"name": "PRODUCT", "data_type": "TYPE_FP32", "dims": [3]}],
    }
    with pytest.raises(
        TritonError, match="unexpected inference output 'PRODUCT', allowed outputs are: DIFF, SUM"
    ):
        BackendHarness(backend, path, config=bad_output, auto_complete=False).start()


def test_batching_requested_for_a_model_that_cannot_batch(tmp_path: Path) -> None:
    path = _add_sub(tmp_path / "m", [2, 3])
    with pytest.raises(TritonError, match="autofill failed for model 'm': model does not support batching"):
        BackendHarness(backend, path, config={"name": "m", "max_batch_size": 4}).start()


def test_scalars(tmp_path: Path) -> None:
    """A scalar is dims [1] in the config; batched ones get Triton's empty reshape."""
    vi = helper.make_tensor_value_info
    fixed = _save(
        tmp_path / "scalar",
        [helper.make_node("Neg", ["X"], ["Y"])],
        [vi("X", TensorProto.FLOAT, [])],
        [vi("Y", TensorProto.FLOAT, [])],
    )
    with BackendHarness(backend, fixed, config={"name": "scalar"}) as h:
        assert h.model.config.get("max_batch_size", 0) == 0
        (x,) = h.model.config["input"]
        assert (x["name"], x["data_type"], x["dims"]) == ("X", "TYPE_FP32", [1])
        assert h.infer({"X": np.array([2.0], np.float32)})["Y"].tolist() == [-2.0]
    batched = _save(
        tmp_path / "batched",
        [helper.make_node("Neg", ["X"], ["Y"])],
        [vi("X", TensorProto.FLOAT, ["N"])],
        [vi("Y", TensorProto.FLOAT, ["N"])],
    )
    with BackendHarness(backend, batched, config={"name": "batched"}) as h:
        assert h.model.config["max_batch_size"] == 4
        (x,) = h.model.config["input"]
        assert (x["name"], x["dims"], x["reshape"]) == ("X", [1], {"shape": []})


def test_external_data_and_model_directory(tmp_path: Path) -> None:
    """Weights in a file beside model.onnx, and Triton's model.onnx-as-a-directory layout."""
    vi = helper.make_tensor_value_info
    weights = onnx.numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(1, 64), "W")
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "g",
        [vi("X", TensorProto.FLOAT, ["N", 64])],
        [vi("Y", TensorProto.FLOAT, ["N", 64])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    for folder in (tmp_path / "beside" / "1", tmp_path / "dir" / "1" / "model.onnx"):
        folder.mkdir(parents=True)
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # onnx.save moves the weights out of the model it is given
        onnx.save(
            copy,
            folder / "model.onnx",
            save_as_external_data=True,
            location="weights.bin",
            size_threshold=0,
        )
        assert (folder / "weights.bin").exists()
    for name in ("beside", "dir"):
        with BackendHarness(backend, tmp_path / name, config={"name": name}) as h:
            out = h.infer({"X": np.ones((2, 64), np.float32)})
            np.testing.assert_array_equal(out["Y"][1], np.arange(64) + 1)


def test_batched_strings_and_int64_with_the_union_of_requested_outputs(tmp_path: Path) -> None:
    with BackendHarness(
        backend, _add_sub(tmp_path / "m", ["N", 2], TensorProto.INT64), config={"name": "m"}
    ) as h:
        first = h.request({"A": np.array([[1, 2]], np.int64), "B": np.array([[1, 1]], np.int64)})
        second = h.request(
            {"A": np.array([[5, 5], [7, 7]], np.int64), "B": np.array([[1, 2], [3, 4]], np.int64)}
        )
        first.requested_outputs = [RequestedOutput("SUM")]
        second.requested_outputs = [RequestedOutput("DIFF")]
        r1, r2 = h.execute([first, second])
        assert r1.outputs["SUM"].data.tolist() == [[2, 3]]
        assert r2.outputs["DIFF"].data.tolist() == [[4, 3], [4, 3]]
        assert r2.outputs["DIFF"].data.dtype == np.int64
    vi = helper.make_tensor_value_info
    path = _save(
        tmp_path / "s",
        [helper.make_node("Identity", ["T"], ["U"])],
        [vi("T", TensorProto.STRING, ["N"])],
        [vi("U", TensorProto.STRING, ["N"])],
    )
    with BackendHarness(backend, path, config={"name": "s"}) as h:
        responses = h.execute(
            [h.request({"T": np.array([b"a", b"b"], object)}), h.request({"T": np.array([b"c"], object)})]
        )
        assert [r.outputs["U"].data.tolist() for r in responses] == [[b"a", b"b"], [b"c"]]
        assert responses[0].outputs["U"].datatype is DataType.BYTES


def test_onnxruntime_errors_become_triton_errors(tmp_path: Path) -> None:
    """The harness does not validate requests as the core does, so ORT sees a bad shape."""
    with BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), config={"name": "m"}) as h:
        with pytest.raises(TritonError, match="onnxruntime: .*") as info:
            h.infer({"A": np.ones((1, 3, 1), np.float32), "B": np.ones((1, 3, 1), np.float32)})
        assert info.value.code is ErrorCode.INVALID_ARG


def test_sessions_on_the_global_thread_pools_ignore_the_models_thread_counts() -> None:
    config: dict[str, Any] = {"name": "m"}
    params = {"intra_op_thread_count": "3", "inter_op_thread_count": "2"}
    own = session_options(ort, config, params)
    assert (own.use_per_session_threads, own.intra_op_num_threads, own.inter_op_num_threads) == (True, 3, 2)
    shared = session_options(ort, config, params, global_threads=True)
    assert (shared.use_per_session_threads, shared.intra_op_num_threads) == (False, 0)


def test_a_bad_global_thread_pool_size_fails_the_backend(tmp_path: Path) -> None:
    settings = {"enable-global-threadpool": "1", "inter_op_thread_count": "two"}
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, _add_sub(tmp_path / "m", ["N", 3]), backend_config=settings).start()
    assert err.value.message == "backend setting 'inter_op_thread_count' must be an integer >= 0, got 'two'"
