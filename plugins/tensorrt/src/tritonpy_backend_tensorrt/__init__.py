"""tritonpy-backend-tensorrt: TensorRT engines (``model.plan``), served as Triton's TensorRT backend does.

Registered under the entry-point group ``tritonpy.backends`` as ``tensorrt``
(Triton's ``platform: "tensorrt_plan"``). TensorRT and cuda-python are
imported in ``initialize``, not here, so listing backends stays cheap; when
either is missing, or there is no GPU, ``initialize`` still succeeds and each
``model.plan`` model is UNAVAILABLE with the reason and the extra to install,
so the rest of a repository serves.

Layout: ``_engine.py`` reads an engine into plain data; ``_config.py``
(auto-complete and config checks), ``_profiles.py`` (profile choice, request
shapes), ``_graphs.py`` (CUDA graph specs), ``_types.py`` and
``_availability.py`` (messages) work on that data only; ``_runtime.py``,
``_cuda.py`` and ``_instance.py`` are the parts that need TensorRT and a GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

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

from ._availability import not_gpu_message
from ._config import check_config, complete_config, group_profiles
from ._engine import read_engine
from ._instance import Instance
from ._runtime import TensorRT
from ._settings import Settings, load_plugins

__all__ = ["__version__"]
__version__ = "0.1.0"

log = logging.getLogger("tritonpy.backend.tensorrt")


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=("tensorrt_plan",),
        default_model_filename="model.plan",
        default_instance_kind="KIND_AUTO",  # KIND_GPU wherever TensorRT can run
        default_instance_count=1,
        parallel_instance_init=True,
    )


@hookimpl
def initialize(backend: Backend) -> None:
    settings = Settings.from_backend(backend)
    backend.state = TensorRT.probe()
    if backend.state.reason:
        log.info("tensorrt backend: %s", backend.state.reason)
        return
    backend.state.version_compatible = settings.version_compatible
    backend.state.plugins = load_plugins(settings.plugins)


@hookimpl
def gpu_support(backend: Backend) -> GpuSupport:
    reason = backend.state.reason
    return GpuSupport(usable=not reason, reason=reason)


@hookimpl
def auto_complete_config(model: Model) -> None:
    tensorrt: TensorRT = model.backend.state
    tensorrt.require()
    gpu = _first_gpu(model)
    engine = tensorrt.deserialize(model.name, _plan_on(tensorrt, model, gpu), gpu)
    info = read_engine(tensorrt.trt, engine)
    del engine
    for warning in complete_config(model.name, model.config, info):
        log.warning("%s", warning)
    check_config(model.name, model.config, info, group_profiles(model.config))
    model.state = info


@hookimpl
def model_initialize(model: Model) -> None:
    model.backend.state.require()
    # With cc_model_filenames each instance finds the plan for its GPU (instance_initialize).
    if not model.config.get("cc_model_filenames") and not model.model_path.is_file():
        raise TritonError.unavailable(f"unable to find '{model.model_path}' for model '{model.name}'")


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    model = instance.model
    tensorrt: TensorRT = model.backend.state
    tensorrt.require()
    if instance.kind != "KIND_GPU":
        raise TritonError.invalid_arg(not_gpu_message(model.name, instance.name, instance.kind))
    # The plan for this GPU's compute capability when cc_model_filenames names one (set by the core).
    instance.state = Instance.create(tensorrt, model.name, instance.model_path, model.config, instance)
    # Inputs in this GPU's memory (CUDA shared memory) are bound in place, not copied.
    instance.device_inputs = True


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    state: Instance = instance.state
    return state.execute(requests)


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    state: Instance | None = instance.state
    if state is not None:
        state.close()
    instance.state = None


@hookimpl
def model_finalize(model: Model) -> None:
    model.state = None


def _plan_on(tensorrt: TensorRT, model: Model, gpu: int) -> Path:
    """The plan auto-complete reads on ``gpu``: the one ``cc_model_filenames`` names for its
    compute capability, else the model's file (as Triton's TensorRT backend chooses)."""
    if tensorrt.cuda is None or not model.config.get("cc_model_filenames"):
        return model.model_path
    filename = model.cc_model_filename(tensorrt.cuda.compute_capability(gpu)[1])
    return model.version_path / filename if filename else model.model_path


def _first_gpu(model: Model) -> int:
    """The GPU auto-complete reads the plan on: the first instance group's first GPU (Triton's)."""
    for group in model.config.get("instance_group", []):
        gpus = group.get("gpus") or []
        if gpus:
            return int(gpus[0])
    return 0
