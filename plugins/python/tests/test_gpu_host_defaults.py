"""On a GPU host a Python model without ``instance_group`` gets KIND_GPU instances, as
Triton's python backend (built with GPU support) prefers: ``model.py`` decides what runs
where, so the backend can always use the GPU. The host's GPU count is driven (this host
may have none)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import tritonpy
import tritonpy.devices

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.where = (args["model_instance_kind"], args["model_instance_device_id"])

    def execute(self, requests):
        kind = np.array([self.where[0].encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("KIND", kind)]) for _ in requests]
"""


def test_a_model_without_instance_group_gets_kind_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)
    folder = tmp_path / "where"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "KIND" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
        'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    )
    with (
        caplog.at_level(logging.INFO, logger="tritonpy.config"),
        tritonpy.Server(model_repository=tmp_path) as server,
    ):
        groups = server.model_config("where")["instance_group"]
        out = server.model("where").predict({"X": np.zeros(1, np.int32)})
    assert [(g["kind"], g["gpus"]) for g in groups] == [("KIND_GPU", [0])]
    assert out["KIND"].tolist() == [b"GPU"]
    assert (
        "instance group 'where' defaults to KIND_GPU: this host has 1 GPU(s) and backend 'python'"
        in caplog.text
    )
