"""One ONNX Runtime session per model instance: options, providers, execution."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tritonpy_sdk import (
    BatchOutputs,
    DataType,
    DeviceArray,
    DeviceMemory,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    TritonError,
    batch_input_array,
    gather_inputs,
    gather_ragged,
    gather_tensor,
    outputs_to_compute,
    scatter_device_outputs,
    wanted_on_device,
)

from ._accelerators import CUDA, execution_providers, lacks, unused_providers
from ._autocomplete import check_config, graph_tensors
from ._binding import DeviceOutput, Feed, run_bound
from ._params import bool_param, int_param
from ._types import config_type


@dataclass(frozen=True, slots=True)
class Runtime:
    """The backend's state: the onnxruntime module, and whether its sessions share the
    process's global thread pools (``--backend-config=onnxruntime,enable-global-threadpool=1``)."""

    ort: Any
    global_threads: bool = False


def global_thread_pools(ort: Any, settings: Mapping[str, str], log: logging.Logger) -> None:
    """Create onnxruntime's global thread pools, sized by the backend settings
    ``intra_op_thread_count`` and ``inter_op_thread_count`` (0 or absent: ORT's default).
    They last as long as the process: a second server in it keeps the first one's."""
    sizes = []
    for key in ("intra_op_thread_count", "inter_op_thread_count"):
        raw = settings.get(key, "").strip() or "0"
        if not raw.isdigit():
            raise TritonError.invalid_arg(
                f"backend setting '{key}' must be an integer >= 0, got '{settings[key]}'"
            )
        sizes.append(int(raw))
    from onnxruntime.capi import _pybind_state

    try:
        _pybind_state.set_global_thread_pool_sizes(sizes[0], sizes[1])
    except Exception as exc:  # ORT's Fail: pools made earlier in this process are never replaced
        log.warning("onnxruntime's global thread pools are kept as they are: %s", exc)
        return
    log.info("onnxruntime global thread pools: %d intra-op, %d inter-op threads (0: ORT's default)", *sizes)


def session_options(
    ort: Any, config: dict[str, Any], params: dict[str, str], global_threads: bool = False
) -> Any:
    """SessionOptions from Triton's onnxruntime model parameters and graph level. With
    ``global_threads`` the session runs on the global thread pools, and the model's own
    thread counts are ignored, as in Triton."""
    options = ort.SessionOptions()
    if global_threads:
        options.use_per_session_threads = False
    else:
        intra = int_param(params, "intra_op_thread_count")
        if intra is not None:
            if intra < 0:
                raise TritonError.invalid_arg("model parameter 'intra_op_thread_count' must be >= 0")
            options.intra_op_num_threads = intra
        inter = int_param(params, "inter_op_thread_count")
        if inter is not None:
            if inter < 0:
                raise TritonError.invalid_arg("model parameter 'inter_op_thread_count' must be >= 0")
            options.inter_op_num_threads = inter
    mode = int_param(params, "execution_mode")
    if mode is not None:
        if mode not in (0, 1):
            raise TritonError.invalid_arg(
                f"model parameter 'execution_mode' must be 0 (sequential) or 1 (parallel), got {mode}"
            )
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if mode == 1 else ort.ExecutionMode.ORT_SEQUENTIAL
        )
    arena = bool_param(params, "enable_mem_arena")
    if arena is not None:
        options.enable_cpu_mem_arena = arena
    pattern = bool_param(params, "enable_mem_pattern")
    if pattern is not None:
        options.enable_mem_pattern = pattern
    level = _graph_level(config)
    levels = ort.GraphOptimizationLevel
    # Triton's mapping of optimization.graph.level: -1 basic, 1 extended, 2 none, else all.
    options.graph_optimization_level = {
        -1: levels.ORT_ENABLE_BASIC,
        1: levels.ORT_ENABLE_EXTENDED,
        2: levels.ORT_DISABLE_ALL,
    }.get(level, levels.ORT_ENABLE_ALL)
    device_initializers = params.get("session.use_device_allocator_for_initializers")
    if device_initializers is not None:
        options.add_session_config_entry("session.use_device_allocator_for_initializers", device_initializers)
    return options


def _graph_level(config: dict[str, Any]) -> int:
    value = ((config.get("optimization") or {}).get("graph") or {}).get("level", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise TritonError.invalid_arg(
            f"optimization.graph.level must be an integer (-1, 0, 1 or 2), got {value!r}"
        ) from None


#: The model parameter Triton passes to every run as an ORT run config entry.
ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage"


def run_options(ort: Any, params: dict[str, str]) -> Any:
    """RunOptions for every run of an instance: ``memory.enable_memory_arena_shrinkage``."""
    options = ort.RunOptions()
    value = params.get(ARENA_SHRINKAGE)
    if value:
        for device in value.split(";"):
            kind, _, index = device.strip().partition(":")
            if kind not in ("cpu", "gpu") or not index.isdigit():
                raise TritonError.invalid_arg(
                    f"model parameter '{ARENA_SHRINKAGE}' must list devices as 'cpu:0;gpu:0', got '{value}'"
                )
        options.add_run_config_entry(ARENA_SHRINKAGE, value)
    return options


def no_cuda_reason(ort: Any) -> str:
    """Why this onnxruntime cannot run a model on a GPU ("" when it can): KIND_GPU
    instances run on its CUDAExecutionProvider, which only onnxruntime-gpu has."""
    available = ort.get_available_providers()
    return "" if CUDA in available else lacks(available, ort.__version__, CUDA)


def providers(ort: Any, instance: ModelInstance, config: dict[str, Any], params: dict[str, str]) -> list[Any]:
    """The execution providers, with their options, for an instance's kind and device and
    the config's execution accelerators (``_accelerators.py``)."""
    return execution_providers(
        ort.get_available_providers(),
        ort.__version__,
        instance.name,
        instance.kind,
        instance.device_id,
        config,
        params,
    )


def custom_op_libraries(options: Any, config: dict[str, Any], model_name: str) -> None:
    """Register ``model_operations.op_library_filename``'s libraries of custom operators
    with ``options`` (before the session that needs them is made)."""
    for library in (config.get("model_operations") or {}).get("op_library_filename", []):
        try:
            options.register_custom_ops_library(str(library))
        except Exception as exc:  # ORT's own error types: a missing or incompatible library
            raise TritonError.invalid_arg(
                f"unable to load model '{model_name}': onnxruntime failed to register the custom "
                f"operator library '{library}': {exc}"
            ) from None


def model_file(path: Path, model_name: str) -> Path:
    """The .onnx file: ``path`` itself, or ``model.onnx`` inside a model directory.

    A model directory (Triton's layout for models with external data) holds
    ``model.onnx`` and its weight files; external-data files may also sit beside
    a plain ``model.onnx``. Either way ORT finds them relative to the file.
    """
    if path.is_dir():
        path = path / "model.onnx"
    if not path.is_file():
        raise TritonError.unavailable(f"unable to find '{path}' for model '{model_name}'")
    return path


@dataclass(slots=True)
class InstanceSession:
    """An instance's session and what ``execute`` needs, computed once."""

    session: Any
    run_options: Any
    output_names: tuple[str, ...]
    #: Each output's data type, so responses are built without inspecting arrays.
    output_types: dict[str, DataType]
    string_inputs: frozenset[str]
    string_outputs: frozenset[str]
    batching: bool
    invalid_argument: type[BaseException]
    #: Inputs that are scalars in a non-batching model: dims [1] in the config, shape () in the graph.
    scalar_inputs: frozenset[str] = frozenset()
    #: Outputs that are scalars in a non-batching model, with the shape the config gives them.
    scalar_outputs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    ragged: frozenset[str] = frozenset()
    #: (target name, kind, source inputs, numpy dtype) of the config's batch_input entries.
    batch_inputs: tuple[tuple[str, str, tuple[str, ...], Any], ...] = ()
    #: Run through IOBinding (``_binding.py``), inputs bound where they lie: set for
    #: CUDA sessions without string tensors, which take device inputs in place;
    #: the others use ``run``.
    io_binding: bool = False
    #: The instance's GPU (KIND_GPU), where bound outputs may stay (``device_outputs``).
    device_id: int = 0
    #: ORT's name of that device: ``"cuda"`` (``"cpu"`` only in tests, standing in for it).
    output_device: str = "cuda"
    #: How many output tensors this instance handed out on its GPU (never through the host).
    device_outputs: int = 0
    #: Outputs written flat for the whole batch, cut back by the requests' input shapes.
    batch_outputs: BatchOutputs = field(default_factory=BatchOutputs)

    @classmethod
    def create(
        cls,
        runtime: Runtime,
        path: Path,
        model_name: str,
        config: dict[str, Any],
        params: dict[str, str],
        instance: ModelInstance,
    ) -> InstanceSession:
        ort = runtime.ort
        options = session_options(ort, config, params, runtime.global_threads)
        custom_op_libraries(options, config, model_name)
        provider_list = providers(ort, instance, config, params)
        run = run_options(ort, params)
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=provider_list)
        except Exception as exc:  # ORT raises its own exception types for bad files
            raise TritonError.invalid_arg(
                f"unable to load model '{model_name}': onnxruntime failed to load {path.name}: {exc}"
            ) from None
        unused = unused_providers(provider_list, session.get_providers())
        if unused:
            # ORT falls back to the CPU quietly when a provider's libraries fail to load.
            raise TritonError.unavailable(
                f"instance '{instance.name}': onnxruntime could not use the {' and the '.join(unused)} "
                "(check the libraries it needs: CUDA and cuDNN for CUDA, TensorRT's for TensorRT)"
            )
        if len(provider_list) > 1:  # say where it runs when that is not the CPU provider alone
            instance.model.backend.logger.info(
                "instance '%s' of model '%s' runs on onnxruntime's %s",
                instance.name,
                model_name,
                ", ".join(session.get_providers()),
            )
        graph_in = graph_tensors(session.get_inputs())
        overridable = graph_tensors(session.get_overridable_initializers())
        graph_out = graph_tensors(session.get_outputs())
        check_config(model_name, config, graph_in, graph_out, overridable)
        from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

        batching = int(config.get("max_batch_size", 0) or 0) > 0
        # Initializers a request may override are inputs too (optional ones).
        all_in = graph_in + overridable
        configured_out = {o["name"]: o for o in config.get("output", [])}
        return cls(
            session=session,
            run_options=run,
            output_names=tuple(name for name, _, _ in graph_out),
            output_types={
                name: DataType.from_config(config_type(t) or "TYPE_FP32") for name, t, _ in graph_out
            },
            string_inputs=frozenset(n for n, t, _ in all_in if t == "tensor(string)"),
            string_outputs=frozenset(n for n, t, _ in graph_out if t == "tensor(string)"),
            batching=batching,
            invalid_argument=InvalidArgument,
            scalar_inputs=frozenset(n for n, _, d in all_in if not d and not batching),
            scalar_outputs=tuple(
                (n, tuple(int(x) for x in configured_out.get(n, {}).get("dims", [1])))
                for n, _, d in graph_out
                if not d and not batching
            ),
            ragged=frozenset(i["name"] for i in config.get("input", []) if i.get("allow_ragged_batch")),
            # ORT binds no string tensor (1.32: "Only binding non-string Tensors ..."):
            # a model with strings runs through run(), its inputs copied to the host.
            io_binding=instance.kind == "KIND_GPU"
            and not any(t == "tensor(string)" for _, t, _ in (*all_in, *graph_out)),
            device_id=instance.device_id,
            batch_inputs=tuple(
                (
                    target,
                    b.get("kind", "BATCH_ELEMENT_COUNT"),
                    tuple(b.get("source_input", [])),
                    DataType.from_config(b.get("data_type", "TYPE_FP32")).numpy_dtype,
                )
                for b in config.get("batch_input", [])
                for target in b.get("target_name", [])
            ),
            batch_outputs=BatchOutputs.from_config(config),
        )

    def execute(
        self,
        requests: Sequence[InferenceRequest],
        allocator: Any = None,
        device_memory: DeviceMemory | None = None,
    ) -> list[InferenceResponse]:
        """Run ``requests`` as one batch; ``allocator`` (pinned memory) holds inputs
        gathered on the host, ``device_memory`` those gathered on the GPU."""
        if len(requests) > 1 and not self.batching:
            return [self.execute([r], allocator, device_memory)[0] for r in requests]
        first = requests[0]
        if len(requests) > 1:
            _check_same_inputs(requests)
        feeds: dict[str, Feed] = {}
        for name in first.inputs:  # optional inputs a request leaves out are simply not fed
            if name in self.ragged:
                array = gather_ragged(requests, name)
            elif self.io_binding:
                tensor = gather_tensor(requests, name, device_memory=device_memory, allocator=allocator)
                if tensor.device is not None:  # bound where it lies, read in place
                    device = tensor.device
                    feeds[name] = device.reshape(()) if name in self.scalar_inputs else device
                    continue
                array = tensor.data
            elif len(requests) == 1:
                array = first.inputs[name].data
            else:
                array = gather_inputs(requests, name, allocator=allocator)
            if name in self.string_inputs:
                array = _to_str(array)
            if name in self.scalar_inputs:
                array = array.reshape(())
            feeds[name] = array
        for target, kind, sources, dtype in self.batch_inputs:
            feeds[target] = batch_input_array(kind, requests, sources, dtype)
        wanted = outputs_to_compute(requests, self.output_names)
        on_device = self.on_device(requests, wanted) if self.io_binding else None
        try:
            if self.io_binding:
                results = run_bound(self.session, self.run_options, feeds, wanted, on_device)
            else:
                results = self.session.run(wanted, feeds, self.run_options)
        except self.invalid_argument as exc:
            raise TritonError.invalid_arg(f"onnxruntime: {exc}") from None
        except Exception as exc:  # any other ORT failure is the model's, not the client's
            raise TritonError.internal(f"onnxruntime: {exc}") from None
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        held: dict[str, DeviceArray] = {}  # the outputs left on the GPU
        for name, value in zip(wanted, results):
            if isinstance(value, DeviceArray):
                held[name] = value
            else:
                arrays[name] = value
        for name, shape in self.scalar_outputs:
            if name in arrays:
                arrays[name] = arrays[name].reshape(shape)
            elif name in held:
                held[name] = held[name].reshape(shape)
        for name in self.string_outputs.intersection(arrays):
            arrays[name] = _to_bytes(arrays[name])
        responses = self.batch_outputs.responses(requests, arrays, self.output_types)
        if held:
            self.device_outputs += scatter_device_outputs(requests, responses, held, self.output_types)
        return responses

    def on_device(
        self, requests: Sequence[InferenceRequest], wanted: Sequence[str]
    ) -> dict[str, DeviceOutput]:
        """The ``wanted`` outputs to bind on the instance's GPU: those every request of
        the batch wants there (``InferenceRequest.output_device``). A mixed batch gets
        the output in host memory, for every request (one binding per output); so do
        strings and BF16 (DLPack carries no BF16 that every reader takes)."""
        on_device: dict[str, DeviceOutput] = {}
        for name in wanted:
            if name in self.string_outputs or self.output_types[name] is DataType.BF16:
                continue
            if name in self.batch_outputs:  # cut up on the host
                continue
            if wanted_on_device(requests, name, self.device_id) == len(requests):
                dtype = self.output_types[name].numpy_dtype
                on_device[name] = DeviceOutput(self.output_device, self.device_id, dtype)
        return on_device


def _check_same_inputs(requests: Sequence[InferenceRequest]) -> None:
    names = requests[0].inputs.keys()
    for r in requests[1:]:
        if r.inputs.keys() != names:
            odd = sorted(names ^ r.inputs.keys())
            raise TritonError.invalid_arg(
                f"optional input(s) {', '.join(repr(n) for n in odd)} given by only some requests "
                "of a batch: requests batched together must carry the same inputs"
            )


def _to_str(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """BYTES (object array of bytes) as ORT wants string tensors: an object array of str."""
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [
        v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in array.reshape(-1)
    ]
    return out


def _to_bytes(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """ORT's string output (object array of str) as BYTES: an object array of bytes."""
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in array.reshape(-1)]
    return out
