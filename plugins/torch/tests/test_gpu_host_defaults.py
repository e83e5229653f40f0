"""On a GPU host where torch sees no CUDA device (a CPU build here): a model without
``instance_group`` runs on the CPU, and says why; an explicit KIND_GPU group is a load error
saying what torch lacks. The host's GPU count is driven (this host has none)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonpy
import tritonpy.devices
from torch_testmodels import MLP, config, io, save_script

pytestmark = [
    pytest.mark.skipif(torch.cuda.is_available(), reason="this torch sees a GPU"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]

MLP_CONFIG = config([io("INPUT__0", "TYPE_FP32", [16])], [io("OUTPUT__0", "TYPE_FP32", [4])], 8)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core sees one GPU, as on a GPU host."""
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)


def test_a_model_without_instance_group_runs_on_the_cpu(
    tmp_path: Path, one_gpu: None, caplog: pytest.LogCaptureFixture
) -> None:
    scripted = save_script(MLP(), tmp_path / "mlp", MLP_CONFIG)
    x = np.random.default_rng(0).normal(size=(2, 16)).astype(np.float32)
    with (
        caplog.at_level(logging.INFO, logger="tritonpy.config"),
        tritonpy.Server(model_repository=tmp_path) as server,
    ):
        groups = server.model_config("mlp")["instance_group"]
        assert [(g["name"], g["kind"], g["gpus"]) for g in groups] == [("mlp", "KIND_CPU", [])]
        out = server.model("mlp").predict({"INPUT__0": x})
    np.testing.assert_allclose(out["OUTPUT__0"], scripted(torch.from_numpy(x)).detach().numpy(), rtol=1e-5)
    assert (
        f"model 'mlp': instance group 'mlp' defaults to KIND_CPU: this torch ({torch.__version__}) "
        "sees no CUDA device"
    ) in caplog.text


def test_an_explicit_kind_gpu_group_fails_to_load_saying_why(tmp_path: Path, one_gpu: None) -> None:
    save_script(MLP(), tmp_path / "mlp", MLP_CONFIG + "instance_group [ { kind: KIND_GPU } ]\n")
    with tritonpy.Server(model_repository=tmp_path, exit_on_error=False) as server:
        (entry,) = server.repository_index()
    assert entry["state"] == "UNAVAILABLE"
    assert "has kind KIND_GPU but backend 'pytorch' cannot use a GPU here: this torch" in entry["reason"]
