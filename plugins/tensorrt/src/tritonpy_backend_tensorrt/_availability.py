"""Whether TensorRT can serve here, and the messages that say why not (plain data in, text out)."""

from __future__ import annotations

from collections.abc import Sequence

#: How to install what is missing: the extras of this package.
INSTALL = (
    "install the TensorRT extra: pip install 'tritonpy-backend-tensorrt[cu12]' "
    "(CUDA 12 driver) or 'tritonpy-backend-tensorrt[cu13]' (CUDA 13 driver)"
)

#: The oldest TensorRT whose Python API this backend uses (tensor names, execute_async_v3).
MIN_MAJOR = 10


def unavailable_reason(
    trt_version: str | None,
    trt_import_error: str,
    has_cuda_python: bool,
    gpu_count: int,
) -> str:
    """Why a ``model.plan`` cannot be served here ("" when it can)."""
    if trt_version is None:
        return f"the TensorRT backend needs the 'tensorrt' package ({trt_import_error}): {INSTALL}"
    major = trt_version.split(".", 1)[0]
    if not major.isdigit() or int(major) < MIN_MAJOR:
        return (
            f"the TensorRT backend needs TensorRT >= {MIN_MAJOR}, this is TensorRT {trt_version}: {INSTALL}"
        )
    if not has_cuda_python:
        return f"the TensorRT backend needs cuda-python (the 'cuda-bindings' package): {INSTALL}"
    if gpu_count == 0:
        return (
            f"TensorRT {trt_version} is installed but there is no CUDA GPU here (or no driver): "
            "TensorRT engines run only on a GPU"
        )
    return ""


def not_gpu_message(model_name: str, instance_name: str, kind: str) -> str:
    """A non-GPU instance (Triton: 'TensorRT backend supports only GPU device')."""
    return (
        f"unable to load model '{model_name}', TensorRT backend supports only GPU device "
        f"(instance '{instance_name}' is {kind}; use instance_group [{{ kind: KIND_GPU }}])"
    )


def deserialize_message(
    model_name: str,
    file_name: str,
    device: int,
    gpu: tuple[str, str],
    trt_version: str,
    errors: Sequence[str],
) -> str:
    """A plan TensorRT refused: for another GPU, another TensorRT version, or not a plan.
    ``errors`` are the messages TensorRT's logger gave while it tried (the reason)."""
    name, capability = gpu
    reason = "; ".join(e.strip() for e in errors if e.strip()) or "TensorRT gave no reason"
    return (
        f"unable to load model '{model_name}': TensorRT {trt_version} cannot deserialize {file_name} on "
        f"GPU {device} ({name}, compute capability {capability}): {reason}. A plan runs only with the "
        "TensorRT version and the kind of GPU it was built for: build it again on this host "
        "(e.g. trtexec --onnx=model.onnx --saveEngine=model.plan)"
    )
