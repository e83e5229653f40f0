"""Triton ``platform:`` strings and the backend that serves each."""

from __future__ import annotations

PLATFORM_BACKENDS = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "ensemble": "ensemble",
}


def platform_backend(platform: str) -> str | None:
    """The backend name for a known Triton platform string, else None."""
    return PLATFORM_BACKENDS.get(platform)
