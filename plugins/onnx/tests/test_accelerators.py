"""Execution accelerators (``optimization.execution_accelerators``), the older CUDA model
parameters and custom operator libraries (``model_operations``), as Triton's onnxruntime
backend reads them.

The provider lists are checked as data against a named set of available providers; what
this host's onnxruntime (the CPU build) can run is checked by loading and serving models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonpy_backend_onnx as backend
from onnx import TensorProto, helper
from onnx_testmodels import add
from tritonpy_backend_onnx._accelerators import (
    CPU,
    CUDA,
    OPENVINO,
    TENSORRT,
    execution_providers,
)
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_sdk.testing import BackendHarness

ALL = (TENSORRT, CUDA, OPENVINO, CPU)


def _accelerated(gpu: list[dict[str, Any]] | None = None, cpu: list[dict[str, Any]] | None = None) -> dict:
    accelerators: dict[str, Any] = {}
    if gpu is not None:
        accelerators["gpu_execution_accelerator"] = gpu
    if cpu is not None:
        accelerators["cpu_execution_accelerator"] = cpu
    return {"name": "m", "optimization": {"execution_accelerators": accelerators}}


def _providers(
    config: dict[str, Any], kind: str = "KIND_GPU", params: dict[str, str] | None = None, available: Any = ALL
) -> list[tuple[str, dict[str, str]]]:
    return execution_providers(available, "1.0", "m_0", kind, 1, config, params or {})


def test_tensorrt_goes_first_with_its_parameters_as_the_providers_options() -> None:
    config = _accelerated(
        gpu=[
            {
                "name": "tensorrt",
                "parameters": {
                    "precision_mode": "FP16",
                    "max_workspace_size_bytes": "1073741824",
                    "trt_engine_cache_enable": "true",
                    "trt_engine_cache_path": "/cache",
                    "int8_use_native_calibration_table": "OFF",
                    "trt_builder_optimization_level": "3",
                },
            }
        ]
    )
    assert _providers(config) == [
        (
            TENSORRT,
            {
                "trt_fp16_enable": "1",
                "trt_max_workspace_size": "1073741824",
                "trt_engine_cache_enable": "1",
                "trt_engine_cache_path": "/cache",
                "trt_int8_use_native_calibration_table": "0",
                "trt_builder_optimization_level": "3",
                "device_id": "1",
            },
        ),
        (CUDA, {"device_id": "1"}),
        (CPU, {}),
    ]


@pytest.mark.parametrize(("mode", "option"), [("BF16", "trt_bf16_enable"), ("INT8", "trt_int8_enable")])
def test_precision_modes(mode: str, option: str) -> None:
    config = _accelerated(gpu=[{"name": "tensorrt", "parameters": {"precision_mode": mode}}])
    assert _providers(config)[0] == (TENSORRT, {option: "1", "device_id": "1"})
    fp32 = _accelerated(gpu=[{"name": "tensorrt", "parameters": {"precision_mode": "FP32"}}])
    assert _providers(fp32)[0] == (TENSORRT, {"device_id": "1"})


def test_cuda_options_from_the_accelerator_and_the_older_model_parameters() -> None:
    config = _accelerated(
        gpu=[
            {
                "name": "cuda",
                "parameters": {
                    "cudnn_conv_use_max_workspace": "0",
                    "use_ep_level_unified_stream": "true",
                    "cudnn_conv_algo_search": "DEFAULT",
                },
            }
        ]
    )
    assert _providers(config) == [
        (
            CUDA,
            {
                "cudnn_conv_use_max_workspace": "0",
                "use_ep_level_unified_stream": "1",
                "cudnn_conv_algo_search": "DEFAULT",
                "device_id": "1",
            },
        ),
        (CPU, {}),
    ]
    # The older parameters win over the accelerator's, as in Triton.
    params = {
        "cudnn_conv_algo_search": "1",
        "gpu_mem_limit": "4294967200",
        "arena_extend_strategy": "1",
        "do_copy_in_default_stream": "0",
    }
    assert _providers(config, params=params)[0][1] == {
        "cudnn_conv_use_max_workspace": "0",
        "use_ep_level_unified_stream": "1",
        "cudnn_conv_algo_search": "HEURISTIC",
        "gpu_mem_limit": "4294967200",
        "arena_extend_strategy": "kSameAsRequested",
        "do_copy_in_default_stream": "0",
        "device_id": "1",
    }


def test_a_cpu_instance_ignores_the_gpu_accelerators_and_takes_openvino() -> None:
    config = _accelerated(gpu=[{"name": "no-such-thing"}], cpu=[{"name": "openvino"}])
    assert _providers(config, kind="KIND_CPU") == [(OPENVINO, {"device_type": "CPU"}), (CPU, {})]
    # A GPU instance takes both: TensorRT and CUDA first, OpenVINO before the CPU.
    both = _accelerated(gpu=[{"name": "tensorrt"}], cpu=[{"name": "openvino"}])
    assert [name for name, _ in _providers(both)] == [TENSORRT, CUDA, OPENVINO, CPU]


@pytest.mark.parametrize(
    ("config", "params", "message"),
    [
        (
            _accelerated(gpu=[{"name": "tensorrt"}, {"name": "rocm"}]),
            {},
            "unknown Execution Accelerator 'rocm' is requested",
        ),
        (_accelerated(cpu=[{"name": "dnnl"}]), {}, "unknown Execution Accelerator 'dnnl' is requested"),
        (
            _accelerated(gpu=[{"name": "tensorrt", "parameters": {"trt_fast_mode": "1"}}]),
            {},
            "unknown parameter 'trt_fast_mode' is provided for TensorRT Execution Accelerator",
        ),
        (
            _accelerated(gpu=[{"name": "tensorrt", "parameters": {"precision_mode": "FP8"}}]),
            {},
            "unsupported precision mode 'FP8' is requested",
        ),
        (
            _accelerated(gpu=[{"name": "tensorrt", "parameters": {"trt_dla_enable": "maybe"}}]),
            {},
            "TensorRT Execution Accelerator parameter 'trt_dla_enable': failed to convert 'maybe' to boolean",
        ),
        (
            _accelerated(gpu=[{"name": "tensorrt", "parameters": {"trt_dla_core": "first"}}]),
            {},
            "TensorRT Execution Accelerator parameter 'trt_dla_core': "
            "failed to convert 'first' to integral number",
        ),
        (
            _accelerated(gpu=[{"name": "tensorrt", "parameters": {"max_workspace_size_bytes": "-1"}}]),
            {},
            "TensorRT Execution Accelerator parameter 'max_workspace_size_bytes' "
            "must not be negative, got '-1'",
        ),
        (
            _accelerated(gpu=[{"name": "cuda", "parameters": {"do_copy_in_default_stream": "2"}}]),
            {},
            "CUDA Execution Accelerator parameter 'do_copy_in_default_stream': "
            "failed to convert '2' to boolean",
        ),
        (
            {"name": "m"},
            {"cudnn_conv_algo_search": "3"},
            "unsupported cudnn_conv_algo_search value '3' is requested",
        ),
        (
            {"name": "m"},
            {"arena_extend_strategy": "2"},
            "unsupported arena_extend_strategy value '2' is requested",
        ),
        (
            {"name": "m"},
            {"arena_extend_strategy": "x"},
            "model parameter 'arena_extend_strategy' must be an integer",
        ),
    ],
)
def test_what_triton_refuses_fails_the_load_in_its_words(
    config: dict[str, Any], params: dict[str, str], message: str
) -> None:
    with pytest.raises(TritonError) as err:
        _providers(config, params=params)
    assert err.value.code is ErrorCode.INVALID_ARG
    assert err.value.message.startswith(message)


def test_a_missing_provider_is_unavailable_with_what_to_install() -> None:
    with pytest.raises(TritonError) as err:
        _providers(_accelerated(gpu=[{"name": "tensorrt"}]), available=(CUDA, CPU))
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert err.value.message == (
        "instance 'm_0' asks for the TensorRT execution accelerator but onnxruntime 1.0 here has no "
        "TensorrtExecutionProvider (its providers: CUDAExecutionProvider, CPUExecutionProvider): "
        "install onnxruntime-gpu and TensorRT's libraries (pip install tensorrt-cu12)"
    )


# -- with this host's onnxruntime -----------------------------------------------------------------


def _upper(path: Path, config: dict[str, Any]) -> Path:
    """A graph with one custom operator: onnxruntime-extensions' StringUpper."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("StringUpper", ["TEXT"], ["UPPER"], domain="ai.onnx.contrib")
    graph = helper.make_graph(
        [node], "g", [vi("TEXT", TensorProto.STRING, [-1])], [vi("UPPER", TensorProto.STRING, [-1])]
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.contrib", 1)]
    )
    model.ir_version = 8
    (path / "1").mkdir(parents=True)
    onnx.save(model, path / "1" / "model.onnx")
    return path


def test_custom_operators_from_model_operations_libraries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Importing onnxruntime_extensions sets PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
    # in os.environ; monkeypatch puts back what was there, so the servers later tests
    # start do not inherit it.
    monkeypatch.delenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", raising=False)
    extensions = pytest.importorskip("onnxruntime_extensions")
    config = {"name": "m", "model_operations": {"op_library_filename": [extensions.get_library_path()]}}
    # Auto-complete reads the graph, which needs the library too.
    with BackendHarness(backend, _upper(tmp_path / "m", config), config=config) as h:
        assert [(i["name"], i["data_type"]) for i in h.model.config["input"]] == [("TEXT", "TYPE_STRING")]
        out = h.infer({"TEXT": np.array([b"tritonpy", b"Onnx"], dtype=object)})
        assert out["UPPER"].tolist() == [b"TRITONPY", b"ONNX"]


def test_custom_operators_without_or_with_a_missing_library_fail_the_load(tmp_path: Path) -> None:
    path = _upper(tmp_path / "m", {})
    with pytest.raises(TritonError, match="ai.onnx.contrib:StringUpper"):
        BackendHarness(backend, path, config={"name": "m"}).start()
    missing = {"name": "m", "model_operations": {"op_library_filename": [str(tmp_path / "libnothing.so")]}}
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, path, config=missing).start()
    assert err.value.code is ErrorCode.INVALID_ARG
    assert err.value.message.startswith(
        f"unable to load model 'm': onnxruntime failed to register the custom operator library "
        f"'{tmp_path / 'libnothing.so'}': "
    )


@pytest.mark.skipif(OPENVINO in ort.get_available_providers(), reason="this onnxruntime has OpenVINO")
def test_openvino_without_its_onnxruntime_is_unavailable(tmp_path: Path) -> None:
    config = _accelerated(cpu=[{"name": "openvino"}])
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, add(tmp_path / "m"), config=config).start()
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert err.value.message.startswith(
        f"instance 'm_0' asks for the OpenVINO execution accelerator but onnxruntime {ort.__version__} "
        "here has no OpenVINOExecutionProvider"
    )
    assert err.value.message.endswith("install onnxruntime-openvino in place of onnxruntime")


def test_an_unknown_cpu_accelerator_fails_the_load_before_any_instance(tmp_path: Path) -> None:
    with pytest.raises(TritonError, match="unknown Execution Accelerator 'dnnl' is requested"):
        BackendHarness(backend, add(tmp_path / "m"), config=_accelerated(cpu=[{"name": "dnnl"}])).start()


def test_cpu_instances_serve_a_config_written_for_tensorrt(tmp_path: Path) -> None:
    config = _accelerated(gpu=[{"name": "tensorrt", "parameters": {"precision_mode": "FP16"}}])
    with BackendHarness(backend, add(tmp_path / "m"), config=config) as h:
        assert h.instance.state.session.get_providers() == [CPU]
        out = h.infer({"A": np.ones((1, 3), np.float32), "B": np.ones((1, 3), np.float32)})
        np.testing.assert_array_equal(out["SUM"], np.full((1, 3), 2, np.float32))


# -- on a GPU host with onnxruntime-gpu ------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_accelerator_options_reach_the_session(tmp_path: Path) -> None:
    if CUDA not in ort.get_available_providers():
        pytest.skip("no CUDAExecutionProvider in this onnxruntime build")
    config = _accelerated(gpu=[{"name": "cuda", "parameters": {"cudnn_conv_algo_search": "HEURISTIC"}}])
    params = {"parameters": {"arena_extend_strategy": {"string_value": "1"}}}
    with BackendHarness(
        backend, add(tmp_path / "m"), config={**config, **params}, instance_kind="KIND_GPU"
    ) as h:
        options = h.instance.state.session.get_provider_options()[CUDA]
        assert options["cudnn_conv_algo_search"] == "HEURISTIC"
        assert options["arena_extend_strategy"] == "kSameAsRequested"
        out = h.infer({"A": np.ones((1, 3), np.float32), "B": np.ones((1, 3), np.float32)})
        np.testing.assert_array_equal(out["SUM"], np.full((1, 3), 2, np.float32))


@pytest.mark.gpu
def test_tensorrt_accelerator_runs_the_graph(tmp_path: Path) -> None:
    if TENSORRT not in ort.get_available_providers():
        pytest.skip("no TensorrtExecutionProvider in this onnxruntime build")
    config = _accelerated(gpu=[{"name": "tensorrt", "parameters": {"precision_mode": "FP16"}}])
    with BackendHarness(backend, add(tmp_path / "m"), config=config, instance_kind="KIND_GPU") as h:
        session = h.instance.state.session
        assert session.get_providers()[0] == TENSORRT
        assert session.get_provider_options()[TENSORRT]["trt_fp16_enable"] == "1"
        out = h.infer({"A": np.ones((3, 3), np.float32), "B": np.ones((3, 3), np.float32)})
        np.testing.assert_array_equal(out["SUM"], np.full((3, 3), 2, np.float32))
