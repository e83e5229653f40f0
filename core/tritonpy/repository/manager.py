"""The one owner of a server's model records: what is loaded, in which state, and lookup.

``ModelManager`` holds a ``ModelRecord`` per model folder (each version's
``ModelVersion`` and the reasons of those that failed), answers name→version
lookups with Triton's messages, builds the repository index, and loads and
unloads. ``Server`` delegates every model-lifecycle question here; metrics and
statistics read ``loaded_versions()`` each time, so they always show the
current set.

Records are replaced whole (copy on write under a lock), so readers on the
hot path (``get_version``) take no lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tritonpy_sdk import TritonError

from ..loading import ModelLoader, ModelRecord
from ..model import ModelState, ModelVersion
from ._layout import ModelDir

#: How many models load at once.
LOAD_THREADS = 4


class ModelManager:
    """Model records of one server, their states, lookup and index."""

    def __init__(self, loader: ModelLoader) -> None:
        self._loader = loader
        self._records: dict[str, ModelRecord] = {}
        self._lock = threading.Lock()  # writers only

    # -- loading and unloading ------------------------------------------------------------

    def load_all(self, dirs: Sequence[ModelDir], skip: Callable[[], bool] = lambda: False) -> None:
        """Load every model folder in parallel; those not started once ``skip()`` is
        true (the server is stopping) are left out."""

        def load(mdir: ModelDir) -> ModelRecord | None:
            return None if skip() else self._loader.load(mdir)

        with ThreadPoolExecutor(max_workers=LOAD_THREADS, thread_name_prefix="tritonpy-load") as pool:
            records = [r for r in pool.map(load, dirs) if r is not None]
        with self._lock:
            self._records = {**self._records, **{r.name: r for r in records}}

    def unload_all(self, deadline: float | None) -> None:
        """Unload every version (queued work finishes until ``deadline``)."""
        for mv in self.loaded_versions():
            mv.unload(deadline)

    # -- lookup --------------------------------------------------------------------------

    def __contains__(self, name: str) -> bool:
        return name in self._records

    def get_version(self, name: str, version: int | str | None = None) -> ModelVersion:
        """The ready model version ``name``/``version`` (latest when none), or TritonError."""
        record = self._records.get(name)
        if record is None:
            raise TritonError.not_found(f"Request for unknown model: '{name}' is not found")
        v = parse_version(name, version)
        if v <= 0:
            ready = [mv for mv in record.versions.values() if mv.ready]
            if not ready:
                raise TritonError.not_found(f"Request for unknown model: '{name}' has no available versions")
            return max(ready, key=lambda mv: mv.version)
        mv = record.versions.get(v)
        if mv is None:
            if v in record.failed:
                raise TritonError.unavailable(
                    f"Request for unknown model: '{name}' version {v} is not at ready state"
                )
            raise TritonError.not_found(f"Request for unknown model: '{name}' version {v} is not found")
        if not mv.ready:
            raise TritonError.unavailable(
                f"Request for unknown model: '{name}' version {v} is not at ready state"
            )
        return mv

    def ready_versions(self, name: str) -> list[int]:
        """The versions of ``name`` that are ready, in order."""
        record = self._records.get(name)
        if record is None:
            return []
        return [v for v in sorted(record.versions) if record.versions[v].ready]

    def statistics_versions(self, name: str, version: int | str | None) -> list[ModelVersion]:
        """The loaded versions of ``name`` the statistics extension reports (Triton's messages)."""
        record = self._records.get(name)
        if record is None or not record.versions:
            raise TritonError.invalid_arg(f"requested model '{name}' is not available")
        v = parse_version(name, version)
        if v <= 0:
            return [record.versions[k] for k in sorted(record.versions)]
        if v in record.versions:
            return [record.versions[v]]
        raise TritonError.invalid_arg(f"requested model '{name}' version {v} is not available")

    def loaded_versions(self) -> list[ModelVersion]:
        """Every loaded model version, by name then version (read at each metrics scrape)."""
        records = self._records
        return [records[n].versions[v] for n in sorted(records) for v in sorted(records[n].versions)]

    # -- states ----------------------------------------------------------------------------

    def failed_models(self) -> list[tuple[str, str, str]]:
        """``(model, version, reason)`` for everything that is not ready."""
        return [
            (r.name, v, reason)
            for r in self._records.values()
            for v, state, reason in r.state_rows()
            if state != ModelState.READY.value
        ]

    def models(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Every model version known: ``{(name, version): {name, version, state}}``."""
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for r in self._records.values():
            for v, state, _ in r.state_rows():
                ver = int(v) if v else -1
                out[(r.name, ver)] = {"name": r.name, "version": ver, "state": state}
        return out

    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        """The repository index extension: name, version, state, reason per version."""
        records = self._records
        index: list[dict[str, str]] = []
        for name in sorted(records):
            for version, state, reason in records[name].state_rows():
                if ready and state != ModelState.READY.value:
                    continue
                entry = {"name": name}
                if version:
                    entry["version"] = version
                entry["state"] = state
                if reason:  # Triton leaves "reason" out for models without one
                    entry["reason"] = reason
                index.append(entry)
        return index


def parse_version(name: str, version: int | str | None) -> int:
    """A version as the protocols give it (-1 or absent: latest); TritonError otherwise."""
    if version is None or version == "":
        return -1
    if isinstance(version, int):
        return version
    # ASCII digits (and -1 for "latest") only: int() would also read other scripts'
    # digits, "+", spaces and underscores.
    digits = version[1:] if version.startswith("-") else version
    if not (digits.isascii() and digits.isdigit()):
        raise TritonError.invalid_arg(
            f"failed to parse version '{version}' of model '{name}': it must be an integer"
        )
    return int(version)
