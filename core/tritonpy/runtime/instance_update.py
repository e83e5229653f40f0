"""Triton's model update: a reload that changes only ``instance_group`` keeps the model.

When a model is loaded again and neither its files nor its config changed but
for ``instance_group`` (and ``version_policy``), Triton does not load it anew:
the model stays initialized, instances whose group settings did not change
stay as they are (no ``instance_initialize`` again), the groups' new instances
are started and the ones no longer asked for are finalized. This module holds
the rules: when a reload may be an update (``needs_reload``), and which of the
serving instances the new instance groups keep (``match``, by Triton's instance
signature: a group's settings but its name and count, and the instance's device).

``HeldQueue`` is what lets the new instance set take over without two
schedulers running one instance: requests wait in it while the old scheduler
finishes what it queued, then go to the new scheduler in their order.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import ModelInstance, TritonError

from ..config import ModelConfig, model_config_pb2
from ..scheduler import Job, Scheduler, fail_unfinished

#: The config fields a model update may change (Triton's ``ConfigChangeRequiresReload``).
_UPDATABLE = ("instance_group", "version_policy")


def needs_reload(
    old: ModelConfig,
    old_written: dict[str, Any],
    new: ModelConfig,
    new_written: dict[str, Any],
    completed: Sequence[ModelConfig] = (),
) -> bool:
    """Whether going from config ``old`` to ``new`` (both as read, before auto-complete;
    ``*_written``: as the user wrote them, ``user_config``) needs the model loaded anew:
    anything but its instance groups and version policy differs (a field written as its
    default counts: auto-complete leaves it alone). A ``new`` equal to the config the
    model serves with, ``completed`` (each version's: what ``model_config`` shows, given
    back by a load), needs no reload either."""
    bare = _without_updatable(new)
    if completed and all(_without_updatable(c) == bare for c in completed):
        return False
    if _without_updatable(old) != bare:
        return True
    return {k: v for k, v in old_written.items() if k not in _UPDATABLE} != {
        k: v for k, v in new_written.items() if k not in _UPDATABLE
    }


def _without_updatable(config: ModelConfig) -> ModelConfig:
    stripped = ModelConfig()
    stripped.CopyFrom(config)
    for name in _UPDATABLE:
        stripped.ClearField(name)
    return stripped


def signature(group: model_config_pb2.ModelInstanceGroup, device: int) -> bytes:
    """Triton's ``InstanceConfigSignature`` and device: two instances with equal signatures
    are interchangeable (a group's settings but its name and count, the same device)."""
    normalized = model_config_pb2.ModelInstanceGroup()
    normalized.CopyFrom(group)
    normalized.name = "[Normalized]"
    normalized.count = 1
    serialized: bytes = normalized.SerializeToString(deterministic=True)
    return serialized + device.to_bytes(4, "little", signed=True)


@dataclass
class Match:
    """The instances of an update: ``instances`` the new set in the order of its groups,
    ``added`` those of them to start, ``removed`` the serving ones it leaves out."""

    instances: list[ModelInstance]
    added: list[ModelInstance]
    removed: list[ModelInstance]


def match(
    serving: Sequence[ModelInstance],
    serving_signatures: dict[str, bytes],
    wanted: Sequence[tuple[bytes, ModelInstance]],
) -> Match:
    """Keep a serving instance for each wanted one of the same signature (the first
    free, in order); a wanted instance without one is new. A new instance whose name a
    kept one already has is named with the next free index of its group."""
    free: dict[bytes, list[ModelInstance]] = {}
    for inst in serving:
        free.setdefault(serving_signatures[inst.name], []).append(inst)
    kept: list[ModelInstance | None] = []
    for sig, _ in wanted:
        pool = free.get(sig)
        kept.append(pool.pop(0) if pool else None)
    taken = {inst.name for inst in kept if inst is not None}
    instances: list[ModelInstance] = []
    added: list[ModelInstance] = []
    for reuse, (_, fresh) in zip(kept, wanted, strict=True):
        if reuse is not None:
            instances.append(reuse)
            continue
        if fresh.name in taken:
            group, _, _ = fresh.name.rpartition("_")
            index = 0
            while f"{group}_{index}" in taken:
                index += 1
            fresh.name = f"{group}_{index}"
        taken.add(fresh.name)
        instances.append(fresh)
        added.append(fresh)
    removed = [inst for pool in free.values() for inst in pool]
    return Match(instances, added, removed)


class HeldQueue(Scheduler):
    """The scheduler of a version taking over from the one it updates: requests queue
    here, in order, until ``release`` hands them to the real scheduler (which they
    reach directly from then on); ``stop`` before that answers them with the reason."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._held: list[Job] = []
        self._target: Scheduler | None = None
        self._closed = False

    def start(self) -> None:
        pass

    def enqueue(self, job: Job) -> None:
        with self._lock:
            target = self._target
            if target is None:
                if self._closed:
                    raise TritonError.unavailable(f"model '{self._name}' is not accepting requests")
                self._held.append(job)
                return
        target.enqueue(job)

    def release(self, target: Scheduler) -> None:
        """Hand what is held, and what comes from now on, to ``target`` (started)."""
        with self._lock:
            held, self._held = self._held, []
            self._target = target
            for job in held:  # under the lock: a later arrival cannot pass them
                try:
                    target.enqueue(job)
                except TritonError as exc:  # e.g. a full queue: answered as it would be
                    fail_unfinished([job], exc)

    def stop(self, deadline: float | None = None) -> None:
        with self._lock:
            self._closed = True
            held, self._held = self._held, []
        fail_unfinished(
            held, TritonError.unavailable(f"model '{self._name}' stopped before the request could run")
        )
