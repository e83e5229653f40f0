"""Fill in what Triton fills in a loaded config before serving and reporting it.

Each default below was observed on a real Triton server (2.51): the config it
returns from ``GET /v2/models/<m>/config`` for a ``config.pbtxt`` that left
the field out.
"""

from __future__ import annotations

import logging

from tritonpy_sdk import GpuSupport

from ._errors import ConfigError
from .model_config_pb2 import ModelConfig, ModelInstanceGroup

#: Triton's ``max_sequence_idle_microseconds`` when a sequence batcher sets none.
SEQUENCE_IDLE_DEFAULT_MICROSECONDS = 1_000_000

log = logging.getLogger(__name__)

_CAN_USE_GPUS = GpuSupport()

#: The compute capability Triton's message names (its --min-supported-compute-capability
#: default; tritonpy uses every GPU CUDA reports).
MIN_COMPUTE_CAPABILITY = 6.0


def unknown_gpu(where: str, gpu: int, gpu_count: int) -> str:
    """Triton's message for an instance group (``where``) naming a GPU the host lacks."""
    available = ", ".join(str(i) for i in range(gpu_count))
    return (
        f"{where} specifies invalid or unsupported gpu id {gpu}. GPUs with at least the minimum "
        f"required CUDA compute compatibility of {MIN_COMPUTE_CAPABILITY:f} are: {available}"
    )


def fill_defaults(
    config: ModelConfig,
    *,
    default_kind: str = "KIND_CPU",
    default_count: int = 1,
    gpu_count: int = 0,
    backend_gpu: GpuSupport = _CAN_USE_GPUS,
    source: str = "",
) -> None:
    """Normalise ``config`` in place as Triton does.

    ``default_kind`` and ``default_count`` are the backend's preferred instance
    group; ``gpu_count`` the GPUs this host can use (ids ``0..gpu_count-1``);
    ``backend_gpu`` whether the model's backend can run it on them (its
    ``gpu_support`` hook); ``source`` (the config file's path), when given,
    starts error messages.

    - ``version_policy`` defaults to ``latest { num_versions: 1 }``;
    - ``dynamic_batching`` without ``preferred_batch_size`` prefers
      ``max_batch_size`` (when it is > 0); likewise ``sequence_batching.oldest``;
    - ``sequence_batching`` idles sequences out after 1 s unless set;
    - instance groups (not for ensembles): an empty list becomes one group named
      after the model with the backend's kind and count; other unnamed groups are
      named ``<model>_<index>``; KIND_AUTO resolves to KIND_GPU when the host has
      every GPU the group lists (and at least one) and the backend can use
      them, else KIND_CPU (logged with the reason, at INFO on a GPU host); a
      count below 1 becomes the default; a GPU group without ``gpus`` spans
      every GPU;
    - ``optimization`` (not for ensembles) gets pinned input and output memory
      enabled, each when unset;
    - an ensemble gets ``model_transaction_policy`` (not decoupled) when unset.

    Raises ``ConfigError`` for a KIND_GPU group that cannot run on this host,
    or with this backend (unless ``backend_gpu.kind_gpu_runs_on_cpu``).
    """
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    _batching_defaults(config)
    if config.HasField("ensemble_scheduling"):
        if not config.HasField("model_transaction_policy"):
            config.model_transaction_policy.decoupled = False
        return
    try:
        _instance_group_defaults(config, default_kind, default_count, gpu_count, backend_gpu)
    except ConfigError as exc:
        if not source:
            raise
        raise ConfigError(f"{source}: {exc.message}") from None
    optimization = config.optimization
    if not optimization.HasField("input_pinned_memory"):
        optimization.input_pinned_memory.enable = True
    if not optimization.HasField("output_pinned_memory"):
        optimization.output_pinned_memory.enable = True


def _batching_defaults(config: ModelConfig) -> None:
    batch = config.max_batch_size
    if config.HasField("dynamic_batching"):
        preferred = config.dynamic_batching.preferred_batch_size
        if len(preferred) == 0 and batch > 0:
            preferred.append(batch)
    if config.HasField("sequence_batching"):
        sequence = config.sequence_batching
        if sequence.max_sequence_idle_microseconds == 0:
            sequence.max_sequence_idle_microseconds = SEQUENCE_IDLE_DEFAULT_MICROSECONDS
        if sequence.HasField("oldest") and len(sequence.oldest.preferred_batch_size) == 0 and batch > 0:
            sequence.oldest.preferred_batch_size.append(batch)


def _instance_group_defaults(
    config: ModelConfig, default_kind: str, default_count: int, gpu_count: int, backend_gpu: GpuSupport
) -> None:
    preferred_kind = ModelInstanceGroup.Kind.Value(default_kind)
    added = len(config.instance_group) == 0
    if added:
        # Triton names the group it adds after the model itself (no "_0").
        config.instance_group.add(name=config.name, kind=preferred_kind)
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            group.kind, why = _resolve_auto(config, group, gpu_count, backend_gpu)
            _log_kind(config, group, "defaults" if added else "(KIND_AUTO) resolves", why, gpu_count)
        elif added:
            _log_kind(config, group, "defaults", f"{_backend(config)} prefers it", gpu_count)
        if group.count < 1:
            # The backend's preferred count applies to groups of its preferred kind;
            # a preferred KIND_AUTO matches whichever kind it resolves to.
            matches = preferred_kind in (group.kind, ModelInstanceGroup.KIND_AUTO)
            group.count = default_count if matches and default_count > 0 else 1
        if group.kind == ModelInstanceGroup.KIND_GPU:
            _place_on_gpus(config, group, gpu_count, backend_gpu)


def _resolve_auto(
    config: ModelConfig, group: ModelInstanceGroup, gpu_count: int, backend_gpu: GpuSupport
) -> tuple[int, str]:
    """The kind a KIND_AUTO group resolves to, and why."""
    if gpu_count == 0:
        return ModelInstanceGroup.KIND_CPU, "this host has no GPU"
    missing = [gpu for gpu in group.gpus if not 0 <= gpu < gpu_count]
    if missing:
        return ModelInstanceGroup.KIND_CPU, f"it lists GPU {missing[0]}, which this host does not have"
    if not backend_gpu.usable:
        return ModelInstanceGroup.KIND_CPU, backend_gpu.reason or f"{_backend(config)} cannot use a GPU here"
    why = f"this host has {gpu_count} GPU(s) and {_backend(config)} can use them"
    return ModelInstanceGroup.KIND_GPU, why


def _backend(config: ModelConfig) -> str:
    return f"backend '{config.backend}'" if config.backend else "its backend"


def _log_kind(config: ModelConfig, group: ModelInstanceGroup, how: str, why: str, gpu_count: int) -> None:
    """Say which kind a group got without the user naming one: worth an INFO line on a
    GPU host, where the choice decides where the model runs."""
    log.log(
        logging.INFO if gpu_count else logging.DEBUG,
        "model '%s': instance group '%s' %s to %s: %s",
        config.name,
        group.name,
        how,
        ModelInstanceGroup.Kind.Name(group.kind),
        why,
    )


def _place_on_gpus(
    config: ModelConfig, group: ModelInstanceGroup, gpu_count: int, backend_gpu: GpuSupport
) -> None:
    where = f"instance group {group.name} of model {config.name}"
    for gpu in group.gpus:  # as Triton, GPUs it names are checked first, on any host
        if not 0 <= gpu < gpu_count:
            raise ConfigError(unknown_gpu(where, gpu, gpu_count))
    if gpu_count == 0:
        raise ConfigError(
            f"{where} has kind KIND_GPU but no GPUs are available "
            "(use KIND_CPU, or KIND_AUTO to run on a GPU only when there is one)"
        )
    if not backend_gpu.usable and not backend_gpu.kind_gpu_runs_on_cpu:
        reason = backend_gpu.reason or "it has no GPU support here"
        raise ConfigError(
            f"{where} has kind KIND_GPU but {_backend(config)} cannot use a GPU here: {reason}; "
            "else use KIND_CPU, or KIND_AUTO to run on a GPU only where the backend can"
        )
    if len(group.gpus) == 0:
        group.gpus.extend(range(gpu_count))
