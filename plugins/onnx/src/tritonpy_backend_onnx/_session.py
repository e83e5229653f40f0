"""One ONNX Runtime session per model instance: options, providers, execution."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    batch_input_array,
    batch_sizes,
    gather_inputs,
    gather_ragged,
    scatter_output,
)

from ._types import config_type


def _int_param(params: dict[str, str], key: str) -> int | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise TritonError.invalid_arg(f"model parameter '{key}' must be an integer, got '{value}'") from None


def _bool_param(params: dict[str, str], key: str) -> bool | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise TritonError.invalid_arg(f"model parameter '{key}' must be true or false, got '{value}'")


def session_options(ort: Any, config: dict[str, Any], params: dict[str, str]) -> Any:
    """SessionOptions from Triton's onnxruntime model parameters and graph level."""
    options = ort.SessionOptions()
    intra = _int_param(params, "intra_op_thread_count")
    if intra is not None:
        if intra < 0:
            raise TritonError.invalid_arg("model parameter 'intra_op_thread_count' must be >= 0")
        options.intra_op_num_threads = intra
    inter = _int_param(params, "inter_op_thread_count")
    if inter is not None:
        if inter < 0:
            raise TritonError.invalid_arg("model parameter 'inter_op_thread_count' must be >= 0")
        options.inter_op_num_threads = inter
    mode = _int_param(params, "execution_mode")
    if mode is not None:
        if mode not in (0, 1):
            raise TritonError.invalid_arg(
                f"model parameter 'execution_mode' must be 0 (sequential) or 1 (parallel), got {mode}"
            )
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if mode == 1 else ort.ExecutionMode.ORT_SEQUENTIAL
        )
    arena = _bool_param(params, "enable_mem_arena")
    if arena is not None:
        options.enable_cpu_mem_arena = arena
    pattern = _bool_param(params, "enable_mem_pattern")
    if pattern is not None:
        options.enable_mem_pattern = pattern
    level = int(((config.get("optimization") or {}).get("graph") or {}).get("level", 0) or 0)
    levels = ort.GraphOptimizationLevel
    # Triton's mapping: -1 basic, 1 extended, anything else everything.
    options.graph_optimization_level = {
        -1: levels.ORT_ENABLE_BASIC,
        1: levels.ORT_ENABLE_EXTENDED,
    }.get(level, levels.ORT_ENABLE_ALL)
    return options


def providers(ort: Any, instance: ModelInstance) -> list[Any]:
    """The execution providers for an instance's kind and device."""
    if instance.kind == "KIND_GPU":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise TritonError.unavailable(
                f"instance '{instance.name}' is KIND_GPU but this onnxruntime has no "
                "CUDAExecutionProvider: install onnxruntime-gpu (pip install 'tritonpy-backend-onnx[gpu]')"
            )
        return [("CUDAExecutionProvider", {"device_id": instance.device_id}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def model_file(path: Path) -> Path:
    """The .onnx file: ``path`` itself, or ``model.onnx`` inside a model directory."""
    if path.is_dir():
        inner = path / "model.onnx"
        if inner.is_file():
            return inner
        raise TritonError.invalid_arg(f"model directory {path} holds no model.onnx")
    if not path.is_file():
        raise TritonError.invalid_arg(f"model file {path} does not exist")
    return path


@dataclass
class InstanceSession:
    """An instance's session and what ``execute`` needs, computed once."""

    session: Any
    input_names: tuple[str, ...]
    string_inputs: frozenset[str]
    output_names: tuple[str, ...]
    string_outputs: frozenset[str]
    batching: bool
    invalid_argument: type[BaseException]
    ragged: frozenset[str] = frozenset()
    #: (target name, kind, source inputs, numpy dtype) of the config's batch_input entries.
    batch_inputs: tuple[tuple[str, str, tuple[str, ...], Any], ...] = ()

    @classmethod
    def create(
        cls,
        ort: Any,
        path: Path,
        options: Any,
        provider_list: list[Any],
        batching: bool,
        config: dict[str, Any] | None = None,
    ) -> InstanceSession:
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=provider_list)
        except Exception as exc:  # ORT raises its own exception types for bad files
            raise TritonError.invalid_arg(f"onnxruntime failed to load {path.name}: {exc}") from None
        # Initializers a request may override are inputs too (optional ones).
        inputs = session.get_inputs() + session.get_overridable_initializers()
        outputs = session.get_outputs()
        from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

        return cls(
            session=session,
            input_names=tuple(i.name for i in inputs),
            string_inputs=frozenset(i.name for i in inputs if config_type(i.type) == "TYPE_STRING"),
            output_names=tuple(o.name for o in outputs),
            string_outputs=frozenset(o.name for o in outputs if config_type(o.type) == "TYPE_STRING"),
            batching=batching,
            invalid_argument=InvalidArgument,
            ragged=frozenset(
                i["name"] for i in (config or {}).get("input", []) if i.get("allow_ragged_batch")
            ),
            batch_inputs=tuple(
                (
                    target,
                    b.get("kind", "BATCH_ELEMENT_COUNT"),
                    tuple(b.get("source_input", [])),
                    DataType.from_config(b.get("data_type", "TYPE_FP32")).numpy_dtype,
                )
                for b in (config or {}).get("batch_input", [])
                for target in b.get("target_name", [])
            ),
        )

    def execute(self, requests: Sequence[InferenceRequest], allocator: Any = None) -> list[InferenceResponse]:
        """Run ``requests`` as one batch; ``allocator`` (pinned memory) holds gathered inputs."""
        if len(requests) > 1 and not self.batching:
            return [self.execute([r], allocator)[0] for r in requests]
        wanted = self._wanted(requests)
        feeds: dict[str, np.ndarray[Any, Any]] = {}
        for name in self.input_names:
            given = sum(1 for r in requests if name in r.inputs)
            if given == 0:
                continue  # an optional input nobody sent
            if given != len(requests):
                raise TritonError.invalid_arg(
                    f"optional input '{name}' is given by only some requests of a batch"
                )
            if name in self.ragged:
                array = gather_ragged(requests, name)
            else:
                array = gather_inputs(requests, name, allocator=allocator)
            if name in self.string_inputs:
                array = _to_str(array)
            feeds[name] = array
        for target, kind, sources, dtype in self.batch_inputs:
            feeds[target] = batch_input_array(kind, requests, sources, dtype)
        try:
            results = self.session.run(list(wanted), feeds)
        except self.invalid_argument as exc:
            raise TritonError.invalid_arg(f"onnxruntime: {exc}") from None
        except Exception as exc:  # any other ORT failure is the model's, not the client's
            raise TritonError.internal(f"onnxruntime: {exc}") from None
        sizes = batch_sizes(requests)
        per_output: dict[str, list[np.ndarray[Any, Any]]] = {}
        for name, array in zip(wanted, results):
            if name in self.string_outputs:
                array = _to_bytes(array)
            per_output[name] = scatter_output(array, sizes)
        return [
            InferenceResponse({name: Tensor.from_numpy(name, parts[i]) for name, parts in per_output.items()})
            for i in range(len(requests))
        ]

    def _wanted(self, requests: Sequence[InferenceRequest]) -> tuple[str, ...]:
        if any(not r.requested_outputs for r in requests):
            return self.output_names
        names = {o.name for r in requests for o in r.requested_outputs}
        return tuple(n for n in self.output_names if n in names)


def _to_str(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [
        v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in array.reshape(-1)
    ]
    return out


def _to_bytes(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.empty(array.shape, dtype=object)
    out.reshape(-1)[:] = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in array.reshape(-1)]
    return out
