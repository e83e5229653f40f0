"""Load failures become a model's reason; the rest of the repository serves."""

from __future__ import annotations

from pathlib import Path

import tritonpy
from tritonpy_sdk import InferenceResponse, hookimpl
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


def test_model_file_of_a_missing_backend_names_the_package(tmp_path: Path) -> None:
    (tmp_path / "torchy" / "1").mkdir(parents=True)
    (tmp_path / "torchy" / "1" / "model.pt").write_bytes(b"")
    entry = _index(tmp_path)["torchy"]
    assert entry["state"] == "UNAVAILABLE"
    assert "has a model.pt but backend 'pytorch' is not installed" in entry["reason"]
    assert "tritonpy-backend-torch" in entry["reason"]


def test_unknown_files_and_missing_versions(tmp_path: Path) -> None:
    (tmp_path / "mystery" / "1").mkdir(parents=True)
    (tmp_path / "mystery" / "1" / "weights.bin").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    index = _index(tmp_path)
    assert "unable to determine the backend of model 'mystery'" in index["mystery"]["reason"]
    assert "at least one version must be available" in index["empty"]["reason"]


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
