"""tritonpy-backend-torch: PyTorch models (TorchScript, torch.export, AOTInductor, nn.Module).

Registered under the entry-point group ``tritonpy.backends`` as ``pytorch``;
serves Triton's platforms ``pytorch_libtorch`` (``model.pt``, TorchScript) and
``torch_aoti`` (``model.pt2``: an AOTInductor package or, beyond Triton, a
``torch.export`` program), and Triton's Python-based runtime (``runtime:
"model.py"``: an ``nn.Module`` class in ``model.py``, run through
``torch.compile``). torch is imported in ``initialize``, not here, so listing
backends stays cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tritonpy_sdk import (
    Backend,
    BackendInfo,
    GpuSupport,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    TritonError,
    hookimpl,
)

from ._autocomplete import complete_config, exported_signature
from ._instance import InstanceState
from ._params import Options, apply_thread_counts, report_unknown
from ._programs import (
    PLATFORMS,
    PT2,
    Program,
    exported_program,
    load_aoti,
    load_exported,
    load_torchscript,
    pt2_kind,
    require_file,
)
from ._python_runtime import (
    compile_options,
    forget_source,
    load_source,
    model_file,
    python_program,
    uses_python_runtime,
)

__all__ = ["__version__"]
__version__ = "0.1.0"


@dataclass(eq=False)
class ModelState:
    """Per model version: parsed parameters, the file, and modules shared by instances."""

    path: Path
    platform: str
    options: Options
    #: "torchscript", "export", "aoti", or "python" (Triton's Python-based runtime)
    format: str
    #: An exported program read once (auto-complete reads it too), shared by the instances.
    exported: Any = None
    #: ENABLE_WEIGHT_SHARING: the TorchScript module loaded once per device.
    shared: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The Python-based runtime: the model.py module run once (None for a TorchScript file).
    source: ModuleType | None = None
    #: The Python-based runtime: torch.compile's keyword arguments.
    compile: dict[str, Any] = field(default_factory=dict)


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=PLATFORMS,
        default_model_filename="model.pt",
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
        parallel_instance_init=True,
    )


@hookimpl
def initialize(backend: Backend) -> None:
    try:
        import torch
    except ImportError as exc:
        raise TritonError.unavailable(
            f"the pytorch backend needs the 'torch' package (pip install torch, the CPU or CUDA build "
            f"you need): {exc}"
        ) from None
    backend.state = torch


def _platform(model: Model) -> str:
    platform = str(model.config.get("platform") or "pytorch_libtorch")
    return "pytorch_libtorch" if platform == "libtorch" else platform


def _format(model: Model, path: Path) -> str:
    if uses_python_runtime(model.config):
        return "python"
    if _platform(model) != PT2:
        return "torchscript"
    kind = pt2_kind(path)
    if kind == "unknown":
        raise TritonError.internal(
            f"failed to load model '{model.name}': {path.name} is neither an AOTInductor package "
            "(torch._inductor.aoti_compile_and_package) nor a torch.export program (torch.export.save)"
        )
    return kind


def _state(model: Model) -> ModelState:
    """The model's state, made on first use (auto-complete runs before model_initialize)."""
    if isinstance(model.state, ModelState):
        existing: ModelState = model.state
        return existing
    if uses_python_runtime(model.config):
        path = model_file(model.version_path, model.config)
    else:
        path = require_file(model.model_path, model.name)
    options = Options.parse(model.parameters, uses_python_runtime(model.config))
    state = ModelState(path, _platform(model), options, _format(model, path))
    model.state = state
    return state


@hookimpl
def auto_complete_config(model: Model) -> None:
    state = _state(model)
    torch = model.backend.state
    if state.format == "python":
        return  # Triton's Python-based runtime completes nothing, and says nothing
    if state.format != "export":
        model.backend.logger.warning(
            "skipping model configuration auto-complete for '%s': not supported for pytorch backend "
            "(%s); a torch.export program (model.pt2) can be auto-completed",
            model.name,
            "TorchScript" if state.format == "torchscript" else "AOTInductor package",
        )
        return
    state.exported = load_exported(torch, state.path, model.name)
    inputs, outputs = exported_signature(torch, state.exported)
    complete_config(model, inputs, outputs)


@hookimpl
def model_initialize(model: Model) -> None:
    state = _state(model)
    python_runtime = state.format == "python"
    state.options = Options.parse(model.parameters, python_runtime)  # the final config's parameters
    log = model.backend.logger
    report_unknown(model.parameters, model.name, log, python_runtime)
    apply_thread_counts(model.backend.state, state.options, model.name, log)
    if python_runtime:
        state.compile = compile_options(model.parameters, model.name)
        log.debug("'torch.compile' optional parameter(s) for '%s': %s", model.name, state.compile)
        if state.path.suffix == ".py":
            state.source = load_source(state.path, model.name)
        else:
            log.info("Loading '%s' as TorchScript", model.name)


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    model = instance.model
    torch = model.backend.state
    state: ModelState = model.state
    device = _device(torch, instance)
    program = _program(torch, model, state, instance, device)
    instance.state = InstanceState.create(
        torch, model.name, model.config, program, state.options, model.backend.logger
    )
    # On a GPU, inputs already there are taken in place (torch.from_dlpack), batches gathered there.
    instance.device_inputs = instance.state.on_gpu


@hookimpl
def gpu_support(backend: Backend) -> GpuSupport:
    reason = _no_cuda_reason(backend.state)
    return GpuSupport(usable=not reason, reason=reason)


def _no_cuda_reason(torch: Any) -> str:
    """Why this torch cannot run a model on a GPU ("" when it can)."""
    if torch.cuda.is_available():
        return ""
    if not torch.version.cuda:
        return f"this torch ({torch.__version__}) sees no CUDA device: install a CUDA build of torch"
    return (
        f"this torch ({torch.__version__}, CUDA {torch.version.cuda}) sees no CUDA device: "
        "torch.cuda.is_available() is False (check the NVIDIA driver and CUDA_VISIBLE_DEVICES)"
    )


def _device(torch: Any, instance: ModelInstance) -> Any:
    if instance.kind == "KIND_GPU":
        reason = _no_cuda_reason(torch)
        if reason:
            raise TritonError.unavailable(f"instance '{instance.name}' is KIND_GPU but {reason}")
        return torch.device("cuda", instance.device_id)
    return torch.device("cpu")


def _program(torch: Any, model: Model, state: ModelState, instance: ModelInstance, device: Any) -> Program:
    log = model.backend.logger
    kind = instance.kind
    with torch.inference_mode(state.options.inference_mode):
        if state.format == "python":
            return python_program(
                torch, state.path, state.source, model.name, model.config, device, kind, state.compile, log
            )
        if state.format == "aoti":
            return load_aoti(torch, state.path, model.name, model.config, device, kind)
        if state.format == "export":
            with state.lock:
                if state.exported is None:
                    state.exported = load_exported(torch, state.path, model.name)
            return exported_program(torch, state.exported, model.name, model.config, device, kind)
        if not state.options.weight_sharing:
            return load_torchscript(torch, state.path, model.name, model.config, device, kind, log)
        key = "model" if kind == "KIND_MODEL" else str(device)
        with state.lock:
            shared = state.shared.get(key)
            if shared is None:
                program = load_torchscript(torch, state.path, model.name, model.config, device, kind, log)
                state.shared[key] = program.module
                return program
        log.info("Reusing TorchScript model for instance '%s'", instance.name)
        return load_torchscript(torch, state.path, model.name, model.config, device, kind, log, loaded=shared)


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    state: InstanceState = instance.state
    return state.execute(requests, instance.device_memory)


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    state: InstanceState | None = instance.state
    instance.state = None
    if state is not None and state.on_gpu:
        state.torch.cuda.empty_cache()


@hookimpl
def model_finalize(model: Model) -> None:
    state: ModelState | None = model.state
    model.state = None
    if state is not None:
        forget_source(state.source)
