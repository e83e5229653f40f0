"""Checks of a model configuration, one small function per rule.

Messages use Triton's own wording (observed on a real Triton 2.51 server, which
ends them with "for <model>"), prefixed with the config file's path so users
know which file to fix. Rules where tritonpy is stricter than Triton say so in
their docstring.

Run after ``fill_defaults`` for the full set: groups are then named and
counted, as Triton's are when it validates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ._ensemble import ensemble_graph_problem
from ._errors import ConfigError
from .model_config_pb2 import (
    BatchInput,
    DataType,
    ModelConfig,
    ModelInput,
    ModelInstanceGroup,
    ModelOutput,
)

_WILDCARD = -1
_TENSORRT_PLATFORM = "tensorrt_plan"
ENSEMBLE_PLATFORM = "ensemble"


#: An input or an output: the fields both have.
_IO = ModelInput | ModelOutput

#: A rule returns the problem (Triton's wording, without the file) or None.
Rule = Callable[[ModelConfig], str | None]


def validate_config(config: ModelConfig, *, source: str, folder_name: str | None = None) -> None:
    """Raise ``ConfigError`` for the first problem found in ``config``.

    ``source`` (the config file's path) starts every message; ``folder_name``,
    when given, is the model's folder, which ``name`` must equal (checked after the
    rules, as Triton checks it).
    """
    for rule in RULES:
        problem = rule(config)
        if problem is not None:
            raise ConfigError(f"{source}: {problem}")
    if folder_name is not None and config.name != folder_name:
        raise ConfigError(
            f"{source}: unexpected directory name '{folder_name}' for model '{config.name}', "
            "directory name must equal model name"
        )


def _max_batch_size(config: ModelConfig) -> str | None:
    if config.max_batch_size < 0:
        return f"'max_batch_size' must be non-negative value for {config.name}"
    return None


def _inputs(config: ModelConfig) -> str | None:
    return _tensors(config, "input", config.input)


def _outputs(config: ModelConfig) -> str | None:
    return _tensors(config, "output", config.output)


def _tensors(config: ModelConfig, kind: str, tensors: Sequence[_IO]) -> str | None:
    seen: set[str] = set()
    for io in tensors:
        problem = _io_shape(io, kind, config.max_batch_size) or _io_platform(io, kind, config)
        if problem is None and isinstance(io, ModelInput):
            if io.format != ModelInput.FORMAT_NONE and len(io.dims) != 3:
                problem = "model input NHWC/NCHW require 3 dims"
        if problem is None and io.name in seen:
            # Stricter than Triton, which loads such a model; requests could not
            # tell the two tensors apart.
            problem = f"model {kind} '{io.name}' is specified more than once"
        if problem is not None:
            return f"{problem} for {config.name}"
        seen.add(io.name)
    return None


def _io_shape(io: _IO, kind: str, max_batch_size: int) -> str | None:
    """Triton's name, data type, dims and reshape checks of one input or output."""
    if not io.name:
        return f"model {kind} must specify 'name'"
    prefix = f"model {kind} '{io.name}'"
    if io.data_type == DataType.TYPE_INVALID:
        return f"{prefix} must specify 'data_type'"
    if len(io.dims) == 0:
        return f"{prefix} must specify 'dims' (a scalar is dims: [ 1 ] with reshape: {{ shape: [ ] }})"
    has_reshape = io.HasField("reshape")
    shape = list(io.reshape.shape)
    if has_reshape and len(shape) == 0 and max_batch_size == 0:
        return (
            f"{prefix} cannot have empty reshape for non-batching model as scalar tensors are not supported"
        )
    if any(d < 1 and d != _WILDCARD for d in io.dims):
        return f"{prefix} dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
    if not has_reshape:
        return None
    if any(d < 1 and d != _WILDCARD for d in shape):
        return (
            f"{prefix} reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
        )
    return _reshape_problem(prefix, list(io.dims), shape)


def _reshape_problem(prefix: str, dims: list[int], shape: list[int]) -> str | None:
    """Dims and reshape hold the same elements; with -1s, piece by piece between them."""
    dims_size, shape_size = _element_count(dims), _element_count(shape)
    # An empty reshape (a scalar) takes dims with exactly one element.
    if dims_size != shape_size and not (len(shape) == 0 and dims_size == 1):
        return f"{prefix} has different size for dims and reshape"
    if dims_size == _WILDCARD:
        dim_pieces, shape_pieces = _pieces(dims), _pieces(shape)
        if len(dim_pieces) != len(shape_pieces):
            return f"{prefix} has different number of variable-size dimensions for dims and reshape"
        if dim_pieces != shape_pieces:
            return f"{prefix} has different size for dims and reshape"
    return None


def _element_count(dims: list[int]) -> int:
    return _WILDCARD if _WILDCARD in dims else math.prod(dims)


def _pieces(dims: list[int]) -> list[int]:
    """Element counts of the runs of fixed dims between variable-size ones."""
    pieces, run = [], 1
    for d in dims:
        if d == _WILDCARD:
            pieces.append(run)
            run = 1
        else:
            run *= d
    return [*pieces, run]


def _io_platform(io: _IO, kind: str, config: ModelConfig) -> str | None:
    """Shape tensors and non-linear IO formats are TensorRT features."""
    tensorrt = config.platform == _TENSORRT_PLATFORM or config.backend == "tensorrt"
    if io.is_shape_tensor and not tensorrt:
        return "shape tensors are only supported for TensorRT platform"
    if io.is_non_linear_format_io:
        if not tensorrt:
            return "Non-linear IO format is only supported for the TensorRT platform"
        if len(io.dims) != 3:
            return f"Non-linear IO format {kind} requires 3 dims"
    return None


def _batch_inputs(config: ModelConfig) -> str | None:
    inputs = {io.name for io in config.input}
    for batch_input in config.batch_input:
        kind = BatchInput.Kind.Name(batch_input.kind)
        if len(batch_input.source_input) != 1:
            got = len(batch_input.source_input)
            return f"batch input kind '{kind}' expects 1 source input, got {got} for {config.name}"
        if batch_input.data_type not in (DataType.TYPE_INT32, DataType.TYPE_FP32):
            return f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {config.name}"
        for source in batch_input.source_input:
            if source not in inputs:
                return f"unknown source input name '{source}' for {config.name}"
    return None


def _batch_outputs(config: ModelConfig) -> str | None:
    inputs = {io.name for io in config.input}
    outputs = {io.name for io in config.output}
    for batch_output in config.batch_output:
        if len(batch_output.source_input) != 1:
            got = len(batch_output.source_input)
            return (
                f"batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, "
                f"got {got} for {config.name}"
            )
        for source in batch_output.source_input:
            if source not in inputs:
                return f"unknown source input name '{source}' for {config.name}"
        targets: set[str] = set()
        for target in batch_output.target_name:
            if target not in outputs:
                return f"unknown target output name '{target}' for {config.name}"
            if target in targets:
                return f"target output name '{target}' can only be specified once for {config.name}"
            targets.add(target)
    return None


def _version_policy(config: ModelConfig) -> str | None:
    """A policy that can select no version fails to load in Triton with this message.

    Stricter than Triton for version numbers below 1, which Triton only reports
    as a missing version folder.
    """
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    none_left = f"at least one version must be available under the version policy of model '{config.name}'"
    if choice == "latest" and policy.latest.num_versions == 0:
        return none_left
    if choice == "specific":
        if len(policy.specific.versions) == 0:
            return none_left
        for version in policy.specific.versions:
            if version < 1:
                return (
                    f"version {version} is specified for model '{config.name}', but version "
                    "folders are numbered from 1"
                )
    return None


def _dynamic_batching(config: ModelConfig) -> str | None:
    """Triton accepts ``dynamic_batching`` with ``max_batch_size: 0`` (it never batches)."""
    if not config.HasField("dynamic_batching"):
        return None
    batching = config.dynamic_batching
    for size in batching.preferred_batch_size:
        if size <= 0:
            return f"dynamic batching preferred size must be positive for {config.name}"
        if size > config.max_batch_size:
            return f"dynamic batching preferred size must be <= max batch size for {config.name}"
    levels = batching.priority_levels
    if levels != 0:
        if not 1 <= batching.default_priority_level <= levels:
            return f"default priority level must be in range [1, {levels}] for {config.name}"
        for level in batching.priority_queue_policy:
            if not 1 <= level <= levels:
                return (
                    f"priority queue policy must have priority level in range [1, {levels}] for {config.name}"
                )
    if batching.preserve_ordering:
        if levels > 1:
            return f"Only one priority level is allowed when 'preserve_ordering' is true for {config.name}"
        policies = [batching.default_queue_policy, *batching.priority_queue_policy.values()]
        for policy in policies:
            if policy.default_timeout_microseconds != 0 and policy.timeout_action == policy.DELAY:
                return (
                    "Queue policy can not have DELAY as timeout action when 'preserve_ordering' "
                    f"is true for {config.name}"
                )
    return None


def _sequence_batching(config: ModelConfig) -> str | None:
    if not config.HasField("sequence_batching"):
        return None
    if config.response_cache.enable:
        return (
            f"Response Cache does not currently support model {config.name} with sequence "
            "batching scheduler. Please disable the response cache."
        )
    sequence = config.sequence_batching
    for size in sequence.oldest.preferred_batch_size:
        if size <= 0:
            return f"sequence batching preferred batch size must be positive for {config.name}"
        if size > config.max_batch_size:
            return f"sequence batching preferred batch size must be <= max batch size for {config.name}"
    utilization = sequence.direct.minimum_slot_utilization
    if sequence.HasField("direct") and not 0.0 <= utilization <= 1.0:  # Triton's own bounds
        return f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {config.name}"
    for kind in ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY", _CORRID):
        problem = _sequence_controls(config.name, sequence, kind)
        if problem is not None:
            return problem
    return None


_CORRID = "CONTROL_SEQUENCE_CORRID"
_CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")
_FALSE_TRUE = ("int32_false_true", "fp32_false_true", "bool_false_true")


def _sequence_controls(model: str, sequence: Any, kind: str) -> str | None:
    """Triton's checks of the sequence batching controls of ``kind``, in its words and
    order (Triton 2.51: the start, end and ready controls take one of the false/true
    value pairs, the correlation ID control none and a data type it can carry)."""
    tensors: set[str] = set()
    seen = False
    for control_input in sequence.control_input:
        if not control_input.name:
            return f"sequence batching control tensor must have a name for {model}"
        if control_input.name in tensors:
            return (
                f"sequence batching control tensor '{control_input.name}' is specified for multiple "
                f"control kinds for {model}"
            )
        tensors.add(control_input.name)
        for control in control_input.control:
            if type(control).Kind.Name(control.kind) != kind:
                continue
            if seen:
                return f"sequence batching specifies multiple {kind} tensors for {model}"
            seen = True
            given = [f for f in _FALSE_TRUE if len(getattr(control, f))]
            if kind == _CORRID:
                if given:
                    return (
                        "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' "
                        f"or 'bool_false_true' for {kind} for {model}"
                    )
                if DataType.Name(control.data_type) not in _CORRID_TYPES:
                    return (
                        f"unexpected data type for control {kind} for {model}. Allowed data types are "
                        "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
                    )
                continue
            if not given:
                return (
                    "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                    f"'bool_false_true' for {kind} for {model}"
                )
            if len(given) > 1:
                return (
                    "sequence batching specifies more than one from 'int32_false_true', "
                    f"'fp32_false_true' and 'bool_false_true' for {kind} for {model}"
                )
            if len(getattr(control, given[0])) != 2:
                return (
                    f"sequence batching control '{given[0]}' must have exactly 2 entries for {kind} "
                    f"for {model}"
                )
    return None


def _ensemble_backend(config: ModelConfig) -> str | None:
    if config.platform == ENSEMBLE_PLATFORM and config.backend:
        return (
            f"Ensemble model '{config.name}' must have platform type '{ENSEMBLE_PLATFORM}' and empty "
            "backend type"
        )
    return None


def _ensemble(config: ModelConfig) -> str | None:
    """Ensemble settings go together, and its steps' data flow holds (``_ensemble.py``)."""
    is_ensemble = config.platform == ENSEMBLE_PLATFORM
    if config.HasField("ensemble_scheduling"):
        if not is_ensemble:
            return (
                f"ensemble scheduling cannot be set for model '{config.name}' whose platform is not "
                f"{ENSEMBLE_PLATFORM}"
            )
        if len(config.instance_group) != 0:
            return f"instance group should not be specified for ensemble '{config.name}'"
        if config.HasField("optimization"):
            return f"optimization should not be specified for ensemble '{config.name}'"
        if len(config.model_warmup) != 0:
            return f"model_warmup can not be specified for ensemble '{config.name}'"
        if len(config.ensemble_scheduling.step) == 0:
            return f"must specify 'step' for ensemble '{config.name}'"
        return ensemble_graph_problem(config)
    elif is_ensemble:
        return (
            f"ensemble scheduling must be set for ensemble {config.name} whose platform is "
            f"{ENSEMBLE_PLATFORM}"
        )
    return None


def _response_cache(config: ModelConfig) -> str | None:
    if config.model_transaction_policy.decoupled and config.response_cache.enable:
        return (
            f"Response Cache does not currently support model {config.name} with 'decoupled' "
            "transaction policy. Please disable the response cache."
        )
    return None


def _instance_groups(config: ModelConfig) -> str | None:
    """Groups of a known kind, GPUs only on GPU groups, profiles only for TensorRT.

    Stricter than Triton in one point: two groups may not share a name (their
    instances would too).
    """
    names: set[str] = set()
    for index, group in enumerate(config.instance_group):
        where = f"instance group {group.name or f'#{index}'} of model {config.name}"
        if group.kind not in ModelInstanceGroup.Kind.values():
            return f"{where} has unknown kind {group.kind}"
        kind = ModelInstanceGroup.Kind.Name(group.kind)
        if kind in ("KIND_CPU", "KIND_MODEL") and len(group.gpus) > 0:
            return f"{where} has kind {kind} but specifies one or more GPUs"
        if group.profile and config.platform != _TENSORRT_PLATFORM and config.backend != "tensorrt":
            platform = f"{config.platform} " if config.platform else ""
            return (
                f"{where} and platform {platform}specifies profile field which is only "
                "supported for TensorRT models"
            )
        if group.name and group.name in names:
            return f"{where} is specified more than once (instance group names must be unique)"
        names.add(group.name)
    return None


def _model_metrics(config: ModelConfig) -> str | None:
    for control in config.model_metrics.metric_control:
        if not control.HasField("metric_identifier"):
            return "metric control must specify 'metric_identifier'"
        if not control.metric_identifier.family:
            return "metric identifier must specify non-empty 'family'"
        if not control.HasField("histogram_options"):
            return "metric control must specify 'histogram_options'"
        if len(control.histogram_options.buckets) == 0:
            return "histogram options must specify non-empty 'buckets'"
    return None


#: Every rule, in the order Triton applies the matching checks.
RULES: tuple[Rule, ...] = (
    _ensemble_backend,
    _max_batch_size,
    _version_policy,
    _dynamic_batching,
    _sequence_batching,
    _ensemble,
    _response_cache,
    _model_metrics,
    _instance_groups,
    _inputs,
    _outputs,
    _batch_inputs,
    _batch_outputs,
)
