from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tritonpy_sdk import (
    Backend,
    BackendInfo,
    DataType,
    DirectCall,
    GpuSupport,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_sdk.host import PluginError, validate_backend
from tritonpy_sdk.testing import BackendHarness


class Doubler:
    """A complete little backend: OUT = IN * 2, counting lifecycle calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt")

    @hookimpl
    def initialize(self, backend: object) -> None:
        self.calls.append("initialize")

    @hookimpl
    def model_initialize(self, model: object) -> None:
        self.calls.append("model_initialize")

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        self.calls.append("instance_initialize")
        instance.state = 2

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        return [
            InferenceResponse({"OUT": Tensor.from_numpy("OUT", r.inputs["IN"].data * instance.state)})
            for r in requests
        ]

    @hookimpl
    def instance_finalize(self) -> None:  # fewer arguments than the spec is allowed
        self.calls.append("instance_finalize")

    @hookimpl
    def finalize(self) -> None:
        self.calls.append("finalize")


def test_harness_runs_hooks_in_server_order(tmp_path: object) -> None:
    backend = Doubler()
    with BackendHarness(backend, tmp_path, config={"name": "m", "max_batch_size": 4}) as h:
        out = h.infer({"IN": np.array([[1, 2]], np.int32)})
        np.testing.assert_array_equal(out["OUT"], [[2, 4]])
        assert h.model.config["default_model_filename"] == "model.txt"
    assert backend.calls == [
        "initialize",
        "model_initialize",
        "instance_initialize",
        "instance_finalize",
        "finalize",
    ]


def test_unknown_hook_is_rejected_with_backend_name() -> None:
    class Typo:
        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo()

        @hookimpl
        def exectue(self) -> None: ...

    with pytest.raises(PluginError, match="backend 'typo'.*exectue"):
        validate_backend("typo", Typo())


def test_argument_not_in_spec_is_rejected() -> None:
    class BadArgs:
        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo()

        @hookimpl
        def execute(self, instance: object, requests: object, extra: object) -> None: ...

    with pytest.raises(PluginError, match="extra"):
        validate_backend("bad", BadArgs())


def test_missing_required_hook() -> None:
    plugin = SimpleNamespace()

    @hookimpl
    def backend_info() -> BackendInfo:
        return BackendInfo()

    plugin.backend_info = backend_info
    with pytest.raises(PluginError, match=r"required hook\(s\) execute not implemented"):
        validate_backend("noexec", plugin)


def test_backend_info_must_return_backend_info() -> None:
    class WrongInfo:
        @hookimpl
        def backend_info(self) -> dict[str, str]:
            return {"platform": "x"}

        @hookimpl
        def execute(self, requests: object) -> None: ...

    with pytest.raises(PluginError, match="returned dict, expected tritonpy_sdk.BackendInfo"):
        validate_backend("wrong", WrongInfo())


def test_execute_with_fewer_arguments_is_called_by_name() -> None:
    class OnlyRequests:
        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo()

        @hookimpl
        def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
            return [InferenceResponse(id=str(len(requests)))]

    hooks = validate_backend("only", OnlyRequests())
    (resp,) = hooks.execute(None, [InferenceRequest("m", 1, {})])  # type: ignore[arg-type]
    assert resp.id == "1"


def test_execute_direct_is_bound_once_and_its_call_makes_the_request_once() -> None:
    class Direct:
        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo()

        @hookimpl
        def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
            return []

        @hookimpl
        def execute_direct(self, call: DirectCall) -> dict[str, np.ndarray]:
            return {"Y": call.inputs["X"] * 2}

    assert validate_backend("plain", Doubler()).direct_function() is None
    direct = validate_backend("direct", Direct()).direct_function()
    assert direct is not None
    call = DirectCall("m", 3, 2, {"X": np.ones((2, 1), np.float32)})
    assert direct(None, call)["Y"].tolist() == [[2.0], [2.0]]
    assert call.made is None
    request = call.request()
    assert call.request() is request and call.made is request
    assert (request.model_name, request.model_version, request.batch_size) == ("m", 3, 2)
    assert request.inputs["X"].datatype is DataType.FP32 and request.inputs["X"].data is call.inputs["X"]


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's code sees one GPU, as on a GPU host (this host has none)."""
    import tritonpy.devices

    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)


class CpuOnlyHere(Doubler):
    @hookimpl
    def gpu_support(self, backend: Backend) -> GpuSupport:
        assert isinstance(backend, Backend)
        return GpuSupport(usable=False, reason="doubler here has no CUDA build")


def _instance_kinds(backend: object, folder: object) -> list[str]:
    with BackendHarness(backend, folder, backend_name="doubler", config={"name": "m"}) as h:
        return [g["kind"] for g in h.model.config["instance_group"]]


def test_a_backend_without_gpu_support_is_taken_to_use_the_gpu(tmp_path: Path, one_gpu: None) -> None:
    """As Triton's core assumes of its backends (a CPU-only one prefers KIND_CPU in BackendInfo)."""
    assert validate_backend("doubler", Doubler()).gpu_support is None
    assert _instance_kinds(Doubler(), tmp_path) == ["KIND_GPU"]


def test_gpu_support_decides_the_default_kind(tmp_path: Path, one_gpu: None) -> None:
    assert _instance_kinds(CpuOnlyHere(), tmp_path) == ["KIND_CPU"]


def test_gpu_support_is_asked_only_on_a_gpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonpy.devices

    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 0)

    class Refuses(Doubler):
        @hookimpl
        def gpu_support(self) -> GpuSupport:
            raise AssertionError("asked without a GPU")

    assert _instance_kinds(Refuses(), tmp_path) == ["KIND_CPU"]


def test_a_wrong_gpu_support_answer_names_the_backend(tmp_path: Path, one_gpu: None) -> None:
    class Wrong(Doubler):
        @hookimpl
        def gpu_support(self) -> bool:
            return False

    with pytest.raises(TritonError, match="gpu_support of backend 'doubler' returned bool, expected"):
        _instance_kinds(Wrong(), tmp_path)
