"""Triton's PyTorch model parameters: names, defaults, parsing, and where each applies.

``parameters { key: "INFERENCE_MODE" value { string_value: "true" } }`` in
``config.pbtxt``. Booleans accept true/false, on/off, 1/0 (any case) and
integers decimal text, as Triton's backend utilities parse them, with
Triton's messages. A key this backend does not know is reported at load (a
warning naming it and the known keys) rather than silently ignored: it
usually is a misspelling.

The settings live in torch's process-wide state (the JIT executor, the tensor
fuser, cuDNN, the thread pools), as in Triton: the per-execution switches are
applied before every execution of the model that sets them, the thread counts
once per process, by the first model that sets them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import TritonError

#: Every parameter this backend reads, with Triton's default.
KNOWN = {
    "INFERENCE_MODE": "true",
    "DISABLE_OPTIMIZED_EXECUTION": "false",
    "DISABLE_CUDNN": "false",
    "ENABLE_WEIGHT_SHARING": "false",
    "ENABLE_CACHE_CLEANING": "false",
    "ENABLE_JIT_EXECUTOR": "(torch's default)",
    "ENABLE_JIT_PROFILING": "(torch's default)",
    "ENABLE_TENSOR_FUSER": "(torch's default)",
    "INTRA_OP_THREAD_COUNT": "(torch's default: the number of cores)",
    "INTER_OP_THREAD_COUNT": "(torch's default: the number of cores)",
}

#: Keys of Triton's Python-based PyTorch runtime (``runtime: "model.py"``), not of libtorch models.
PYTHON_RUNTIME_KEYS = ("NUM_THREADS", "NUM_INTEROP_THREADS", "TORCH_COMPILE_OPTIONAL_PARAMETERS")

#: Keys the core itself reads from any model's parameters.
CORE_KEYS = ("EXECUTION_ENV_PATH",)


def parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "on", "1"):
        return True
    if lowered in ("false", "off", "0"):
        return False
    raise TritonError.invalid_arg(f"failed to convert '{value}' to boolean (model parameter '{key}')")


def parse_int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise TritonError.invalid_arg(
            f"failed to convert '{value}' to integral number (model parameter '{key}')"
        ) from None


@dataclass(frozen=True, slots=True)
class Options:
    """A model's parameters, parsed once at load."""

    inference_mode: bool = True
    optimized_execution: bool = True
    cudnn: bool = True
    weight_sharing: bool = False
    cache_cleaning: bool = False
    #: None: leave torch's setting alone (the parameter was not given).
    jit_executor: bool | None = None
    jit_profiling: bool | None = None
    tensor_fuser: bool | None = None
    intra_op_threads: int = 0
    inter_op_threads: int = 0

    @classmethod
    def parse(cls, params: dict[str, str], python_runtime: bool = False) -> Options:
        """``python_runtime``: the model runs on Triton's Python-based runtime, whose
        ``NUM_THREADS`` / ``NUM_INTEROP_THREADS`` set the thread counts too."""

        def flag(key: str) -> bool | None:
            return parse_bool(key, params[key]) if key in params else None

        def count(key: str, runtime_key: str) -> int:
            if key in params:
                return parse_int(key, params[key])
            if python_runtime and runtime_key in params:
                return parse_int(runtime_key, params[runtime_key])
            return 0

        def given(value: bool | None, default: bool) -> bool:
            return default if value is None else value

        disable_opt = flag("DISABLE_OPTIMIZED_EXECUTION")
        disable_cudnn = flag("DISABLE_CUDNN")
        return cls(
            inference_mode=given(flag("INFERENCE_MODE"), True),
            optimized_execution=not given(disable_opt, False),
            cudnn=not given(disable_cudnn, False),
            weight_sharing=given(flag("ENABLE_WEIGHT_SHARING"), False),
            cache_cleaning=given(flag("ENABLE_CACHE_CLEANING"), False),
            jit_executor=flag("ENABLE_JIT_EXECUTOR"),
            jit_profiling=flag("ENABLE_JIT_PROFILING"),
            tensor_fuser=flag("ENABLE_TENSOR_FUSER"),
            intra_op_threads=count("INTRA_OP_THREAD_COUNT", "NUM_THREADS"),
            inter_op_threads=count("INTER_OP_THREAD_COUNT", "NUM_INTEROP_THREADS"),
        )


def report_unknown(
    params: dict[str, str], model_name: str, log: logging.Logger, python_runtime: bool = False
) -> list[str]:
    """Warn about each parameter this backend does not read; returns their keys."""
    known = (*KNOWN, *CORE_KEYS, *(PYTHON_RUNTIME_KEYS if python_runtime else ()))
    unknown = [k for k in params if k not in known]
    for key in unknown:
        if key in PYTHON_RUNTIME_KEYS:
            log.warning(
                "model '%s': parameter '%s' belongs to Triton's Python-based PyTorch runtime "
                '(runtime: "model.py"), which this model does not use; it is ignored',
                model_name,
                key,
            )
        else:
            log.warning(
                "model '%s': unknown parameter '%s' is ignored by the PyTorch backend (known: %s)",
                model_name,
                key,
                ", ".join(KNOWN),
            )
    return unknown


_threads_lock = threading.Lock()
_threads_set: dict[str, int] = {}


def apply_thread_counts(torch: Any, options: Options, model_name: str, log: logging.Logger) -> None:
    """Set torch's intra-/inter-op pool sizes once per process, as Triton does (first model wins)."""
    with _threads_lock:
        if options.intra_op_threads > 0:
            if "intra" not in _threads_set:
                torch.set_num_threads(options.intra_op_threads)
                _threads_set["intra"] = options.intra_op_threads
            log.info("Intra op thread count is set to %d for model '%s'", torch.get_num_threads(), model_name)
        if options.inter_op_threads > 0:
            if "inter" not in _threads_set:
                _threads_set["inter"] = options.inter_op_threads
                try:
                    torch.set_num_interop_threads(options.inter_op_threads)
                except RuntimeError as exc:  # torch refuses once inter-op work has started
                    log.warning("INTER_OP_THREAD_COUNT for model '%s' not applied: %s", model_name, exc)
            log.info(
                "Inter op thread count is set to %d for model '%s'",
                torch.get_num_interop_threads(),
                model_name,
            )


def apply_execution_switches(torch: Any, options: Options) -> None:
    """Torch's process-wide JIT and cuDNN switches for one execution of the model (as Triton)."""
    c = torch._C
    if c._get_graph_executor_optimize() != options.optimized_execution:
        c._set_graph_executor_optimize(options.optimized_execution)
    if c._get_cudnn_enabled() != options.cudnn:
        c._set_cudnn_enabled(options.cudnn)
    if options.jit_profiling is not None:
        c._jit_set_profiling_mode(options.jit_profiling)
    if options.jit_executor is not None:
        c._jit_set_profiling_executor(options.jit_executor)
    if options.tensor_fuser is not None and c._jit_texpr_fuser_enabled() != options.tensor_fuser:
        c._jit_set_texpr_fuser_enabled(options.tensor_fuser)
