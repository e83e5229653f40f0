"""Triton ``platform:`` strings and their backends."""

from __future__ import annotations

import pytest
from tritonpy.config import PLATFORM_BACKENDS, platform_backend


@pytest.mark.parametrize(
    ("platform", "backend"),
    [
        ("onnxruntime_onnx", "onnxruntime"),
        ("pytorch_libtorch", "pytorch"),
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
