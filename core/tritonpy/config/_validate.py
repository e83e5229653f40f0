"""Checks of a model configuration, each naming the file and the field at fault."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ._errors import ConfigError
from .model_config_pb2 import DataType, ModelConfig, ModelInstanceGroup


def validate_config(config: ModelConfig, *, source: str, folder_name: str | None = None) -> None:
    """Raise ``ConfigError`` for the first problem found in ``config``.

    ``source`` (the config file's path) starts every message, so users know
    which of their files to fix.
    """
    where = f"{source}: model '{config.name}'"
    if folder_name is not None and config.name != folder_name:
        raise ConfigError(
            f"{source}: 'name' is '{config.name}' but the model's folder is '{folder_name}'; "
            "they must be equal"
        )
    if config.max_batch_size < 0:
        raise ConfigError(f"{where}: 'max_batch_size' must be >= 0, got {config.max_batch_size}")
    _check_tensors(where, "input", config.input)
    _check_tensors(where, "output", config.output)
    _check_instance_groups(where, config.instance_group)
    _check_version_policy(where, config)
    _check_dynamic_batching(where, config)


def _check_tensors(where: str, kind: str, tensors: Iterable[object]) -> None:
    seen: set[str] = set()
    for tensor in tensors:
        name: str = tensor.name  # type: ignore[attr-defined]
        if not name:
            raise ConfigError(f"{where}: every {kind} must have a 'name'")
        if name in seen:
            raise ConfigError(f"{where}: {kind} '{name}' is declared more than once")
        seen.add(name)
        if tensor.data_type == DataType.TYPE_INVALID:  # type: ignore[attr-defined]
            raise ConfigError(f"{where}: {kind} '{name}' must specify a valid 'data_type'")
        dims: Sequence[int] = tensor.dims  # type: ignore[attr-defined]
        if len(dims) == 0:
            raise ConfigError(
                f"{where}: {kind} '{name}' must specify 'dims' with at least one dimension "
                "(use dims: [ 1 ] with reshape: { shape: [ ] } for a scalar)"
            )
        for i, d in enumerate(dims):
            if d != -1 and d <= 0:
                raise ConfigError(
                    f"{where}: dimension {i} of {kind} '{name}' must be -1 (variable) or positive, got {d}"
                )
        if tensor.HasField("reshape"):  # type: ignore[attr-defined]
            _check_reshape(where, kind, name, dims, tensor.reshape.shape)  # type: ignore[attr-defined]


def _check_reshape(where: str, kind: str, name: str, dims: Sequence[int], shape: Sequence[int]) -> None:
    for i, d in enumerate(shape):
        if d != -1 and d <= 0:
            raise ConfigError(
                f"{where}: reshape dimension {i} of {kind} '{name}' must be -1 or positive, got {d}"
            )
    if (-1 in dims) != (-1 in shape):
        raise ConfigError(
            f"{where}: {kind} '{name}' has variable dims only on one side of its reshape "
            f"(dims {list(dims)}, reshape {list(shape)})"
        )
    if -1 not in dims and math.prod(dims) != math.prod(shape):
        raise ConfigError(
            f"{where}: reshape {list(shape)} of {kind} '{name}' has {math.prod(shape)} elements "
            f"but its dims {list(dims)} have {math.prod(dims)}"
        )


def _check_instance_groups(where: str, groups: Iterable[ModelInstanceGroup]) -> None:
    names: set[str] = set()
    for group in groups:
        label = f"instance group '{group.name}'" if group.name else "an instance group"
        if group.count < 0:
            raise ConfigError(f"{where}: {label} has 'count' {group.count}; it must be >= 1")
        if group.name:
            if group.name in names:
                raise ConfigError(f"{where}: {label} is declared more than once")
            names.add(group.name)
        kind = ModelInstanceGroup.Kind.Name(group.kind)
        if kind in ("KIND_CPU", "KIND_MODEL") and len(group.gpus) > 0:
            raise ConfigError(f"{where}: {label} has kind {kind} and must not list 'gpus'")
        for gpu in group.gpus:
            if gpu < 0:
                raise ConfigError(f"{where}: {label} lists GPU {gpu}; GPU ids are >= 0")


def _check_version_policy(where: str, config: ModelConfig) -> None:
    policy = config.version_policy
    if policy.WhichOneof("policy_choice") == "specific":
        for v in policy.specific.versions:
            if v <= 0:
                raise ConfigError(f"{where}: version_policy specific lists version {v}; versions are >= 1")
        if len(policy.specific.versions) == 0:
            raise ConfigError(f"{where}: version_policy specific must list at least one version")


def _check_dynamic_batching(where: str, config: ModelConfig) -> None:
    if config.WhichOneof("scheduling_choice") != "dynamic_batching":
        return
    if config.max_batch_size == 0:
        raise ConfigError(f"{where}: dynamic_batching needs 'max_batch_size' > 0 (the model does not batch)")
    for size in config.dynamic_batching.preferred_batch_size:
        if size < 1 or size > config.max_batch_size:
            raise ConfigError(
                f"{where}: dynamic_batching preferred_batch_size {size} must be between 1 and "
                f"max_batch_size {config.max_batch_size}"
            )
