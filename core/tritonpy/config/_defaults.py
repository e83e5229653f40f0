"""Fill in what Triton fills in a loaded config before serving and reporting it."""

from __future__ import annotations

from ._errors import ConfigError
from .model_config_pb2 import ModelConfig, ModelInstanceGroup


def fill_defaults(
    config: ModelConfig,
    *,
    default_kind: str = "KIND_CPU",
    default_count: int = 1,
    gpu_count: int = 0,
) -> None:
    """Normalise ``config`` in place as Triton does.

    - ``version_policy`` defaults to ``latest { num_versions: 1 }``;
    - an empty ``instance_group`` becomes one group of the backend's default
      kind and count; each group gets a name (``<model>_<index>``), a count of
      at least 1, KIND_AUTO resolves to GPU when there is one, else CPU, and a
      GPU group without ``gpus`` spans every GPU;
    - ``optimization`` gets pinned input/output memory enabled when unset.

    Raises ``ConfigError`` for a KIND_GPU group on a host without GPUs.
    """
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    elif config.version_policy.WhichOneof("policy_choice") == "latest":
        if config.version_policy.latest.num_versions == 0:
            config.version_policy.latest.num_versions = 1
    if len(config.instance_group) == 0:
        group = config.instance_group.add()
        group.kind = ModelInstanceGroup.Kind.Value(default_kind)
        group.count = default_count
    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.count == 0:
            group.count = 1
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            group.kind = ModelInstanceGroup.KIND_GPU if gpu_count > 0 else ModelInstanceGroup.KIND_CPU
        if group.kind == ModelInstanceGroup.KIND_GPU:
            if gpu_count == 0:
                raise ConfigError(
                    f"instance group '{group.name}' of model '{config.name}' has kind KIND_GPU "
                    "but this host has no GPU available; use KIND_CPU (or KIND_AUTO)"
                )
            if len(group.gpus) == 0:
                group.gpus.extend(range(gpu_count))
    if not config.HasField("optimization"):
        config.optimization.input_pinned_memory.enable = True
        config.optimization.output_pinned_memory.enable = True
