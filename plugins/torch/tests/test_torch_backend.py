"""The torch backend without a server (tritonpy_sdk.testing), against the scripted models called directly."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy_backend_torch as backend
from torch_testmodels import (
    MLP,
    AddSub,
    DictIn,
    DictOut,
    Embed,
    RaggedSums,
    Raises,
    Scale,
    Words,
    save_script,
)
from tritonpy_backend_torch._params import Options
from tritonpy_backend_torch._types import to_torch
from tritonpy_sdk import ErrorCode, ModelInstance, RequestedOutput, TritonError
from tritonpy_sdk.host import call_hook, validate_backend
from tritonpy_sdk.testing import BackendHarness

# torch 2.13 deprecates TorchScript (script and load); Triton's format is served all the same.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]


def _io(name: str, data_type: str, dims: list[int]) -> dict[str, Any]:
    return {"name": name, "data_type": data_type, "dims": dims}


def _cfg(
    name: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], max_batch: int = 0, **extra: Any
):  # type: ignore[no-untyped-def]
    return {"name": name, "max_batch_size": max_batch, "input": inputs, "output": outputs, **extra}


def _params(**values: str) -> dict[str, Any]:
    return {"parameters": {k: {"string_value": v} for k, v in values.items()}}


MLP_CFG = _cfg("mlp", [_io("INPUT__0", "TYPE_FP32", [16])], [_io("OUTPUT__0", "TYPE_FP32", [4])], 8)


def test_backend_info_and_hooks() -> None:
    hooks = validate_backend("pytorch", backend)
    assert set(hooks.info.platforms) >= {"pytorch_libtorch", "torch_aoti"}
    assert hooks.info.default_model_filename == "model.pt"


def test_batched_mlp_matches_the_scripted_model(tmp_path: Path) -> None:
    scripted = save_script(MLP(), tmp_path / "mlp")
    rng = np.random.default_rng(0)
    with BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG) as h:
        feeds = [rng.normal(size=(n, 16)).astype(np.float32) for n in (1, 3, 2)]
        responses = h.execute([h.request({"INPUT__0": x}) for x in feeds])  # one forward for the three
        for x, response in zip(feeds, responses):
            expected = scripted(torch.from_numpy(x)).detach().numpy()
            np.testing.assert_allclose(response.outputs["OUTPUT__0"].data, expected, rtol=1e-5, atol=1e-6)


def test_named_index_binds_inputs_and_outputs_by_index(tmp_path: Path) -> None:
    save_script(AddSub(), tmp_path / "m")
    # The config lists them out of order: the index after "__" is what counts.
    cfg = _cfg(
        "m",
        [_io("B__1", "TYPE_FP32", [2]), _io("A__0", "TYPE_FP32", [2])],
        [_io("DIFF__1", "TYPE_FP32", [2]), _io("SUM__0", "TYPE_FP32", [2])],
        4,
    )
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        a, b = np.array([[5, 7]], np.float32), np.array([[1, 2]], np.float32)
        out = h.infer({"A__0": a, "B__1": b})
        assert out["SUM__0"].tolist() == [[6, 9]] and out["DIFF__1"].tolist() == [[4, 5]]
        req = h.request({"A__0": a, "B__1": b})
        req.requested_outputs = [RequestedOutput("DIFF__1")]
        (resp,) = h.execute([req])
        assert list(resp.outputs) == ["DIFF__1"]  # the other output is never read back


def test_inputs_named_after_forward_arguments(tmp_path: Path) -> None:
    save_script(Scale(), tmp_path / "m")
    cfg = _cfg(
        "m", [_io("scale", "TYPE_FP32", [1]), _io("image", "TYPE_FP32", [3])], [_io("y", "TYPE_FP32", [3])]
    )
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        out = h.infer({"image": np.array([1, 2, 3], np.float32), "scale": np.array([2], np.float32)})
        assert out["y"].tolist() == [2, 4, 6]


def test_strict_config_ordering_when_names_follow_no_convention(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_script(AddSub(), tmp_path / "m")
    cfg = _cfg("m", [_io("x", "TYPE_FP32", [1]), _io("y", "TYPE_FP32", [1])], [_io("s", "TYPE_FP32", [1])])
    with caplog.at_level(logging.WARNING), BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        assert h.infer({"x": np.array([3], np.float32), "y": np.array([1], np.float32)})["s"].tolist() == [4]
    assert "Falling back to enforcing strict ordering from model configuration" in caplog.text


def test_int64_embedding(tmp_path: Path) -> None:
    scripted = save_script(Embed(), tmp_path / "m")
    cfg = _cfg("m", [_io("ids__0", "TYPE_INT64", [5])], [_io("vectors__0", "TYPE_FP32", [5, 8])], 4)
    ids = np.array([[1, 5, 99, 0, 7], [3, 3, 3, 3, 3]], np.int64)
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        out = h.infer({"ids__0": ids})["vectors__0"]
    np.testing.assert_array_equal(out, scripted(torch.from_numpy(ids)).detach().numpy())


def test_strings_in_and_out_as_lists_of_str(tmp_path: Path) -> None:
    scripted = save_script(Words(), tmp_path / "m")
    cfg = _cfg(
        "m",
        [_io("WORDS__0", "TYPE_STRING", [-1])],
        [_io("UPPER__0", "TYPE_STRING", [-1]), _io("LENGTHS__1", "TYPE_INT64", [-1])],
    )
    words = ["tritonpy", "héllo", ""]
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        out = h.infer({"WORDS__0": np.array([w.encode() for w in words], dtype=object)})
    upper, lengths = scripted(words)
    assert out["UPPER__0"].tolist() == [w.encode() for w in upper]
    assert out["LENGTHS__1"].tolist() == lengths.tolist()


def test_dict_input_and_dict_output(tmp_path: Path) -> None:
    save_script(DictIn(), tmp_path / "din")
    cfg = _cfg("din", [_io("a", "TYPE_FP32", [2]), _io("b", "TYPE_FP32", [2])], [_io("y", "TYPE_FP32", [2])])
    with BackendHarness(backend, tmp_path / "din", config=cfg) as h:
        assert h.infer({"a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32)})[
            "y"
        ].tolist() == [3, 8]
    save_script(DictOut(), tmp_path / "dout")
    cfg = _cfg(
        "dout",
        [_io("x", "TYPE_FP32", [2])],
        [_io("square", "TYPE_FP32", [2]), _io("double", "TYPE_FP32", [2])],
    )
    with BackendHarness(backend, tmp_path / "dout", config=cfg) as h:
        out = h.infer({"x": np.array([1, 3], np.float32)})
        assert out["square"].tolist() == [1, 9] and out["double"].tolist() == [2, 6]


def test_ragged_input_and_batch_input(tmp_path: Path) -> None:
    save_script(RaggedSums(), tmp_path / "m")
    cfg = _cfg(
        "m",
        [{**_io("x__0", "TYPE_FP32", [-1]), "allow_ragged_batch": True}],
        [_io("y__0", "TYPE_FP32", [1])],
        4,
        batch_input=[
            {
                "kind": "BATCH_ELEMENT_COUNT",
                "target_name": ["counts__1"],
                "data_type": "TYPE_INT32",  # Triton allows only INT32 or FP32 batch inputs
                "source_input": ["x__0"],
            }
        ],
    )
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        requests = [h.request({"x__0": np.ones((1, n), np.float32)}) for n in (2, 5)]
        responses = h.execute(requests)  # the two ragged rows run as one flat input
    assert [r.outputs["y__0"].data.tolist() for r in responses] == [[[2.0]], [[5.0]]]


class _Double(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_batch_output_scattered_by_each_requests_input_shape(tmp_path: Path) -> None:
    """A ragged batch's flat result comes back to each request in its input's shape
    (Triton's BATCH_SCATTER_WITH_INPUT_SHAPE)."""
    save_script(_Double(), tmp_path / "m")
    cfg = _cfg(
        "m",
        [{**_io("x__0", "TYPE_FP32", [-1]), "allow_ragged_batch": True}],
        [_io("y__0", "TYPE_FP32", [-1])],
        4,
        batch_output=[
            {"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["y__0"], "source_input": ["x__0"]}
        ],
    )
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        feeds = [np.arange(n, dtype=np.float32).reshape(1, n) + n for n in (2, 5, 1)]
        responses = h.execute([h.request({"x__0": x}) for x in feeds])
        for x, response in zip(feeds, responses):
            assert response.outputs["y__0"].data.shape == x.shape
            np.testing.assert_array_equal(response.outputs["y__0"].data, x * 2)


def test_zero_copy_in_and_out() -> None:
    # Read-only request memory (a request body) reaches torch without a copy and without a warning.
    body = np.arange(12, dtype=np.float32).tobytes()
    array = np.frombuffer(body, dtype=np.float32).reshape(3, 4)
    tensor = to_torch(torch, array)
    assert tensor.data_ptr() == array.ctypes.data


def test_outputs_are_views_of_the_result_tensors(tmp_path: Path) -> None:
    save_script(MLP(), tmp_path / "mlp")
    with BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG) as h:
        requests = [h.request({"INPUT__0": np.ones((n, 16), np.float32)}) for n in (2, 3)]
        first, second = (r.outputs["OUTPUT__0"].data for r in h.execute(requests))
    assert not first.flags.owndata and np.shares_memory(first.base, second.base)  # one result, two views


def test_a_forward_that_raises_fails_its_requests_with_tritons_text(tmp_path: Path) -> None:
    save_script(Raises(), tmp_path / "m")
    cfg = _cfg("m", [_io("x", "TYPE_FP32", [2])], [_io("y", "TYPE_FP32", [2])])
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        assert h.infer({"x": -np.ones(2, np.float32)})["y"].tolist() == [1, 1]
        with pytest.raises(TritonError) as err:
            h.infer({"x": np.ones(2, np.float32)})
        assert err.value.code is ErrorCode.INTERNAL
        assert err.value.message.startswith("PyTorch execute failure: ")
        assert "only non-positive inputs, please" in err.value.message
        assert h.infer({"x": -np.ones(2, np.float32)})["y"].tolist() == [1, 1]  # and it goes on


@pytest.mark.parametrize(
    ("outputs", "message", "code"),
    [
        (
            [_io("y__0", "TYPE_INT32", [2])],
            "configuration expects datatype TYPE_INT32 for output 'y__0', model provides TYPE_FP32",
            ErrorCode.INVALID_ARG,
        ),
        (
            [_io("y__3", "TYPE_FP32", [2])],
            "The output y__3 in the model configuration refers to an output index which doesn't exist. "
            "This model has 1 outputs",
            ErrorCode.INVALID_ARG,
        ),
    ],
)
def test_outputs_that_do_not_match_the_config(
    tmp_path: Path, outputs: list[dict[str, Any]], message: str, code: ErrorCode
) -> None:
    save_script(MLP(4, 4, 2), tmp_path / "m")
    cfg = _cfg("m", [_io("x__0", "TYPE_FP32", [4])], outputs, 2)
    with BackendHarness(backend, tmp_path / "m", config=cfg) as h:
        with pytest.raises(TritonError) as err:
            h.infer({"x__0": np.ones((1, 4), np.float32)})
    assert err.value.message == message and err.value.code is code


@pytest.mark.parametrize(
    ("cfg", "message", "code"),
    [
        (
            _cfg("m", [_io("x", "TYPE_FP32", [4]), _io("z", "TYPE_FP32", [4])], [_io("y", "TYPE_FP32", [2])]),
            "unable to load model 'm', configuration expects 2 inputs, model provides 1",
            ErrorCode.INVALID_ARG,
        ),
        (
            _cfg("m", [_io("x", "TYPE_UINT32", [4])], [_io("y", "TYPE_FP32", [2])]),
            "unsupported datatype TYPE_UINT32 for input 'x' for model 'm'",
            ErrorCode.INTERNAL,
        ),
        (
            _cfg("m", [_io("x", "TYPE_STRING", [4])], [_io("y", "TYPE_FP32", [2])], 2),
            "Triton only supports 1 dimensional List of String as input for 'x' for model 'm'",
            ErrorCode.INTERNAL,
        ),
        (
            _cfg("m", [_io("x__5", "TYPE_FP32", [4])], [_io("y", "TYPE_FP32", [2])]),
            "unable to load model 'm': input 'x__5' refers to argument 5 of forward(), which takes 1: x",
            ErrorCode.INVALID_ARG,
        ),
        (
            _cfg(
                "m",
                [_io("x", "TYPE_FP32", [4])],
                [_io("y", "TYPE_FP32", [2])],
                **_params(INFERENCE_MODE="maybe"),
            ),
            "failed to convert 'maybe' to boolean (model parameter 'INFERENCE_MODE')",
            ErrorCode.INVALID_ARG,
        ),
        (
            _cfg(
                "m",
                [_io("x", "TYPE_FP32", [4])],
                [_io("y", "TYPE_FP32", [2])],
                **_params(INTRA_OP_THREAD_COUNT="a"),
            ),
            "failed to convert 'a' to integral number (model parameter 'INTRA_OP_THREAD_COUNT')",
            ErrorCode.INVALID_ARG,
        ),
    ],
)
def test_configs_that_do_not_fit_fail_the_load(
    tmp_path: Path, cfg: dict[str, Any], message: str, code: ErrorCode
) -> None:
    save_script(MLP(4, 4, 2), tmp_path / "m")
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "m", config=cfg).start()
    assert err.value.message == message and err.value.code is code


def test_missing_and_non_torchscript_files(tmp_path: Path) -> None:
    cfg = _cfg("m", [_io("x", "TYPE_FP32", [4])], [_io("y", "TYPE_FP32", [2])])
    (tmp_path / "m").mkdir()
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "m", config=cfg).start()
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert re.fullmatch(r"unable to find '.*/m/1/model\.pt' for model instance 'm'", err.value.message)
    (tmp_path / "m" / "1").mkdir()
    (tmp_path / "m" / "1" / "model.pt").write_bytes(b"not a TorchScript archive")
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "m", config=cfg).start()
    assert err.value.code is ErrorCode.INTERNAL and err.value.message.startswith("failed to load model 'm': ")
    torch.save(MLP(4, 4, 2).state_dict(), tmp_path / "m" / "1" / "model.pt")  # a state dict is not a model
    with pytest.raises(TritonError, match="failed to load model 'm': "):
        BackendHarness(backend, tmp_path / "m", config=cfg).start()


def test_parameters_with_tritons_names_and_defaults() -> None:
    assert Options.parse({}) == Options(
        inference_mode=True,
        optimized_execution=True,
        cudnn=True,
        weight_sharing=False,
        cache_cleaning=False,
        jit_executor=None,
        jit_profiling=None,
        tensor_fuser=None,
        intra_op_threads=0,
        inter_op_threads=0,
    )
    parsed = Options.parse(
        {
            "INFERENCE_MODE": "false",
            "DISABLE_OPTIMIZED_EXECUTION": "ON",
            "DISABLE_CUDNN": "1",
            "ENABLE_WEIGHT_SHARING": "true",
            "ENABLE_CACHE_CLEANING": "True",
            "ENABLE_JIT_EXECUTOR": "off",
            "ENABLE_JIT_PROFILING": "0",
            "ENABLE_TENSOR_FUSER": "false",
            "INTRA_OP_THREAD_COUNT": "2",
            "INTER_OP_THREAD_COUNT": "1",
        }
    )
    assert parsed == Options(False, False, False, True, True, False, False, False, 2, 1)


def test_unknown_parameters_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    save_script(MLP(), tmp_path / "mlp")
    cfg = {**MLP_CFG, **_params(INFERENCE_MODES="true", NUM_THREADS="2")}
    with caplog.at_level(logging.WARNING), BackendHarness(backend, tmp_path / "mlp", config=cfg):
        pass
    assert "unknown parameter 'INFERENCE_MODES' is ignored by the PyTorch backend" in caplog.text
    assert "parameter 'NUM_THREADS' belongs to Triton's Python-based PyTorch runtime" in caplog.text


def test_execution_switches_reach_torch(tmp_path: Path) -> None:
    save_script(MLP(), tmp_path / "mlp")
    cfg = {**MLP_CFG, **_params(DISABLE_OPTIMIZED_EXECUTION="true", INFERENCE_MODE="false")}
    before = torch._C._get_graph_executor_optimize()
    try:
        with BackendHarness(backend, tmp_path / "mlp", config=cfg) as h:
            h.infer({"INPUT__0": np.ones((1, 16), np.float32)})
            assert torch._C._get_graph_executor_optimize() is False
    finally:
        torch._C._set_graph_executor_optimize(before)


def test_weight_sharing_loads_once_per_device(tmp_path: Path) -> None:
    save_script(MLP(), tmp_path / "mlp")
    cfg = {**MLP_CFG, **_params(ENABLE_WEIGHT_SHARING="true")}
    with BackendHarness(backend, tmp_path / "mlp", config=cfg) as h:
        other = ModelInstance("mlp_0_1", "KIND_CPU", 0, h.model)
        call_hook(h.hooks, "instance_initialize", instance=other)
        assert other.state.program.module is h.instance.state.program.module
        assert list(h.model.state.shared) == ["cpu"]
        call_hook(h.hooks, "instance_finalize", instance=other)


def test_kind_model_runs_where_the_model_was_saved(tmp_path: Path) -> None:
    scripted = save_script(MLP(), tmp_path / "mlp")
    with BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG, instance_kind="KIND_MODEL") as h:
        x = np.ones((2, 16), np.float32)
        out = h.infer({"INPUT__0": x})["OUTPUT__0"]
        assert str(h.instance.state.program.device) == "cpu"
    np.testing.assert_allclose(out, scripted(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_kind_gpu_without_cuda_is_a_clear_error(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU")
    save_script(MLP(), tmp_path / "mlp")
    with pytest.raises(TritonError, match="is KIND_GPU but this torch .* sees no CUDA device"):
        BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG, instance_kind="KIND_GPU").start()


@pytest.mark.gpu
def test_kind_gpu_through_the_pinned_pool(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    from tritonpy.memory import PinnedPool

    pool = PinnedPool.create()
    scripted = save_script(MLP(), tmp_path / "mlp")
    with BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG, instance_kind="KIND_GPU") as h:
        h.instance.host_allocator = pool.allocate if pool is not None else None
        assert h.instance.state.program.device == torch.device("cuda", 0)
        feeds = [np.random.default_rng(n).normal(size=(n, 16)).astype(np.float32) for n in (1, 3)]
        responses = h.execute([h.request({"INPUT__0": x}) for x in feeds])
        for x, response in zip(feeds, responses):
            out = response.outputs["OUTPUT__0"]
            assert out.memory_type == "CPU"  # no CUDA shared memory asked for: results come to the host
            np.testing.assert_allclose(
                out.data, scripted(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5
            )


class _Bump(torch.nn.Module):
    """Adds one to its input in place: shows whether the model saw the memory itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.add_(1.0)


def test_an_input_held_as_a_device_array_is_taken_in_place_through_dlpack(tmp_path: Path) -> None:
    import ctypes

    from tritonpy_sdk import KDLCPU, DataType, DeviceArray, Tensor

    save_script(_Bump(), tmp_path / "bump")
    cfg = _cfg("bump", [_io("INPUT__0", "TYPE_FP32", [3])], [_io("OUTPUT__0", "TYPE_FP32", [3])])
    buffer = (ctypes.c_float * 3)(1, 2, 3)
    array = DeviceArray(ctypes.addressof(buffer), (3,), np.float32, owner=buffer, device_type=KDLCPU)
    with BackendHarness(backend, tmp_path / "bump", config=cfg) as h:
        assert h.instance.device_inputs is False  # a CPU instance: the core hands it host memory
        request = h.request({"INPUT__0": np.zeros(3, np.float32)})
        request.inputs["INPUT__0"] = Tensor.on_device("INPUT__0", array, DataType.FP32)
        (response,) = h.execute([request])
    assert response.outputs["OUTPUT__0"].data.tolist() == [2, 3, 4]
    assert list(buffer) == [2, 3, 4]  # torch.from_dlpack read (and here wrote) the memory in place


@pytest.mark.gpu
def test_kind_gpu_takes_cuda_inputs_in_place_and_batches_them_on_the_device(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    from tritonpy.memory import load_runtime
    from tritonpy.memory.manager import MemoryManager
    from tritonpy_sdk import DataType, Tensor

    runtime = load_runtime()
    if runtime is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    manager = MemoryManager(runtime)
    device_memory = manager.device_memory
    assert device_memory is not None
    scripted = save_script(MLP(), tmp_path / "mlp")
    with BackendHarness(backend, tmp_path / "mlp", config=MLP_CFG, instance_kind="KIND_GPU") as h:
        assert h.instance.device_inputs
        h.instance.device_memory = device_memory
        feeds = [np.random.default_rng(n).normal(size=(n, 16)).astype(np.float32) for n in (1, 3)]
        requests = []
        for x in feeds:
            array = device_memory.allocate(0, x.shape, x.dtype)
            runtime.copy_to_device(0, array.address, x.ctypes.data, x.nbytes)
            request = h.request({"INPUT__0": x})
            request.inputs["INPUT__0"] = Tensor.on_device("INPUT__0", array, DataType.FP32)
            requests.append(request)
        single = h.execute(requests[:1])[0]
        batched = h.execute(requests)
        for x, response in zip(feeds, batched):
            expected = scripted(torch.from_numpy(x)).detach().numpy()
            np.testing.assert_allclose(response.outputs["OUTPUT__0"].data, expected, rtol=1e-4, atol=1e-5)
        # Not bit-equal: on a GPU the kernels differ by batch size (~4e-8 apart on an H200).
        np.testing.assert_allclose(
            single.outputs["OUTPUT__0"].data, batched[0].outputs["OUTPUT__0"].data, rtol=1e-5, atol=1e-6
        )
    manager.close()
