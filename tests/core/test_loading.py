"""Load failures become a model's reason; the rest of the repository serves."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import tritonpy
from tritonpy.runtime import backends
from tritonpy_sdk import (
    BackendInfo,
    InferenceResponse,
    Model,
    Predictor,
    complete_input,
    complete_max_batch_size,
    complete_output,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend


class Plain(CpuBackend):
    """A backend without auto-complete, so the config is validated as written."""

    @hookimpl
    def execute(self, requests: list) -> list[InferenceResponse]:
        return [InferenceResponse() for _ in requests]


def _index(repo: Path) -> dict[str, dict[str, str]]:
    server = tritonpy.Server(model_repository=repo, exit_on_error=False)
    server.backends.register("plain", Plain())
    with server:
        return {e["name"]: e for e in server.repository_index()}


def test_model_file_of_a_missing_backend_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backend tritonpy would ship that is not installed (the development environment installs
    # every real one).
    monkeypatch.setitem(backends.KNOWN_FILES, "model.nosuch", "nosuch")
    monkeypatch.setitem(backends.KNOWN_PACKAGES, "nosuch", "tritonpy-backend-nosuch")
    (tmp_path / "planned" / "1").mkdir(parents=True)
    (tmp_path / "planned" / "1" / "model.nosuch").write_bytes(b"")
    entry = _index(tmp_path)["planned"]
    assert entry["state"] == "UNAVAILABLE"
    assert "has a model.nosuch but backend 'nosuch' is not installed" in entry["reason"]
    assert "pip install ./plugins/nosuch" in entry["reason"]


class Torchy(Plain):
    """Stands in for the pytorch backend: what the core derives does not depend on it."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(
            platforms=("pytorch_libtorch", "torch_aoti"),
            default_model_filename="model.pt",
            default_instance_kind="KIND_CPU",
        )


def _configs(repo: Path) -> dict[str, dict[str, object]]:
    server = tritonpy.Server(model_repository=repo, exit_on_error=False)
    server.backends.register("pytorch", Torchy())
    with server:
        return {e["name"]: server.model_config(e["name"]) for e in server.repository_index(ready=True)}


def test_platform_backend_and_model_file_derived_as_triton_does(tmp_path: Path) -> None:
    io = (
        'input [{ name: "X" data_type: TYPE_FP32 dims: [1] }] '
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]'
    )
    cases = {
        # only the backend: Triton's default platform and file
        "by_backend": ('backend: "pytorch"', "model.pt"),
        # only the platform: its backend and file
        "by_platform": ('platform: "torch_aoti"', "model.pt2"),
        "by_old_platform": ('platform: "libtorch"', "model.pt"),
        # neither: the version folder's file
        "by_file": ("", "model.pt2"),
        # only the file name
        "by_filename": ('default_model_filename: "model.pt2"', "model.pt2"),
    }
    for name, (head, filename) in cases.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / filename).write_bytes(b"")
        (tmp_path / name / "config.pbtxt").write_text(f"{head}\n{io}\n")
    configs = _configs(tmp_path)
    found = {n: (c["backend"], c["platform"], c["default_model_filename"]) for n, c in configs.items()}
    assert found == {
        "by_backend": ("pytorch", "pytorch_libtorch", "model.pt"),
        "by_platform": ("pytorch", "torch_aoti", "model.pt2"),
        "by_old_platform": ("pytorch", "libtorch", "model.pt"),
        "by_file": ("pytorch", "torch_aoti", "model.pt2"),
        "by_filename": ("pytorch", "torch_aoti", "model.pt2"),
    }


def test_platform_and_backend_must_agree_as_in_triton(tmp_path: Path) -> None:
    cases = {
        # a platform of another of Triton's backends
        "crossed": 'backend: "pytorch"\nplatform: "onnxruntime_onnx"',
        # an unknown platform: the backend comes from the model file Triton names
        "misspelt": 'platform: "onnxruntim"\ndefault_model_filename: "model.onnx"',
        # a backend Triton does not know takes any platform
        "own": 'backend: "plain"\nplatform: "whatever_it_likes"',
    }
    for name, head in cases.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(head + "\n")
    index = _index(tmp_path)
    assert index["crossed"]["reason"] == (
        "Invalid argument: unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, pytorch"
    )
    assert index["misspelt"]["reason"] == (
        "Invalid argument: unexpected 'platform' and 'backend' pair, got:onnxruntim, onnxruntime"
    )
    assert index["own"]["state"] == "READY"


def test_runtime_names_the_backend_s_own_runtime_or_fails_as_in_triton(tmp_path: Path) -> None:
    runtimes = {
        "default": "libtriton_plain.so",
        "python": "model.py",
        "missing": "libcustom.so",
        "escaping": "../elsewhere/libcustom.so",
        "library": "libcustom.so",
    }
    for name, runtime in runtimes.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(f'backend: "plain"\nruntime: "{runtime}"\n')
    (tmp_path / "escaping" / "elsewhere").mkdir()
    (tmp_path / "escaping" / "elsewhere" / "libcustom.so").write_bytes(b"")
    (tmp_path / "library" / "libcustom.so").write_bytes(b"")
    index = _index(tmp_path)
    assert index["default"]["state"] == index["python"]["state"] == "READY"
    missing = tmp_path / "missing"
    assert index["missing"]["reason"] == (
        f"Invalid argument: unable to find backend library 'libcustom.so' for model 'missing', searched: "
        f"'{missing / '1'}' '{missing}' "
    )
    assert index["escaping"]["reason"] == (
        f"Invalid argument: backend library name '../elsewhere/libcustom.so' escapes backend directory "
        f"'{tmp_path / 'escaping' / '1'}', for model 'escaping', check model config runtime field"
    )
    refused = index["library"]["reason"]
    assert "cannot be loaded: tritonpy runs the 'plain' backend as a Python package" in refused


def test_unknown_files_and_missing_versions(tmp_path: Path) -> None:
    (tmp_path / "mystery" / "1").mkdir(parents=True)
    (tmp_path / "mystery" / "1" / "weights.bin").write_bytes(b"")
    (tmp_path / "thing.plain" / "1").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    index = _index(tmp_path)
    assert index["mystery"]["reason"].startswith(
        "Invalid argument: Invalid model name: Could not determine backend for model 'mystery' with no "
        "backend in model configuration. Expected model name of the form 'model.<backend_name>'. Set "
        "'backend' or 'platform'"
    )
    # Triton's rule for custom backends: the name after the first dot, when nothing else says.
    assert index["thing.plain"]["state"] == "READY"
    reason = index["empty"]["reason"]
    assert reason.startswith("no version directory found for model 'empty'"), reason
    assert "such as 'empty/1/'" in reason and "at least one version must be available" in reason


def test_bad_config_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad" / "1").mkdir(parents=True)
    (tmp_path / "bad" / "config.pbtxt").write_text('backend: "plain"\nmax_batch_size: -3\n')
    reason = _index(tmp_path)["bad"]["reason"]
    assert str(tmp_path / "bad" / "config.pbtxt") in reason
    assert "'max_batch_size' must be non-negative value for bad" in reason


def test_disable_auto_complete_requires_a_config(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    with tritonpy.Server(
        model_repository=tmp_path, exit_on_error=False, disable_auto_complete_config=True
    ) as server:
        (entry,) = server.repository_index()
    assert "auto-complete is disabled" in entry["reason"]


class Seen(Predictor):
    """Records what auto-complete saw as the user's config, and completes max_batch_size."""

    backend_info = BackendInfo(default_model_filename="model.seen", default_instance_kind="KIND_CPU")
    seen: ClassVar[dict[str, dict[str, object]]] = {}

    @classmethod
    def auto_complete(cls, model: Model) -> None:
        cls.seen[model.name] = dict(model.user_config)
        complete_max_batch_size(model)
        complete_input(model, "X", "TYPE_FP32", [1])
        complete_output(model, "Y", "TYPE_FP32", [1])

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
        return {"Y": inputs["X"]}


def test_auto_complete_sees_the_config_as_written_from_files_and_load_requests(tmp_path: Path) -> None:
    for name, text in [
        ("zero", 'backend: "seen"\nmax_batch_size: 0\n'),
        ("unset", 'backend: "seen"\n'),
        ("bare", None),
    ]:
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "model.seen").write_text("")
        if text is not None:
            (tmp_path / name / "config.pbtxt").write_text(text)
    server = tritonpy.Server(model_repository=tmp_path, model_control_mode="explicit", exit_on_error=False)
    server.backends.register("seen", Seen)
    Seen.seen.clear()
    with server:
        for name in ("zero", "unset", "bare"):
            server.load_model(name)
        configs = {name: server.model_config(name) for name in ("zero", "unset", "bare")}
        server.load_model("unset", config='{"backend": "seen", "max_batch_size": 0}')
        overridden = server.model_config("unset")
    assert Seen.seen["zero"] == {"backend": "seen", "max_batch_size": 0}
    assert Seen.seen["bare"] == {}
    assert Seen.seen["unset"] == {"backend": "seen", "max_batch_size": 0}  # the load's JSON, last
    assert [configs[n]["max_batch_size"] for n in ("zero", "unset", "bare")] == [0, 4, 4]
    assert "dynamic_batching" in configs["unset"] and "dynamic_batching" not in configs["zero"]
    assert overridden["max_batch_size"] == 0
