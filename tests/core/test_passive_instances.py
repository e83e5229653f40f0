"""Passive instance groups (``instance_group { passive: true }``): their instances are
initialized and finalized, as in Triton, but never warmed up nor handed requests."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    BackendInfo,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)


class Recorder:
    """Echoes INPUT0; records which instances were initialized, executed and finalized."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.initialized: dict[str, bool] = {}
        self.executed: list[str] = []
        self.finalized: list[str] = []

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_instance_kind="KIND_CPU")

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        with self.lock:
            self.initialized[instance.name] = instance.passive

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        with self.lock:
            self.executed.extend(instance.name for _ in requests)
        return [
            InferenceResponse({"OUTPUT0": Tensor.from_numpy("OUTPUT0", r.inputs["INPUT0"].data)})
            for r in requests
        ]

    @hookimpl
    def instance_finalize(self, instance: ModelInstance) -> None:
        with self.lock:
            self.finalized.append(instance.name)


IO = """backend: "recorder"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
model_warmup [ { name: "w" batch_size: 1 inputs {
  key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } } ]
"""


def _repo(root: Path, groups: str) -> Path:
    (root / "m" / "1").mkdir(parents=True)
    (root / "m" / "config.pbtxt").write_text(IO + groups)
    return root


def _server(repo: Path, backend: Recorder) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("recorder", backend)
    return server


def test_passive_instances_load_but_take_no_requests(tmp_path: Path) -> None:
    groups = (
        'instance_group [ { name: "busy" count: 2 kind: KIND_CPU }, '
        '{ name: "standby" count: 1 kind: KIND_CPU passive: true } ]\n'
    )
    backend = Recorder()
    with _server(_repo(tmp_path, groups), backend) as server:
        assert backend.initialized == {"busy_0": False, "busy_1": False, "standby_0": True}
        warmed = set(backend.executed)
        assert warmed == {"busy_0", "busy_1"}  # the warmup sample ran on each active instance only
        model = server.model("m")
        x = np.array([3, 4], np.int32)
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda _: model.predict({"INPUT0": x})["OUTPUT0"].tolist(), range(64)))
        assert outs == [[3, 4]] * 64
        assert "standby_0" not in backend.executed
        assert set(backend.executed) <= {"busy_0", "busy_1"}
        assert server.model("m").config()["instance_group"][1]["passive"] is True
    assert sorted(backend.finalized) == ["busy_0", "busy_1", "standby_0"]


def test_a_model_whose_instances_are_all_passive_refuses_requests(tmp_path: Path) -> None:
    groups = "instance_group [ { count: 2 kind: KIND_CPU passive: true } ]\n"
    backend = Recorder()
    with _server(_repo(tmp_path, groups), backend) as server:
        assert backend.initialized == {"m_0_0": True, "m_0_1": True}
        assert server.model("m").ready()
        with pytest.raises(TritonError) as err:
            server.model("m").predict({"INPUT0": np.array([1, 2], np.int32)})
        assert err.value.code is ErrorCode.UNAVAILABLE
        assert err.value.message == "model 'm' takes no requests: every instance group of it is passive"
        assert backend.executed == []  # nor warmed up
    assert sorted(backend.finalized) == ["m_0_0", "m_0_1"]
