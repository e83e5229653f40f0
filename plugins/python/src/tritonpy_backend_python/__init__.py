"""tritonpy-backend-python: serve Triton Python-backend models (``model.py``) unchanged.

Each instance runs in its own stub process by default (see ``_process``);
``parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }``
runs it inside the server instead. Model parameters:

- ``EXECUTION_MODE``: ``process`` (default) or ``in_process``;
- ``EXECUTION_ENV_PATH``: the environment (folder or packed archive) whose
  interpreter runs the stub;
- ``EXECUTE_TIMEOUT_SECONDS``: kill and restart a stub whose ``execute`` runs
  longer (default: no limit);
- ``STUB_MEMORY_LIMIT_MB``: the stub's address-space limit (default: none);
- ``STUB_PIPELINE_DEPTH``: how many requests the server may have handed a
  stub at once while every instance is busy (default 2: the next one waits in
  the stub's socket, so the stub does not sleep between requests; 1: one at a
  time).

Backend settings (``--backend-config=python,<key>=<value>``):
``shm-default-byte-size`` (each stub's two shared-memory arenas, default 64 MiB,
mapped lazily), ``stub-timeout-seconds`` (start-up, default 120) and
``error-frames`` (``false``: a model's exception — in ``execute``, or in
``initialize`` as a load error — reaches clients without its frames, which go to
the log; default ``true``, Triton's format) and ``cuda-ipc-byte-size`` (each
stub's and the server's device arena per GPU for GPU tensors crossing through
CUDA IPC, default 64 MiB, allocated at the first GPU tensor; 0: GPU tensors cross
as host data).
"""

from __future__ import annotations

import ast
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._host import error_text
from tritonpy_sdk import (
    Backend,
    BackendInfo,
    DirectCall,
    ExecuteComplete,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    TritonError,
    hookimpl,
)

from ._convert import strip_frames
from ._environment import default_environment, resolve_environment
from ._inprocess import InProcessInstance, InProcessRuntime
from ._process import StubProcess, StubSettings, auto_complete_in_stub
from ._services import ServerServices

__all__ = ["pb_utils"]

_MODES = ("process", "in_process")


@dataclass
class _BackendState:
    services: ServerServices
    #: What ``pb_utils`` reaches from this server's in-process models.
    runtime: InProcessRuntime
    shm_bytes: int
    start_timeout_s: float
    error_frames: bool = True
    cuda_ipc_bytes: int = 64 << 20


@dataclass
class _ModelState:
    file: Path
    in_process: bool
    settings: StubSettings


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        default_model_filename="model.py",
        # As Triton's python backend (built with GPU support) prefers: KIND_GPU on a GPU
        # host. No gpu_support hook: model.py decides what runs where, so a GPU is usable.
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
        parallel_instance_init=True,
        # As Triton's: a model that batches chooses the dynamic batcher itself
        # (pb_utils.ModelConfig.set_dynamic_batching), or runs its requests one by one.
        autofill_dynamic_batching=False,
    )


def _int_setting(config: dict[str, str], key: str, default: int) -> int:
    try:
        return int(config.get(key, default))
    except ValueError:
        raise TritonError.invalid_arg(
            f"backend setting '{key}' must be an integer, got '{config[key]}'"
        ) from None


@hookimpl
def initialize(backend: Backend) -> None:
    services = ServerServices(backend.server, backend.logger)
    backend.state = _BackendState(
        services,
        InProcessRuntime(services),
        shm_bytes=max(1 << 20, _int_setting(backend.config, "shm-default-byte-size", 64 << 20)),
        start_timeout_s=float(_int_setting(backend.config, "stub-timeout-seconds", 120)),
        error_frames=backend.setting_bool("error-frames", True),
        cuda_ipc_bytes=max(0, _int_setting(backend.config, "cuda-ipc-byte-size", 64 << 20)),
    )


@hookimpl
def finalize(backend: Backend) -> None:
    """The server stopped: threads its in-process models started reach no server any more
    (pb_utils says so, as outside a server), rather than a stopped one."""
    if isinstance(backend.state, _BackendState):
        _runtime.uninstall(backend.state.runtime)


def _state(backend: Backend) -> _BackendState:
    state = backend.state
    assert isinstance(state, _BackendState), "initialize runs before any model hook"
    return state


def _model_file(model: Model) -> Path:
    backend = model.backend
    if backend.name != "python" and backend.directory is not None:
        return (backend.directory / "model.py").resolve()  # a Python-based backend
    filename = model.config.get("default_model_filename") or "model.py"
    return (model.version_path / filename).resolve()


def _settings(model: Model, state: _BackendState) -> tuple[bool, StubSettings]:
    params = model.parameters
    mode = params.get("EXECUTION_MODE", "process").strip() or "process"
    if mode not in _MODES:
        raise TritonError.invalid_arg(
            f"model '{model.name}': parameter EXECUTION_MODE must be one of {', '.join(_MODES)}, got '{mode}'"
        )
    env_path = params.get("EXECUTION_ENV_PATH", "").strip()
    environment = resolve_environment(env_path, model.repository_path) if env_path else default_environment()

    def number(key: str) -> float:
        raw = params.get(key, "").strip()
        try:
            value = float(raw) if raw else 0.0
        except ValueError:
            raise TritonError.invalid_arg(
                f"model '{model.name}': parameter {key} must be a number, got '{raw}'"
            ) from None
        if value < 0:
            raise TritonError.invalid_arg(f"model '{model.name}': parameter {key} must not be negative")
        return value

    settings = StubSettings(
        environment,
        shm_bytes=state.shm_bytes,
        start_timeout_s=state.start_timeout_s,
        execute_timeout_s=number("EXECUTE_TIMEOUT_SECONDS"),
        memory_limit_mb=int(number("STUB_MEMORY_LIMIT_MB")),
        pipeline_depth=_pipeline_depth(model),
        error_frames=state.error_frames,
        cuda_ipc_bytes=state.cuda_ipc_bytes,
    )
    return mode == "in_process", settings


#: The largest ``STUB_PIPELINE_DEPTH``: past 2 a stub rarely finds more waiting to use,
#: and every request sent ahead is bound to its instance.
_MAX_PIPELINE_DEPTH = 16


def _pipeline_depth(model: Model) -> int:
    raw = model.parameters.get("STUB_PIPELINE_DEPTH", "").strip()
    if not raw:
        return 2
    try:
        depth = int(raw)
    except ValueError:
        depth = 0
    if not 1 <= depth <= _MAX_PIPELINE_DEPTH:
        raise TritonError.invalid_arg(
            f"model '{model.name}': parameter STUB_PIPELINE_DEPTH must be a whole number from 1 to "
            f"{_MAX_PIPELINE_DEPTH}, got '{raw}'"
        )
    return depth


#: What Triton's Python backend refuses in a model or instance name (since 25.08).
_INVALID_NAME_CHARS = frozenset(";|&$`<>()[]{}\\\"'*?~#!")


def check_stub_name(name: str) -> None:
    """Refuse a model or instance name Triton's Python backend refuses, in its words."""
    if not name or not _INVALID_NAME_CHARS.isdisjoint(name):
        raise TritonError.invalid_arg("Invalid stub name: contains invalid characters")


@hookimpl
def auto_complete_config(model: Model) -> None:
    check_stub_name(model.name)
    path = _model_file(model)
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return  # reported by model_initialize
    if not _may_auto_complete(source):
        return  # no stub start for models that cannot auto-complete
    state = _state(model.backend)
    in_process, settings = _settings(model, state)
    if in_process:
        from triton_python_backend_utils._host import auto_complete

        try:
            completed = auto_complete(path, model.config)
        except Exception as exc:  # the model's exception, as Triton reports it
            text = error_text(exc)
            raise TritonError.internal(
                strip_frames(model.name, text, "auto_complete_config", settings.error_frames)
            ) from None
    else:
        completed = auto_complete_in_stub(path, model.config, settings, state.services)
    model.config.clear()
    model.config.update(completed)


def _may_auto_complete(source: str) -> bool:
    """Whether a model file's ``TritonPythonModel`` may have an ``auto_complete_config``:
    the file names it, or the class is not a plain one of its own (it is imported, as
    in ``from common_model import *``, or derives from another class)."""
    if "auto_complete_config" in source:
        return True
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False  # model_initialize says what is wrong with the file
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            plain = all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases)
            return not plain or bool(node.keywords)
    return True


@hookimpl
def model_initialize(model: Model) -> None:
    check_stub_name(model.name)
    path = _model_file(model)
    if not path.is_file():
        raise TritonError.unavailable(
            f"Failed to preinitialize Python stub: Python model file not found in '{path}'"
        )
    in_process, settings = _settings(model, _state(model.backend))
    model.state = _ModelState(path, in_process, settings)


#: Triton's switch for a Python model's inputs: "no" lets them stay on the GPU.
FORCE_CPU_ONLY_INPUT_TENSORS = "FORCE_CPU_ONLY_INPUT_TENSORS"


def takes_gpu_inputs(instance: ModelInstance) -> bool:
    """Whether an instance gets GPU inputs as GPU tensors (``pb_utils.Tensor`` with
    ``is_cpu()`` false): a KIND_GPU instance of a model whose parameter
    ``FORCE_CPU_ONLY_INPUT_TENSORS`` is ``no`` (Triton's default, ``yes``, copies
    every input to the CPU). In process they are handed over in place; a stub
    process takes them through CUDA IPC when it can (``uses_cuda_ipc``)."""
    value = instance.model.parameters.get(FORCE_CPU_ONLY_INPUT_TENSORS, "yes")
    return instance.kind == "KIND_GPU" and value.strip().lower() in ("no", "false", "0", "off")


def _args(instance: ModelInstance) -> dict[str, str]:
    model = instance.model
    return {
        "model_config": json.dumps(model.config),
        "model_instance_kind": instance.kind.removeprefix("KIND_"),
        "model_instance_name": instance.name,
        "model_instance_device_id": str(instance.device_id),
        "model_repository": os.path.abspath(model.repository_path),
        "model_version": str(model.version),
        "model_name": model.name,
    }


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    check_stub_name(instance.name)
    model = instance.model
    mstate = model.state
    assert isinstance(mstate, _ModelState)
    outputs = [o["name"] for o in model.config.get("output", [])]
    bstate = _state(model.backend)
    services = bstate.services
    if mstate.in_process:
        if not isinstance(_runtime.installed(), InProcessRuntime):
            # Threads a model starts itself run in no model's context: they reach the
            # first server with in-process models (each call into a model reaches its own).
            _runtime.install(bstate.runtime)
        try:
            instance.state = InProcessInstance(
                bstate.runtime,
                instance.name,
                mstate.file,
                _args(instance),
                outputs,
                mstate.settings.error_frames,
            )
        except Exception as exc:
            raise TritonError.internal(
                strip_frames(instance.name, error_text(exc), "initialize", mstate.settings.error_frames)
            ) from None
        instance.device_inputs = takes_gpu_inputs(instance)
        # ``predict`` requests may come as arrays (an async execute runs elsewhere).
        instance.direct = not instance.state.host.is_async
        return
    stub = StubProcess(instance.name, mstate.file, _args(instance), outputs, mstate.settings, services)
    stub.device_memory = instance.device_memory
    stub.start()
    instance.state = stub
    instance.nowait = stub.nowait
    instance.pipeline_depth = stub.pipeline_depth
    instance.device_inputs = uses_cuda_ipc(instance, stub.gpu)


def uses_cuda_ipc(instance: ModelInstance, link_has_it: bool) -> bool:
    """Whether a stub instance takes GPU inputs through CUDA IPC: it takes GPU inputs
    (``takes_gpu_inputs``) and its link has CUDA IPC (a GPU and cuda-python on both
    sides, ``cuda-ipc-byte-size`` not 0). Otherwise its inputs cross as host data."""
    return link_has_it and takes_gpu_inputs(instance)


@hookimpl
def execute(instance: ModelInstance, requests: list[InferenceRequest]) -> list[InferenceResponse] | None:
    runner: Any = instance.state
    # The core hands a list of its own (copied only when it is not one).
    return runner.execute(requests if type(requests) is list else list(requests))  # type: ignore[no-any-return]


@hookimpl
def execute_direct(instance: ModelInstance, call: DirectCall) -> Any:
    """One ``predict`` request of an in-process instance, as arrays."""
    return instance.state.execute_direct(call)


@hookimpl
def execute_nowait(
    instance: ModelInstance, requests: list[InferenceRequest], complete: ExecuteComplete
) -> None:
    """A stub's batch, sent without waiting: its reader thread completes it."""
    stub: StubProcess = instance.state
    # The core hands a list of its own (copied only when it is not one).
    stub.execute_nowait(requests if type(requests) is list else list(requests), complete)


@hookimpl
def instance_ready(instance: ModelInstance) -> bool:
    """Alive and, when the model defines ``is_ready()``, what it says (as in Triton)."""
    runner: Any = instance.state
    return runner is not None and bool(runner.is_ready())


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    runner: Any = instance.state
    if runner is not None:
        runner.stop(_time_left(instance.model.backend))
    instance.state = None


def _time_left(backend: Backend) -> float:
    """Seconds left to finalize: until the server's exit deadline while it stops
    (``--exit-timeout-secs``), else the stub's own 30 s."""
    deadline = backend.server.exit_deadline() if backend.server is not None else None
    return 30.0 if deadline is None else max(0.0, deadline - time.monotonic())
