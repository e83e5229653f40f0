"""Triton ``platform:`` strings, the backend that serves each, and how Triton's core
derives a config's backend, platform and model file from one another.

Triton fills these in when it reads a config (``AutoCompleteBackendFields``):
a config naming only ``backend: "pytorch"`` gets ``platform:
"pytorch_libtorch"`` and ``default_model_filename: "model.pt"``; one naming
only ``platform: "torch_aoti"`` gets backend ``pytorch`` and ``model.pt2``;
one naming neither is placed by the files in its version folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PLATFORM_BACKENDS = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "libtorch": "pytorch",  # Triton's older spelling
    "torch_aoti": "pytorch",
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "ensemble": "ensemble",
}

#: The platform Triton's core gives a config that names only the backend.
BACKEND_PLATFORMS = {
    "onnxruntime": "onnxruntime_onnx",
    "pytorch": "pytorch_libtorch",
    "tensorrt": "tensorrt_plan",
}

#: The model file of each platform, for a config that names none.
PLATFORM_FILES = {
    "onnxruntime_onnx": "model.onnx",
    "pytorch_libtorch": "model.pt",
    "libtorch": "model.pt",
    "torch_aoti": "model.pt2",
    "tensorrt_plan": "model.plan",
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
}

#: Model files that tell the platform, in the order Triton's core looks for them.
FILE_PLATFORMS = {
    "model.plan": "tensorrt_plan",
    "model.onnx": "onnxruntime_onnx",
    "model.pt": "pytorch_libtorch",
    "model.pt2": "torch_aoti",
}


def platform_backend(platform: str) -> str | None:
    """The backend name for a known Triton platform string, else None."""
    return PLATFORM_BACKENDS.get(platform)


def platform_pair_error(platform: str, backend: str) -> str | None:
    """Triton's refusal of a ``platform`` that belongs to another of its backends than
    ``backend`` (a backend it does not know takes any platform), else None."""
    known = set(PLATFORM_BACKENDS.values()) - {"ensemble"}
    if backend in known and PLATFORM_BACKENDS.get(platform) != backend:
        return f"unexpected 'platform' and 'backend' pair, got:{platform}, {backend}"
    return None


def backend_platform(backend: str, default_model_filename: str, version_dirs: Iterable[Path]) -> str | None:
    """The platform Triton derives for ``backend`` when the config names none.

    A model file named in the config, else one present in a version folder,
    picks among the backend's platforms (``model.pt2`` → ``torch_aoti``);
    otherwise the backend's default platform. None for a backend Triton has
    no platform for (python, custom backends).
    """
    if backend not in BACKEND_PLATFORMS:
        return None
    candidates = [f for f, p in FILE_PLATFORMS.items() if PLATFORM_BACKENDS[p] == backend]
    if default_model_filename:
        named = FILE_PLATFORMS.get(default_model_filename)
        if named is not None and PLATFORM_BACKENDS[named] == backend:
            return named
        return BACKEND_PLATFORMS[backend]
    dirs = list(version_dirs)
    for filename in candidates:
        if any((d / filename).is_file() for d in dirs):
            return FILE_PLATFORMS[filename]
    return BACKEND_PLATFORMS[backend]


def platform_file(platform: str, backend: str) -> str | None:
    """The model file of ``platform`` when ``backend`` is the one serving it, else None."""
    if PLATFORM_BACKENDS.get(platform) != backend:
        return None
    return PLATFORM_FILES.get(platform)
