"""Which models an ensemble needs, and the order that loads members before ensembles.

An ensemble depends on the models its steps name (which may be ensembles
themselves). The model manager loads a repository in waves: every model of a
wave depends only on models of earlier waves (or on none in the repository),
so an ensemble finds its members loaded. Ensembles that depend on themselves,
directly or through others, never load: Triton's "circular dependency
between ensembles" is their reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tritonpy_sdk import TritonError

from ..config import ModelConfig, load_config_file
from ..config._validate import ENSEMBLE_PLATFORM
from ._layout import RepoEntry


def config_members(config: ModelConfig) -> list[str]:
    """The models ``config``'s steps name, each once, when it is an ensemble; else []."""
    if config.platform != ENSEMBLE_PLATFORM:
        return []
    return list(dict.fromkeys(s.model_name for s in config.ensemble_scheduling.step if s.model_name))


def folder_members(mdir: RepoEntry) -> list[str]:
    """``config_members`` of the model folder's config file ([] when it has none
    or it cannot be read: its load reports why)."""
    path = mdir.config_path
    if mdir.error is not None or not path.is_file():
        return []
    try:
        return config_members(load_config_file(path))
    except (TritonError, OSError):
        return []


def load_waves(members: Mapping[str, list[str]]) -> tuple[list[list[str]], dict[str, str]]:
    """Split the models of ``members`` (name → the models it needs) into waves to load
    one after the other; and the models that cannot load, with Triton's reason."""
    cycles = {name: message for name in members if (message := cycle_of(name, members)) is not None}
    depth: dict[str, int] = {}

    def depth_of(name: str, path: frozenset[str]) -> int:
        if name in depth:
            return depth[name]
        needs = [m for m in members.get(name, []) if m in members and m not in path]
        depth[name] = 1 + max((depth_of(m, path | {name}) for m in needs), default=-1)
        return depth[name]

    waves: dict[int, list[str]] = {}
    for name in members:
        if name not in cycles:
            waves.setdefault(depth_of(name, frozenset()), []).append(name)
    return [waves[d] for d in sorted(waves)], cycles


def needed_closure(names: Iterable[str], members: Mapping[str, list[str]]) -> list[str]:
    """``names`` and every model they need, at any depth (those in ``members``)."""
    found: dict[str, None] = {}
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if name in found:
            continue
        found[name] = None
        todo.extend(m for m in members.get(name, []) if m in members)
    return list(found)


def cycle_of(start: str, members: Mapping[str, list[str]]) -> str | None:
    """Triton's message when ``start`` needs itself through its members, else None."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        for member in members.get(name, []):
            if member == start:
                return f"circular dependency between ensembles: {start} -> ... -> {name} -> {start}"
            if member not in seen:
                seen.add(member)
                todo.append(member)
    return None
