"""``cc_model_filenames``: a KIND_GPU instance loads the model file its config names for its
GPU's compute capability, else ``default_model_filename``, as Triton's backends choose it.
The host's GPUs are driven (this host may have none): two GPUs of different architectures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
import tritonpy.devices
from tritonpy_sdk import (
    Backend,
    BackendInfo,
    GpuSupport,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    hookimpl,
)


class FileReader:
    """Each instance reads its model file (``instance.model_path``): Y is the number in it."""

    def __init__(self) -> None:
        self.loaded: dict[str, str] = {}

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_GPU")

    @hookimpl
    def gpu_support(self, backend: Backend) -> GpuSupport:
        return GpuSupport(usable=True)

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        self.loaded[instance.name] = instance.model_path.name
        instance.state = int(instance.model_path.read_text())

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        return [
            InferenceResponse({"Y": Tensor.from_numpy("Y", np.full(1, instance.state, np.int32))})
            for _ in requests
        ]


def _model(root: Path, extra: str) -> Path:
    (root / "m" / "1").mkdir(parents=True)
    for name, value in (("model.txt", "1"), ("model_sm86.txt", "86"), ("model_sm90.txt", "90")):
        (root / "m" / "1" / name).write_text(value)
    (root / "m" / "config.pbtxt").write_text(
        'backend: "reader"\n'
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n' + extra
    )
    return root


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 2)
    monkeypatch.setattr(tritonpy.devices, "compute_capability", {0: "8.6", 1: "8.9"}.__getitem__)


def test_each_gpu_instance_loads_the_file_named_for_its_architecture(tmp_path: Path, two_gpus: None) -> None:
    backend = FileReader()
    extra = (
        "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] }, { kind: KIND_CPU } ]\n"
        'cc_model_filenames { key: "8.6" value: "model_sm86.txt" }\n'
        'cc_model_filenames { key: "9.0" value: "model_sm90.txt" }\n'
    )
    server = tritonpy.Server(model_repository=_model(tmp_path, extra))
    server.backends.register("reader", backend)
    with server:
        assert server.model("m").ready()
    # GPU 0 (8.6) gets its file; GPU 1 (8.9: not named) and the CPU instance the default one.
    assert backend.loaded == {"m_0_0": "model_sm86.txt", "m_0_1": "model.txt", "m_1_0": "model.txt"}


def test_without_cc_model_filenames_every_instance_loads_the_default_file(
    tmp_path: Path, two_gpus: None
) -> None:
    backend = FileReader()
    server = tritonpy.Server(model_repository=_model(tmp_path, "instance_group [ { kind: KIND_GPU } ]\n"))
    server.backends.register("reader", backend)
    with server:
        assert server.model("m").predict({"X": np.zeros(1, np.int32)})["Y"].tolist() == [1]
    assert backend.loaded == {"m_0_0": "model.txt", "m_0_1": "model.txt"}
