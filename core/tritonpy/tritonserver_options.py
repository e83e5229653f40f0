"""The option names, enums and helper classes of ``tritonserver`` (Triton's in-process
Python API), taken beside tritonpy's own by ``tritonpy.Server(...)`` and
``tritonpy.Options``: a program written for ``tritonserver`` runs with an import change.

- Names: ``startup_models`` is ``load_model``, ``strict_model_config``
  ``disable_auto_complete_config``, ``exit_timeout`` ``exit_timeout_secs``,
  ``log_warn`` ``log_warning``, ``metrics`` / ``gpu_metrics`` / ``cpu_metrics``
  ``allow_metrics`` / ``allow_gpu_metrics`` / ``allow_cpu_metrics``,
  ``metrics_interval`` ``metrics_interval_ms``, ``pinned_memory_pool_size``
  ``pinned_memory_pool_byte_size``, ``cuda_memory_pool_sizes``
  ``cuda_memory_pool_byte_size``, ``rate_limiter_mode`` ``rate_limit``,
  ``rate_limiter_resources`` ``rate_limit_resource``, ``backend_configuration``
  ``backend_config``, ``metrics_configuration`` ``metrics_config``; ``host_policies``
  and ``cache_config`` take ``tritonserver``'s dictionaries.
- Enums: ``ModelControlMode``, ``RateLimitMode``, ``LogFormat``, ``InstanceGroupKind``,
  ``MemoryType`` (``output_memory_type``, read by ``parse_memory_type``);
  their members are tritonpy's strings too (``ModelControlMode.EXPLICIT == "explicit"``).
  And those ``tritonserver`` answers with: ``ModelBatchFlag``
  (``ModelHandle.batch_properties()``: ``FIRST_DIM`` when the model batches along
  its first dimension, else ``UNKNOWN``), ``ModelTxnPropertyFlag``
  (``ModelHandle.transaction_properties()``: ``ONE_TO_ONE`` or ``DECOUPLED``) and
  ``MetricFormat`` (``Server.metrics()``: ``PROMETHEUS``, the only one), with
  ``tritonserver``'s values.
- ``cache_directory``, ``min_supported_compute_capability``,
  ``buffer_manager_thread_count``, ``enable_peer_access``, ``repo_agent_directory``
  and ``model_load_device_limits`` tune machinery tritonpy does not have: taken,
  logged, no effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum, IntFlag
from typing import Any

from tritonpy_sdk import InvalidArgumentError

from . import hostpolicy

log = logging.getLogger("tritonpy")


class ModelControlMode(str, Enum):
    NONE = "none"
    POLL = "poll"
    EXPLICIT = "explicit"


class RateLimitMode(str, Enum):
    OFF = "off"
    EXEC_COUNT = "execution_count"


class LogFormat(str, Enum):
    DEFAULT = "default"
    ISO8601 = "ISO8601"


class InstanceGroupKind(str, Enum):
    AUTO = "KIND_AUTO"
    CPU = "KIND_CPU"
    GPU = "KIND_GPU"
    MODEL = "KIND_MODEL"


class MemoryType(str, Enum):
    """Where a tensor's memory lies (``Tensor.memory_type`` compares equal to these)."""

    CPU = "CPU"
    CPU_PINNED = "CPU_PINNED"
    GPU = "GPU"


def parse_memory_type(value: Any) -> tuple[MemoryType, int]:
    """``output_memory_type`` as ``tritonserver`` reads it: a ``MemoryType``, a string
    (``"cpu"``, ``"gpu:1"``) or a ``(MemoryType, id)`` pair; InvalidArgumentError else."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], MemoryType):
        return value[0], int(value[1])
    if isinstance(value, MemoryType):
        return value, 0
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) > 2:
            raise InvalidArgumentError(f"Invalid memory type string {value}")
        try:
            kind = MemoryType(parts[0].upper())
        except ValueError:
            raise InvalidArgumentError(
                f"Unsupported Memory Type String. Can't convert {parts[0].upper()} "
                "to Triton server memory type"
            ) from None
        try:
            return kind, int(parts[1]) if len(parts) == 2 else 0
        except ValueError:
            raise InvalidArgumentError(f"Invalid memory type string {value}") from None
    raise InvalidArgumentError(f"Invalid memory type {value}")


class ModelBatchFlag(IntFlag):
    UNKNOWN = 1
    FIRST_DIM = 2


class ModelTxnPropertyFlag(IntFlag):
    ONE_TO_ONE = 1
    DECOUPLED = 2


class MetricFormat(IntEnum):
    PROMETHEUS = 0


@dataclass(slots=True)
class RateLimiterResource:
    """A resource the rate limiter hands out: ``count`` of ``name`` on ``device``."""

    name: str
    count: int
    device: int = 0


@dataclass(slots=True)
class ModelLoadDeviceLimit:
    """``tritonserver``'s cap on device memory used while loading (no effect here)."""

    kind: InstanceGroupKind
    device: int
    fraction: float


#: ``tritonserver``'s names that tune what tritonpy does not have.
IGNORED = frozenset(
    {
        "cache_directory",
        "min_supported_compute_capability",
        "buffer_manager_thread_count",
        "enable_peer_access",
        "repo_agent_directory",
        "model_load_device_limits",
    }
)


def _plain(value: Any) -> str:
    """An enum member's value (tritonpy's string), or the string given."""
    return str(value.value if isinstance(value, Enum) else value)


def _flatten(groups: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [f"{key}={value}" for settings in groups.values() for key, value in settings.items()]


def _host_policies(value: Mapping[str, Any]) -> dict[str, hostpolicy.HostPolicy]:
    if all(isinstance(policy, hostpolicy.HostPolicy) for policy in value.values()):
        return dict(value)
    flags = [(name, setting, str(v)) for name, settings in value.items() for setting, v in settings.items()]
    return hostpolicy.build(flags)


#: ``tritonserver``'s name → (tritonpy's name, how the value becomes tritonpy's).
RENAMED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "startup_models": ("load_model", list),
    "strict_model_config": ("disable_auto_complete_config", bool),
    "exit_timeout": ("exit_timeout_secs", float),
    "log_warn": ("log_warning", bool),
    "metrics": ("allow_metrics", bool),
    "gpu_metrics": ("allow_gpu_metrics", bool),
    "cpu_metrics": ("allow_cpu_metrics", bool),
    "metrics_interval": ("metrics_interval_ms", int),
    "pinned_memory_pool_size": ("pinned_memory_pool_byte_size", int),
    "cuda_memory_pool_sizes": (
        "cuda_memory_pool_byte_size",
        lambda v: {int(k): int(n) for k, n in v.items()},
    ),
    "rate_limiter_mode": ("rate_limit", _plain),
    "rate_limiter_resources": (
        "rate_limit_resource",
        lambda v: [
            f"{r.name}:{r.count}:{r.device}" if isinstance(r, RateLimiterResource) else str(r) for r in v
        ],
    ),
    "backend_configuration": (
        "backend_config",
        lambda v: {b: {k: str(x) for k, x in s.items()} for b, s in v.items()},
    ),
    "metrics_configuration": ("metrics_config", _flatten),
}

#: Fields of tritonpy's own whose value ``tritonserver`` gives in another form.
CONVERTED: dict[str, Callable[[Any], Any]] = {
    "model_control_mode": _plain,
    "log_format": _plain,
    "log_file": lambda v: "" if v is None else str(v),
    "cache_config": lambda v: {c: {k: str(x) for k, x in s.items()} for c, s in v.items()},
    "host_policies": _host_policies,
}


def translate(key: str, value: Any) -> tuple[str, Any] | None:
    """tritonpy's ``(field, value)`` for option ``key`` (tritonpy's name or ``tritonserver``'s);
    None for one of ``tritonserver``'s that has no effect here."""
    if key in IGNORED:
        log.info("option '%s' has no effect in tritonpy", key)
        return None
    if key in RENAMED:
        name, convert = RENAMED[key]
        converted = convert(value)
        return (name, converted) if name else None
    own = CONVERTED.get(key)
    return (key, own(value)) if own is not None else (key, value)
