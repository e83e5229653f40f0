"""tritonpy-backend-fil: tree models (XGBoost, LightGBM, Treelite) as Triton's FIL backend serves them.

Registered under the entry-point group ``tritonpy.backends`` as ``fil``. A
repository written for Triton's FIL backend loads unchanged: ``backend:
"fil"``, the ``model_type`` parameter picking the format and the default
file (``xgboost.model``, ``xgboost.json``, ``xgboost.ubj``, ``model.txt``,
``checkpoint.tl``), ``input__0`` / ``output__0`` / ``treeshap_output``.
The tree libraries are optional extras, imported when a model loads, not
here, so listing backends stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonpy_sdk import (
    Backend,
    BackendInfo,
    GpuSupport,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    hookimpl,
)

from ._config import check_config, complete_config
from ._forest import Forest, load_forest, model_file
from ._instance import InstanceState
from ._params import Options

__all__ = ["__version__"]
__version__ = "0.1.0"


@dataclass(eq=False)
class ModelState:
    """Per model version: parameters, the file, and the forest read at load (shared facts)."""

    path: Path
    options: Options
    forest: Forest


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=(),
        # No single file: the version folder, where model_type picks the file (as in Triton).
        default_model_filename="",
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
        parallel_instance_init=True,
    )


@hookimpl
def initialize(backend: Backend) -> None:
    # The libraries are per model format and optional: a missing one fails only its models.
    backend.state = None


def _state(model: Model, *, log: bool = False) -> ModelState:
    """The model's state, made on first use (auto-complete runs before model_initialize)."""
    logger = model.backend.logger if log else None
    options = Options.parse(model.parameters, model.name, logger)
    existing = model.state
    if isinstance(existing, ModelState) and existing.options == options:
        return existing
    path = model_file(model.model_path, options, model.name)
    state = ModelState(path, options, load_forest(path, options, model.name))
    model.state = state
    return state


@hookimpl
def auto_complete_config(model: Model) -> None:
    state = _state(model)
    complete_config(model, state.forest, state.options)


@hookimpl
def model_initialize(model: Model) -> None:
    state = _state(model, log=True)  # the final config's parameters
    check_config(model.name, model.config, state.forest, state.options)
    if state.options.use_experimental_optimizations:
        model.backend.logger.info(
            "model '%s': use_experimental_optimizations has no effect here (%s is already the fast path)",
            model.name,
            state.forest.library,
        )


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    model = instance.model
    state: ModelState = model.state
    gpu: int | None = None
    if instance.kind == "KIND_GPU":
        # Only an explicit KIND_GPU group gets here without a GPU path (gpu_support makes
        # KIND_AUTO a CPU group then): Triton's FIL runs every model on a GPU, so a repository
        # written for it often says KIND_GPU; the model runs on the CPU, with a warning,
        # rather than failing to load.
        reason = _no_gpu_path(state.forest)
        if reason:
            model.backend.logger.warning(
                "instance '%s' is KIND_GPU but runs on the CPU: %s", instance.name, reason
            )
        else:
            gpu = instance.device_id
    # Each instance its own copy: no lock on the hot path, whatever the library's thread safety.
    forest = load_forest(state.path, state.options, model.name, gpu)
    instance.state = InstanceState.create(forest, state.options, model.config)


@hookimpl
def gpu_support(model: Model) -> GpuSupport:
    reason = _no_gpu_path(_state(model).forest)
    return GpuSupport(usable=not reason, reason=reason, kind_gpu_runs_on_cpu=True)


def _no_gpu_path(forest: Forest) -> str:
    """Why ``forest`` cannot run on a GPU here, or "" when it can (XGBoost with CUDA)."""
    if forest.library != "xgboost":
        return f"{forest.library} models run on the CPU here (only XGBoost models have a CUDA predictor)"
    import xgboost

    if not xgboost.build_info().get("USE_CUDA"):
        return (
            f"this XGBoost ({xgboost.__version__}) has no CUDA support; install the full build "
            "(pip install xgboost) instead of xgboost-cpu to use the GPU"
        )
    return ""


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    state: InstanceState = instance.state
    return state.execute(requests, instance.host_allocator)


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    instance.state = None


@hookimpl
def model_finalize(model: Model) -> None:
    model.state = None
