"""Without TensorRT (this host, CI) or without a GPU: a ``model.plan`` model is UNAVAILABLE
saying what to install, and the rest of the repository serves."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np
import pytest
import tritonpy
import tritonpy.devices
import tritonpy_backend_tensorrt as backend
from tritonpy_backend_tensorrt._runtime import TensorRT
from tritonpy_sdk import Backend, TritonError
from tritonpy_sdk.testing import BackendHarness

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorrt") is not None, reason="tensorrt is installed here"
)


def _plan_model(root: Path, name: str = "plan", config: str | None = None) -> Path:
    folder = root / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.plan").write_bytes(b"not a plan")
    if config is not None:
        (folder / "config.pbtxt").write_text(config)
    return folder


def _python_model(root: Path) -> None:
    folder = root / "py"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = [pb_utils.get_input_tensor_by_name(r, 'IN').as_numpy() for r in requests]\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor('OUT', o)]) for o in out]\n"
    )
    (folder / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        "instance_group [ { kind: KIND_CPU } ]\n"
    )


def test_the_backend_lists_and_initializes_without_tensorrt(caplog: pytest.LogCaptureFixture) -> None:
    b = Backend("tensorrt", {})
    with caplog.at_level(logging.INFO, logger="tritonpy"):
        backend.initialize(b)
    # under the server's "tritonpy" logger, so the reason is in the server's log
    said = [r for r in caplog.records if r.name == "tritonpy.backend.tensorrt"]
    assert said and "needs the 'tensorrt' package" in said[0].getMessage()
    assert isinstance(b.state, TensorRT) and b.state.trt is None
    support = backend.gpu_support(b)
    assert not support.usable
    assert "pip install 'tritonpy-backend-tensorrt[cu12]'" in support.reason
    info = backend.backend_info()
    assert info.platforms == ("tensorrt_plan",) and info.default_model_filename == "model.plan"


def test_a_plan_model_is_unavailable_naming_the_extra(tmp_path: Path) -> None:
    folder = _plan_model(tmp_path)
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, folder, backend_name="tensorrt", instance_kind="KIND_GPU").start()
    assert err.value.code.name == "UNAVAILABLE"
    assert "the TensorRT backend needs the 'tensorrt' package" in str(err.value)
    assert "tritonpy-backend-tensorrt[cu12]" in str(err.value)


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_rest_of_the_repository_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int
) -> None:
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: gpus)  # a GPU host too: gpu_support says no
    _plan_model(tmp_path, "by_file")  # no config: the backend is inferred from model.plan
    _plan_model(tmp_path, "by_platform", 'platform: "tensorrt_plan"\nmax_batch_size: 4\n')
    _python_model(tmp_path)
    with tritonpy.Server(model_repository=tmp_path, exit_on_error=False) as server:
        index = {e["name"]: e for e in server.repository_index()}
        for name in ("by_file", "by_platform"):
            assert index[name]["state"] == "UNAVAILABLE"
            assert "tritonpy-backend-tensorrt[cu12]" in index[name]["reason"], index[name]["reason"]
        assert index["py"]["state"] == "READY"
        out = server.model("py").predict({"IN": np.array([1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out["OUT"], [1.0, 2.0])
