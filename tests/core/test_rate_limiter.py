"""--rate-limit execution_count: instances needing the same resource never execute together."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.scheduler.ratelimiter import Need, RateLimiter, parse_resource_flags
from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)


class Gate:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.entered = threading.Condition()
        self.release = threading.Event()

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_instance_kind="KIND_CPU")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        with self.entered:
            self.started.append(instance.model.name)
            self.entered.notify_all()
        if instance.model.name == "first":
            assert self.release.wait(30)
        return [InferenceResponse({"Y": Tensor.from_numpy("Y", r.inputs["X"].data)}) for r in requests]


def _model(repo: Path, name: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text("""
backend: "gate"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU
  rate_limiter { resources [ { name: "R" global: true count: 1 } ] } } ]
""")


def test_shared_resource_serialises_instances(tmp_path: Path) -> None:
    _model(tmp_path, "first")
    _model(tmp_path, "second")
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        one = threading.Thread(target=lambda: server.model("first").predict(x))
        one.start()
        two = threading.Thread(target=lambda: server.model("second").predict(x))
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            two.start()
            two.join(0.3)
            assert two.is_alive() and backend.started == ["first"]  # waiting for resource R
        finally:
            backend.release.set()
            one.join(30)
            if two.is_alive() or two.ident is not None:
                two.join(30)
        assert backend.started == ["first", "second"]
        (stats,) = server.model_statistics("second")
        assert stats["inference_stats"]["queue"]["ns"] > 0  # the wait counted as queue time


def test_without_rate_limiting_they_overlap(tmp_path: Path) -> None:
    _model(tmp_path, "first")
    _model(tmp_path, "second")
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        one = threading.Thread(target=lambda: server.model("first").predict(x))
        one.start()
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            server.model("second").predict(x)  # completes while "first" is still executing
            assert backend.started == ["first", "second"]
        finally:
            backend.release.set()
            one.join(30)


def test_priority_and_capacity() -> None:
    limiter = RateLimiter(parse_resource_flags(["R:2"]))
    big = Need((("R", 2, True),), 0)
    limiter.register(big)
    with pytest.raises(TritonError, match="has 1 units"):
        RateLimiter(parse_resource_flags(["R:1"])).register(big)
    with pytest.raises(TritonError, match="expects <name>:<count>"):
        parse_resource_flags(["R"])
    with limiter.hold(big):
        pass  # capacity 2 fits a need of 2


def test_resources_belong_to_their_own_group_only(tmp_path: Path) -> None:
    """Group "g"'s resources are not given to the instances of group "g_big" (a name
    prefix match did that)."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text("""
backend: "gate"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [
  { name: "g_big" count: 1 kind: KIND_CPU },
  { name: "g" count: 2 kind: KIND_CPU rate_limiter { resources [ { name: "R" count: 1 } ] priority: 2 } }
]
""")
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", Gate())
    with server:
        mv = server.get_version("m")
        assert [i.name for i in mv.instances] == ["g_big_0", "g_0", "g_1"]
        assert mv.needs["g_0"].resources == (("R", 1, False),)
        assert mv.needs["g_0"].priority == 2
        assert mv.needs["g_big_0"].resources == ()  # its own (empty) group's, not "g"'s
