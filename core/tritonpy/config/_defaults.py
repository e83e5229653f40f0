"""Fill in what Triton fills in a loaded config before serving and reporting it.

Each default below was observed on a real Triton server (2.51): the config it
returns from ``GET /v2/models/<m>/config`` for a ``config.pbtxt`` that left
the field out.
"""

from __future__ import annotations

from ._errors import ConfigError
from .model_config_pb2 import ModelConfig, ModelInstanceGroup

#: Triton's ``max_sequence_idle_microseconds`` when a sequence batcher sets none.
SEQUENCE_IDLE_DEFAULT_MICROSECONDS = 1_000_000


def fill_defaults(
    config: ModelConfig,
    *,
    default_kind: str = "KIND_CPU",
    default_count: int = 1,
    gpu_count: int = 0,
    source: str = "",
) -> None:
    """Normalise ``config`` in place as Triton does.

    ``default_kind`` and ``default_count`` are the backend's preferred instance
    group; ``gpu_count`` the GPUs this host can use (ids ``0..gpu_count-1``);
    ``source`` (the config file's path), when given, starts error messages.

    - ``version_policy`` defaults to ``latest { num_versions: 1 }``;
    - ``dynamic_batching`` without ``preferred_batch_size`` prefers
      ``max_batch_size`` (when it is > 0); likewise ``sequence_batching.oldest``;
    - ``sequence_batching`` idles sequences out after 1 s unless set;
    - instance groups (not for ensembles): an empty list becomes one group named
      after the model with the backend's kind and count; other unnamed groups are
      named ``<model>_<index>``; KIND_AUTO resolves to KIND_GPU when the host has
      every GPU the group lists (and at least one), else KIND_CPU; a count below 1
      becomes the default; a GPU group without ``gpus`` spans every GPU;
    - ``optimization`` (not for ensembles) gets pinned input and output memory
      enabled, each when unset;
    - an ensemble gets ``model_transaction_policy`` (not decoupled) when unset.

    Raises ``ConfigError`` for a KIND_GPU group that cannot run on this host.
    """
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    _batching_defaults(config)
    if config.HasField("ensemble_scheduling"):
        if not config.HasField("model_transaction_policy"):
            config.model_transaction_policy.decoupled = False
        return
    try:
        _instance_group_defaults(config, default_kind, default_count, gpu_count)
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
    config: ModelConfig, default_kind: str, default_count: int, gpu_count: int
) -> None:
    preferred_kind = ModelInstanceGroup.Kind.Value(default_kind)
    if len(config.instance_group) == 0:
        # Triton names the group it adds after the model itself (no "_0").
        config.instance_group.add(name=config.name, kind=preferred_kind)
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            on_gpu = gpu_count > 0 and all(0 <= gpu < gpu_count for gpu in group.gpus)
            group.kind = ModelInstanceGroup.KIND_GPU if on_gpu else ModelInstanceGroup.KIND_CPU
        if group.count < 1:
            # The backend's preferred count applies to groups of its preferred kind;
            # a preferred KIND_AUTO matches whichever kind it resolves to.
            matches = preferred_kind in (group.kind, ModelInstanceGroup.KIND_AUTO)
            group.count = default_count if matches and default_count > 0 else 1
        if group.kind == ModelInstanceGroup.KIND_GPU:
            _place_on_gpus(config, group, gpu_count)


def _place_on_gpus(config: ModelConfig, group: ModelInstanceGroup, gpu_count: int) -> None:
    where = f"instance group {group.name} of model {config.name}"
    if gpu_count == 0:
        raise ConfigError(
            f"{where} has kind KIND_GPU but no GPUs are available "
            "(use KIND_CPU, or KIND_AUTO to run on a GPU only when there is one)"
        )
    if len(group.gpus) == 0:
        group.gpus.extend(range(gpu_count))
    for gpu in group.gpus:
        if not 0 <= gpu < gpu_count:
            available = ", ".join(str(i) for i in range(gpu_count))
            raise ConfigError(
                f"{where} specifies invalid or unsupported gpu id {gpu}. GPUs available are: {available}"
            )
