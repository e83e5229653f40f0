"""On a GPU host with onnxruntime's CPU build (no CUDAExecutionProvider): a model without
``instance_group`` runs on the CPU, and says why; an explicit KIND_GPU group is a load error
naming the package to install. The host's GPU count is driven (this host has none)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonpy
import tritonpy.devices
from onnx_testmodels import add

pytestmark = pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="this onnxruntime has CUDA"
)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core sees one GPU, as on a GPU host."""
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)


def test_a_model_without_instance_group_runs_on_the_cpu(
    tmp_path: Path, one_gpu: None, caplog: pytest.LogCaptureFixture
) -> None:
    add(tmp_path / "m")  # no config.pbtxt: auto-complete, then Triton's defaults
    with (
        caplog.at_level(logging.INFO, logger="tritonpy.config"),
        tritonpy.Server(model_repository=tmp_path) as server,
    ):
        groups = server.model_config("m")["instance_group"]
        assert [(g["name"], g["kind"], g["gpus"]) for g in groups] == [("m", "KIND_CPU", [])]
        out = server.model("m").predict({"A": np.ones((1, 3), np.float32), "B": np.ones((1, 3), np.float32)})
    np.testing.assert_array_equal(out["SUM"], np.full((1, 3), 2, np.float32))
    (line,) = [m for m in caplog.messages if m.startswith("model 'm': instance group")]
    assert line.startswith(
        f"model 'm': instance group 'm' defaults to KIND_CPU: onnxruntime {ort.__version__} "
    )
    assert "has no CUDAExecutionProvider" in line and "install onnxruntime-gpu" in line


def test_an_explicit_kind_gpu_group_fails_to_load_naming_the_package(tmp_path: Path, one_gpu: None) -> None:
    add(tmp_path / "m", 'backend: "onnxruntime"\ninstance_group [ { kind: KIND_GPU } ]\n')
    with tritonpy.Server(model_repository=tmp_path, exit_on_error=False) as server:
        (entry,) = server.repository_index()
    assert entry["state"] == "UNAVAILABLE"
    assert (
        "instance group m_0 of model m has kind KIND_GPU but backend 'onnxruntime' cannot use a GPU here"
        in (entry["reason"])
    )
    assert "install onnxruntime-gpu" in entry["reason"]
