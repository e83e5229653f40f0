"""Execution providers for an instance, from its kind and the config's execution accelerators.

Triton's onnxruntime backend reads ``optimization { execution_accelerators { ... } }``:

- ``gpu_execution_accelerator`` applies to KIND_GPU instances only (a CPU instance ignores
  it): ``tensorrt`` puts ORT's TensorRT execution provider first, its parameters mapped to
  the provider's options (:data:`TENSORRT_KEYS`); ``cuda`` passes its parameters to the
  CUDA execution provider, which every GPU instance runs on (after TensorRT, if asked);
- ``cpu_execution_accelerator`` applies to every instance: ``openvino`` puts ORT's
  OpenVINO execution provider (device CPU) before the CPU provider;
- any other name fails the load: ``unknown Execution Accelerator '<name>' is requested``.

The CUDA provider also takes the older model parameters ``cudnn_conv_algo_search``
(0 exhaustive, 1 heuristic, 2 default), ``gpu_mem_limit``, ``arena_extend_strategy``
(0 next power of two, 1 same as requested) and ``do_copy_in_default_stream``; as in
Triton, they win over the same option given under ``cuda``.

An accelerator this onnxruntime lacks (the TensorRT provider is in onnxruntime-gpu, the
OpenVINO one in onnxruntime-openvino) makes the instance UNAVAILABLE with what to install;
Triton's own builds always have both.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from tritonpy_sdk import TritonError

from ._params import int_param, parse_bool

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
OPENVINO = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"

#: A provider and its options, as ``onnxruntime.InferenceSession(providers=...)`` takes them.
Provider = tuple[str, dict[str, str]]

#: The TensorRT accelerator's parameters (besides ``precision_mode``): Triton's key ->
#: (the TensorRT provider's option, the value's kind: int, uint64, bool or str).
TENSORRT_KEYS: dict[str, tuple[str, str]] = {
    "max_workspace_size_bytes": ("trt_max_workspace_size", "uint64"),
    "trt_max_partition_iterations": ("trt_max_partition_iterations", "int"),
    "trt_min_subgraph_size": ("trt_min_subgraph_size", "int"),
    "int8_calibration_table_name": ("trt_int8_calibration_table_name", "str"),
    "int8_use_native_calibration_table": ("trt_int8_use_native_calibration_table", "bool"),
    "trt_dla_enable": ("trt_dla_enable", "bool"),
    "trt_dla_core": ("trt_dla_core", "int"),
    "trt_engine_cache_enable": ("trt_engine_cache_enable", "bool"),
    "trt_engine_cache_path": ("trt_engine_cache_path", "str"),
    "trt_engine_cache_prefix": ("trt_engine_cache_prefix", "str"),
    "trt_dump_subgraphs": ("trt_dump_subgraphs", "bool"),
    "trt_force_sequential_engine_build": ("trt_force_sequential_engine_build", "bool"),
    "trt_context_memory_sharing_enable": ("trt_context_memory_sharing_enable", "bool"),
    "trt_layer_norm_fp32_fallback": ("trt_layer_norm_fp32_fallback", "bool"),
    "trt_timing_cache_enable": ("trt_timing_cache_enable", "bool"),
    "trt_timing_cache_path": ("trt_timing_cache_path", "str"),
    "trt_force_timing_cache": ("trt_force_timing_cache", "bool"),
    "trt_detailed_build_log": ("trt_detailed_build_log", "bool"),
    "trt_build_heuristics_enable": ("trt_build_heuristics_enable", "bool"),
    "trt_sparsity_enable": ("trt_sparsity_enable", "bool"),
    "trt_builder_optimization_level": ("trt_builder_optimization_level", "int"),
    "trt_auxiliary_streams": ("trt_auxiliary_streams", "int"),
    "trt_tactic_sources": ("trt_tactic_sources", "str"),
    "trt_extra_plugin_lib_paths": ("trt_extra_plugin_lib_paths", "str"),
    "trt_profile_min_shapes": ("trt_profile_min_shapes", "str"),
    "trt_profile_max_shapes": ("trt_profile_max_shapes", "str"),
    "trt_profile_opt_shapes": ("trt_profile_opt_shapes", "str"),
    "trt_cuda_graph_enable": ("trt_cuda_graph_enable", "bool"),
    "trt_dump_ep_context_model": ("trt_dump_ep_context_model", "bool"),
    "trt_ep_context_file_path": ("trt_ep_context_file_path", "str"),
    "trt_ep_context_embed_mode": ("trt_ep_context_embed_mode", "int"),
}

#: ``precision_mode`` -> the TensorRT provider option it switches on (FP32: none).
_PRECISIONS = {"FP32": "", "FP16": "trt_fp16_enable", "BF16": "trt_bf16_enable", "INT8": "trt_int8_enable"}

#: The CUDA accelerator's switches, checked as Triton checks them; its other keys pass as given.
_CUDA_SWITCHES = ("do_copy_in_default_stream", "use_ep_level_unified_stream")

#: The older CUDA model parameters that are a number naming a choice.
_CUDA_CHOICES = {
    "cudnn_conv_algo_search": ("EXHAUSTIVE", "HEURISTIC", "DEFAULT"),
    "arena_extend_strategy": ("kNextPowerOfTwo", "kSameAsRequested"),
}


def execution_providers(
    available: Collection[str],
    version: str,
    instance: str,
    kind: str,
    device_id: int,
    config: Mapping[str, Any],
    params: Mapping[str, str],
) -> list[Provider]:
    """The providers, in ORT's order of preference, for ``instance`` of ``kind`` on GPU
    ``device_id``, given the names of the providers this onnxruntime (``version``) has."""
    chosen: list[Provider] = []
    if kind == "KIND_GPU":
        if CUDA not in available:
            reason = lacks(available, version, CUDA)
            raise TritonError.unavailable(f"instance '{instance}' is KIND_GPU but {reason}")
        tensorrt, cuda = gpu_accelerators(config, params)
        if tensorrt is not None:
            if TENSORRT not in available:
                raise TritonError.unavailable(
                    f"instance '{instance}' asks for the TensorRT execution accelerator but "
                    f"{lacks(available, version, TENSORRT)}"
                )
            chosen.append((TENSORRT, {**tensorrt, "device_id": str(device_id)}))
        chosen.append((CUDA, {**cuda, "device_id": str(device_id)}))
    if cpu_accelerators(config):
        if OPENVINO not in available:
            raise TritonError.unavailable(
                f"instance '{instance}' asks for the OpenVINO execution accelerator but "
                f"{lacks(available, version, OPENVINO)}"
            )
        chosen.append((OPENVINO, {"device_type": "CPU"}))
    chosen.append((CPU, {}))
    return chosen


def lacks(available: Collection[str], version: str, provider: str) -> str:
    """Why this onnxruntime (``version``, with the ``available`` providers) cannot run
    ``provider``, and what to install."""
    packages = {
        CUDA: "install onnxruntime-gpu (pip install 'tritonpy-backend-onnx[gpu]')",
        TENSORRT: "install onnxruntime-gpu and TensorRT's libraries (pip install tensorrt-cu12)",
        OPENVINO: "install onnxruntime-openvino in place of onnxruntime",
    }
    return (
        f"onnxruntime {version} here has no {provider} (its providers: {', '.join(available)}): "
        f"{packages[provider]}"
    )


def unused_providers(chosen: list[Provider], used: Collection[str]) -> list[str]:
    """The chosen providers a session does not use: ORT falls back without a word when
    a provider's libraries fail to load (CUDA, cuDNN, TensorRT, OpenVINO)."""
    return [name for name, _ in chosen if name != CPU and name not in used]


def _accelerators(config: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    accelerators = ((config.get("optimization") or {}).get("execution_accelerators") or {}).get(field)
    return list(accelerators or [])


def gpu_accelerators(
    config: Mapping[str, Any], params: Mapping[str, str]
) -> tuple[dict[str, str] | None, dict[str, str]]:
    """(TensorRT provider options, or None when TensorRT is not asked for; CUDA provider options)."""
    tensorrt: dict[str, str] | None = None
    cuda: dict[str, str] = {}
    for accelerator in _accelerators(config, "gpu_execution_accelerator"):
        name = str(accelerator.get("name", ""))
        options = {str(k): str(v) for k, v in (accelerator.get("parameters") or {}).items()}
        if name == "tensorrt":
            tensorrt = {**(tensorrt or {}), **tensorrt_options(options)}
        elif name == "cuda":
            for key, value in options.items():
                if key in _CUDA_SWITCHES:
                    value = _convert("CUDA Execution Accelerator", key, value, "bool")
                if value:
                    cuda[key] = value
        else:
            raise TritonError.invalid_arg(f"unknown Execution Accelerator '{name}' is requested")
    cuda.update(_older_cuda_parameters(params))
    return tensorrt, cuda


def tensorrt_options(params: Mapping[str, str]) -> dict[str, str]:
    """The TensorRT provider's options for the ``tensorrt`` accelerator's ``params``."""
    options: dict[str, str] = {}
    for key, value in params.items():
        if key == "precision_mode":
            if value not in _PRECISIONS:
                raise TritonError.invalid_arg(f"unsupported precision mode '{value}' is requested")
            if _PRECISIONS[value]:
                options[_PRECISIONS[value]] = "1"
            continue
        if key not in TENSORRT_KEYS:
            raise TritonError.invalid_arg(
                f"unknown parameter '{key}' is provided for TensorRT Execution Accelerator"
            )
        option, value_kind = TENSORRT_KEYS[key]
        converted = _convert("TensorRT Execution Accelerator", key, value, value_kind)
        if converted:
            options[option] = converted
    return options


def _convert(owner: str, key: str, value: str, kind: str) -> str:
    """``value`` checked as ``kind`` (Triton's words when it is not one), as ORT reads it."""
    if kind == "str":
        return value
    if kind == "bool":
        parsed = parse_bool(value)
        if parsed is None:
            raise TritonError.invalid_arg(
                f"{owner} parameter '{key}': failed to convert '{value}' to boolean"
            )
        return "1" if parsed else "0"
    try:
        number = int(value.strip())
    except ValueError:
        what = "unsigned long long integral number" if kind == "uint64" else "integral number"
        raise TritonError.invalid_arg(
            f"{owner} parameter '{key}': failed to convert '{value}' to {what}"
        ) from None
    if kind == "uint64" and number < 0:
        raise TritonError.invalid_arg(f"{owner} parameter '{key}' must not be negative, got '{value}'")
    return str(number)


def _older_cuda_parameters(params: Mapping[str, str]) -> dict[str, str]:
    """CUDA provider options from the model parameters Triton still reads for them."""
    options: dict[str, str] = {}
    for key, choices in _CUDA_CHOICES.items():
        index = int_param(params, key)
        if index is None:
            continue
        if not 0 <= index < len(choices):
            raise TritonError.invalid_arg(f"unsupported {key} value '{index}' is requested")
        options[key] = choices[index]
    for key in ("gpu_mem_limit", "do_copy_in_default_stream"):
        value = params.get(key)
        if value:
            options[key] = value
    return options


def cpu_accelerators(config: Mapping[str, Any]) -> bool:
    """Whether the config asks for OpenVINO (the one CPU accelerator there is)."""
    openvino = False
    for accelerator in _accelerators(config, "cpu_execution_accelerator"):
        name = str(accelerator.get("name", ""))
        if name != "openvino":
            raise TritonError.invalid_arg(f"unknown Execution Accelerator '{name}' is requested")
        openvino = True
    return openvino
