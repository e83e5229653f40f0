"""Triton ``platform:`` strings and their backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonpy.config import PLATFORM_BACKENDS, backend_platform, platform_backend, platform_file


@pytest.mark.parametrize(
    ("platform", "backend"),
    [
        ("onnxruntime_onnx", "onnxruntime"),
        ("pytorch_libtorch", "pytorch"),
        ("libtorch", "pytorch"),
        ("torch_aoti", "pytorch"),
        ("tensorrt_plan", "tensorrt"),
        ("tensorflow_graphdef", "tensorflow"),
        ("tensorflow_savedmodel", "tensorflow"),
        ("ensemble", "ensemble"),
    ],
)
def test_known_platforms(platform: str, backend: str) -> None:
    assert platform_backend(platform) == backend
    assert PLATFORM_BACKENDS[platform] == backend


def test_unknown_platform() -> None:
    assert platform_backend("") is None
    assert platform_backend("foo_bar") is None


def test_platform_of_a_backend_as_triton_derives_it(tmp_path: Path) -> None:
    assert backend_platform("pytorch", "", []) == "pytorch_libtorch"
    assert backend_platform("onnxruntime", "", []) == "onnxruntime_onnx"
    assert backend_platform("tensorrt", "", []) == "tensorrt_plan"
    assert backend_platform("python", "", []) is None
    assert backend_platform("pytorch", "model.pt2", []) == "torch_aoti"
    (tmp_path / "model.pt2").write_bytes(b"")
    assert backend_platform("pytorch", "", [tmp_path]) == "torch_aoti"
    (tmp_path / "model.pt").write_bytes(b"")
    assert backend_platform("pytorch", "", [tmp_path]) == "pytorch_libtorch"  # model.pt first, as Triton


def test_model_file_of_a_platform() -> None:
    assert platform_file("torch_aoti", "pytorch") == "model.pt2"
    assert platform_file("pytorch_libtorch", "pytorch") == "model.pt"
    assert platform_file("torch_aoti", "mine") is None
