"""tritonpy-backend-onnx: ONNX models served with ONNX Runtime.

Registered under the entry-point group ``tritonpy.backends`` as ``onnxruntime``.
onnxruntime is imported in ``initialize``, not here, so listing backends stays
cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

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

from ._accelerators import cpu_accelerators
from ._autocomplete import complete_config, graph_tensors
from ._session import (
    InstanceSession,
    Runtime,
    custom_op_libraries,
    global_thread_pools,
    model_file,
    no_cuda_reason,
    run_options,
    session_options,
)

__all__ = ["__version__"]
__version__ = "0.1.0"


@hookimpl
def backend_info() -> BackendInfo:
    return BackendInfo(
        platforms=("onnxruntime_onnx",),
        default_model_filename="model.onnx",
        default_instance_kind="KIND_AUTO",
        default_instance_count=1,
        parallel_instance_init=True,
    )


@hookimpl
def initialize(backend: Backend) -> None:
    try:
        import onnxruntime
    except ImportError as exc:
        raise TritonError.unavailable(
            f"the onnxruntime backend needs the 'onnxruntime' package: {exc}"
        ) from None
    global_threads = backend.setting_bool("enable-global-threadpool", False)
    if global_threads:
        global_thread_pools(onnxruntime, backend.config, backend.logger)
    backend.state = Runtime(onnxruntime, global_threads)


@hookimpl
def gpu_support(backend: Backend) -> GpuSupport:
    reason = no_cuda_reason(backend.state.ort)
    return GpuSupport(usable=not reason, reason=reason)


@hookimpl
def auto_complete_config(model: Model) -> None:
    # Only the graph's signature is needed: a CPU session with no optimisation is the
    # cheapest way to read it without depending on the onnx package.
    runtime: Runtime = model.backend.state
    ort = runtime.ort
    path = model_file(model.model_path, model.name)
    options = ort.SessionOptions()
    # Every session of a process with global thread pools must use them (ORT's rule).
    options.use_per_session_threads = not runtime.global_threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    custom_op_libraries(options, model.config, model.name)  # a graph with custom operators needs them
    try:
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a corrupt or unsupported file
        raise TritonError.invalid_arg(
            f"unable to load model '{model.name}': onnxruntime failed to load {path.name}: {exc}"
        ) from None
    complete_config(
        model,
        graph_tensors(session.get_inputs()),
        graph_tensors(session.get_outputs()),
        model.backend.default_max_batch_size,
        graph_tensors(session.get_overridable_initializers()),
    )


@hookimpl
def model_initialize(model: Model) -> None:
    runtime: Runtime = model.backend.state
    ort = runtime.ort
    # With cc_model_filenames a GPU instance may load another file: each instance finds its own.
    path = model_file(model.model_path, model.name) if not model.config.get("cc_model_filenames") else None
    # Bad parameters fail the load once here rather than once per instance.
    session_options(ort, model.config, model.parameters, runtime.global_threads)
    run_options(ort, model.parameters)
    cpu_accelerators(model.config)  # the GPU ones are read for GPU instances only, as Triton
    model.state = path


@hookimpl
def instance_initialize(instance: ModelInstance) -> None:
    model = instance.model
    path = model.state or model_file(instance.model_path, model.name)
    state = InstanceSession.create(
        model.backend.state, path, model.name, model.config, model.parameters, instance
    )
    instance.state = state
    # A CUDA session binds its inputs where they lie: device inputs on its GPU are used in place.
    instance.device_inputs = state.io_binding


@hookimpl
def execute(instance: ModelInstance, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
    state: InstanceSession = instance.state
    return state.execute(requests, instance.host_allocator, instance.device_memory)


@hookimpl
def instance_finalize(instance: ModelInstance) -> None:
    instance.state = None


@hookimpl
def model_finalize(model: Model) -> None:
    model.state = None
