"""Triton's model update: a reload that changes only ``instance_group`` keeps the model.

When a model is loaded again and neither its files nor its config changed but
for ``instance_group`` (and ``version_policy``), Triton does not load it anew:
the model stays initialized, instances whose group settings did not change
stay as they are (no ``instance_initialize`` again), the groups' new instances
are started and the ones no longer asked for are finalized. This module holds
the rules: when a reload may be an update (``needs_reload``), and which of the
serving instances the new instance groups keep (``match``, by Triton's instance
signature: a group's settings but its name and count, and the instance's device).

``HandOver`` is what lets the new instance set serve at once without two
schedulers running one instance: the new version's batch for an instance the old
one may still run waits until the old version has finished what it started or
queued; new instances serve at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import ModelInstance

from ..config import ModelConfig, copy_config, model_config_pb2

log = logging.getLogger("tritonpy.loading")

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
    stripped = copy_config(config)
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


def signatures(
    slots: Iterable[tuple[model_config_pb2.ModelInstanceGroup, ModelInstance]],
) -> dict[str, bytes]:
    """Each instance's ``signature`` by name, from ``(group, instance)`` pairs."""
    return {inst.name: signature(group, inst.device_id) for group, inst in slots}


@dataclass
class Match:
    """The instances of an update: ``instances`` the new set in the order of its groups,
    ``added`` those of them to start, ``removed`` the serving ones it leaves out."""

    instances: list[ModelInstance]
    added: list[ModelInstance]
    removed: list[ModelInstance]

    @property
    def kept(self) -> list[ModelInstance]:
        """The serving instances the new set keeps."""
        added = {id(inst) for inst in self.added}
        return [inst for inst in self.instances if id(inst) not in added]


def match(
    serving: Sequence[ModelInstance],
    serving_signatures: dict[str, bytes],
    wanted: Sequence[tuple[bytes, ModelInstance]],
) -> Match:
    """Keep a serving instance for each wanted one of the same signature (the first
    free, in the order of ``serving_signatures``: its instance groups'); a wanted
    instance without one is new. A new instance whose name a
    kept one already has is named with the next free index of its group."""
    free: dict[bytes, list[ModelInstance]] = {}
    order = {name: i for i, name in enumerate(serving_signatures)}  # the groups' order
    for inst in sorted(serving, key=lambda inst: order[inst.name]):
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


class HandOver:
    """One instance passing from the version a model update replaces to the new one: a
    batch of the new version waits (``wait``), or is started later (``then``), until
    the old version no longer runs the instance (``done``)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._then: list[Callable[[], None]] = []

    @property
    def is_done(self) -> bool:
        return self._event.is_set()

    def wait(self) -> None:
        self._event.wait()

    def then(self, start: Callable[[], None]) -> bool:
        """Call ``start`` once done; False (nothing kept) when done already: start now."""
        with self._lock:
            if self._event.is_set():
                return False
            self._then.append(start)
            return True

    def done(self) -> None:
        with self._lock:
            self._event.set()
            waiting, self._then = self._then, []
        for start in waiting:
            try:
                start()
            except Exception:  # each start answers its own jobs; one must not stop the rest
                log.exception("starting a batch held for a model update failed")
