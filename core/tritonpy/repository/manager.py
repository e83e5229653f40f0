"""The one owner of a server's model records: what is loaded, in which state,
lookup, and every change to it (model control).

``ModelManager`` holds a ``LoadRecord`` per model (each serving version's
``LoadedVersion``, the reasons of those that failed, and those retired),
answers name→version lookups with Triton's messages, builds the repository
index, and loads, reloads and unloads under the control mode:

- ``none``: every model of the repositories loads at start; nothing changes after.
- ``explicit``: the models named by ``--load-model`` (``*``: all) load at start;
  the load / unload API (and BLS ``load_model``) changes them.
- ``poll``: every model loads at start, and each poll picks up added, removed
  and changed models and versions.

In explicit mode, repository roots can also be registered and unregistered while
the server runs (``register_repository``), some of their folders under other names.

A reload builds the new versions while the old ones serve, swaps them in in one
step, and only then retires the old ones (their queued and in-flight requests
finish; a request that looked an old version up just before the swap goes to
the new one). A reload that fails keeps the old versions serving. Records are
replaced whole (copy on write under a lock), so readers on the hot path
(``get_version``) take no lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tritonpy_sdk import ErrorCode, TritonError

from ..model_version import parse_version
from ..runtime.ensemble_plan import MemberState
from ..runtime.loading import LoadRecord, ModelLoader
from ..runtime.model import LoadedVersion, ModelState
from ..scheduler import remaining
from ._layout import RepoEntry, scan_repositories
from ._stamp import folder_stamp
from .dependencies import config_members, cycle_of, folder_members, load_waves, needed_closure
from .overrides import Override, parse_override
from .remote import RemoteRepository

log = logging.getLogger("tritonpy")

#: Control modes (``--model-control-mode``).
MODES = ("none", "explicit", "poll")

#: Triton's answer to a load or unload the control mode does not allow.
_NOT_ALLOWED = "explicit model load / unload is not allowed if polling is enabled"


class ModelManager:
    """Model records of one server: states, lookup, index and model control."""

    def __init__(
        self,
        loader: ModelLoader,
        repositories: Sequence[Path | RemoteRepository] = (),
        mode: str = "none",
        load_threads: int = 4,
        load_retries: int = 0,
        config_name: str = "",
    ) -> None:
        if mode not in MODES:
            raise TritonError.invalid_arg(
                f"unexpected value for --model-control-mode '{mode}': use none, explicit or poll"
            )
        if load_threads < 1:
            raise TritonError.invalid_arg("--model-load-thread-count must be at least 1")
        self._loader = loader
        #: The repository roots, each with the names its mapped folders serve under
        #: (``{folder: model name}``, set by ``register_repository``). Replaced whole,
        #: never changed in place: a scan reads one consistent tuple without a lock.
        self._roots: tuple[tuple[Path | RemoteRepository, Mapping[str, str]], ...] = tuple(
            (r, {}) for r in repositories
        )
        self.mode = mode
        self._load_threads = load_threads
        self._retries = max(0, load_retries)
        #: ``--model-config-name``: read models from ``configs/<name>.pbtxt`` where they have one.
        self._config_name = config_name
        self._records: dict[str, LoadRecord] = {}
        self._lock = threading.Lock()  # writers of _records and _roots only
        self._model_locks: dict[str, threading.Lock] = {}
        #: Models named at start that are in no repository (``--load-model``).
        self.startup_errors: list[tuple[str, str]] = []
        #: Threads unloading retired versions (joined when the server stops).
        self._unloading: set[threading.Thread] = set()
        self._unloading_lock = threading.Lock()
        self._poller: threading.Thread | None = None
        self._poll_lock = threading.Lock()
        self._stop_polling = threading.Event()
        #: Models loaded by name through the API or --load-model (not only as an
        #: ensemble's members): unload_dependents leaves them loaded, as Triton does.
        self._explicit: set[str] = set()
        #: Ensembles unloaded because a model they use was: its next load brings them back.
        self._taken_down: set[str] = set()
        #: Folder stamps of polls whose load failed (not retried until they change).
        self._failed_stamps: dict[str, str] = {}

    # -- start and stop -------------------------------------------------------------------

    def startup(self, names: Sequence[str] = (), skip: Callable[[], bool] = lambda: False) -> None:
        """Load what the mode loads at start: every model (``none``, ``poll``), or
        ``names`` (``explicit``; ``*`` is every model). Models load in parallel;
        those not started once ``skip()`` is true (the server is stopping) are left out."""
        dirs = self._scan()
        members = {d.name: folder_members(d) for d in dirs}
        if self.mode == "explicit" and "*" not in names:
            by_name = {d.name: d for d in dirs}
            dirs = []
            for name in dict.fromkeys(names):
                if name not in by_name:
                    reason = f"failed to poll model '{name}': model not found in any model repository"
                    log.error("%s", reason)
                    self.startup_errors.append((name, reason))
            # An ensemble named at start brings the models it needs.
            self._explicit.update(n for n in names if n in by_name)
            dirs = [by_name[n] for n in needed_closure([n for n in names if n in by_name], members)]
        self._load_in_waves(dirs, members, skip)

    def _load_in_waves(
        self,
        dirs: Sequence[RepoEntry],
        members: Mapping[str, list[str]],
        skip: Callable[[], bool] = lambda: False,
    ) -> None:
        """Load ``dirs`` in parallel, ensembles after the models they need."""
        by_name = {d.name: d for d in dirs}
        waves, cycles = load_waves({d.name: members.get(d.name, []) for d in dirs})
        for name, message in cycles.items():
            log.error("failed to load '%s': %s", name, message)
            self._put(LoadRecord(name, by_name[name].path, error=f"{ErrorCode.INVALID_ARG.value}: {message}"))

        def load(mdir: RepoEntry) -> LoadRecord | None:
            if skip():
                return None
            record = self._load(mdir)
            self._serve_none_if_failed(record)
            return record

        with ThreadPoolExecutor(max_workers=self._load_threads, thread_name_prefix="tritonpy-load") as pool:
            for wave in waves:
                records = [r for r in pool.map(load, [by_name[n] for n in wave]) if r is not None]
                with self._lock:
                    self._records = {**self._records, **{r.name: r for r in records}}

    def start_polling(self, interval: float) -> None:
        """Poll the repositories every ``interval`` seconds (mode ``poll``)."""
        if self.mode != "poll" or self._poller is not None:
            return
        if interval <= 0:
            log.warning("--repository-poll-secs is %s: the repository is not polled", interval)
            return

        def run() -> None:
            while not self._stop_polling.wait(interval):
                try:
                    self.poll()
                except Exception:  # a poll that failed must not end polling
                    log.exception("polling the model repository failed")

        self._poller = threading.Thread(target=run, name="tritonpy-poll", daemon=True)
        self._poller.start()

    def unload_all(self, deadline: float | None) -> None:
        """Stop polling, unload every version (queued work finishes until
        ``deadline``), and wait for the unloads already under way."""
        self._stop_polling.set()
        if self._poller is not None:
            self._poller.join(remaining(deadline))
        for mv in self.loaded_versions():
            mv.unload(deadline)
        with self._unloading_lock:
            pending = list(self._unloading)
        for thread in pending:
            thread.join(remaining(deadline))
        for record in self._records.values():
            if record.override is not None:
                record.override.remove()

    # -- model control ----------------------------------------------------------------------

    def load(self, name: str, config: str | None = None, files: Mapping[str, bytes] | None = None) -> None:
        """Load or reload ``name`` (explicit mode), with an optional config override
        (JSON) and model files. Returns once the new versions serve; TritonError
        with the reason if the load failed (the versions that served go on serving).

        As Triton: an ensemble's members that do not serve load first; loading a
        model brings back the ensembles that unloading it had taken down."""
        if self.mode != "explicit":
            raise TritonError.unavailable(_NOT_ALLOWED)
        override = parse_override(name, config, files)
        try:
            mdir = (
                RepoEntry(name, override.folder, config_name=self._config_name)
                if override and override.folder
                else self._find(name)
            )
        except TritonError:
            if override is not None:
                override.remove()
            raise
        needs = config_members(override.config) if override is not None else folder_members(mdir)
        if needs:
            cycle = cycle_of(name, self._needs_graph(name, needs))
            if cycle is not None:
                if override is not None:
                    override.remove()
                self._fail_cycle(name, mdir.path, cycle)
                raise TritonError.invalid_arg(f"load failed for model '{name}': {cycle}")
            self._load_members(name, needs)
        self._explicit.add(name)
        self._taken_down.discard(name)
        with self._model_lock(name):
            self._reload(mdir, override, explicit=True)
        self._restore_dependents(name)

    def register_repository(
        self, path: str | os.PathLike[str], mapping: Mapping[str, str] | None = None
    ) -> None:
        """Add repository root ``path`` (explicit mode), as Triton's
        ``TRITONSERVER_ServerRegisterModelRepository``: its folders can be loaded by
        name from now on; ``mapping`` (``{folder: model name}``) serves some of them
        under other names, their configs' ``name`` replaced. Nothing loads here.

        TritonError in Triton's words: UNSUPPORTED outside explicit mode; INVALID_ARG
        for a path that is not a folder or a model name mapped twice; ALREADY_EXISTS
        for a root already served or a model name another registration mapped."""
        if self.mode != "explicit":
            raise TritonError.unsupported(
                "repository registration is not allowed if model control mode is not EXPLICIT"
            )
        given = os.fspath(path)
        names = dict(mapping or {})
        seen: set[str] = set()
        for folder, name in names.items():
            if not isinstance(name, str):
                raise TritonError.invalid_arg(
                    f"Mapped model name must be a string, found another type for {folder}"
                )
            if name in seen:
                raise TritonError.invalid_arg(
                    f"failed to register '{given}', there is a conflicting mapping for '{name}'"
                )
            seen.add(name)
        root = Path(given)
        if not root.is_dir():
            raise TritonError.invalid_arg(f"failed to register '{given}', repository not found")
        with self._lock:
            if any(_root_key(r) == _root_key(root) for r, _ in self._roots):
                raise TritonError(
                    f"model repository '{given}' has already been registered", ErrorCode.ALREADY_EXISTS
                )
            taken = {name for _, m in self._roots for name in m.values()}
            clash = sorted(seen & taken)
            if clash:
                raise TritonError(
                    f"failed to register '{clash[0]}', there is a conflicting mapping for '{clash[0]}'",
                    ErrorCode.ALREADY_EXISTS,
                )
            self._roots = (*self._roots, (root, names))
        log.info("Model repository registered: %s", given)

    def unregister_repository(self, path: str | os.PathLike[str]) -> None:
        """Remove repository root ``path`` (explicit mode; a root given at start too), as
        Triton's ``TRITONSERVER_ServerUnregisterModelRepository``: its folders and
        mapped names are no longer found. Models loaded from it stay loaded.
        TritonError: UNSUPPORTED outside explicit mode, INVALID_ARG for a root not served."""
        if self.mode != "explicit":
            raise TritonError.unsupported(
                "repository unregistration is not allowed if model control mode is not EXPLICIT"
            )
        given = os.fspath(path)
        key = _root_key(Path(given))
        with self._lock:
            kept = tuple(entry for entry in self._roots if _root_key(entry[0]) != key)
            if len(kept) == len(self._roots):
                raise TritonError.invalid_arg(f"failed to unregister '{given}', repository not found")
            self._roots = kept
        log.info("Model repository unregistered: %s", given)

    def _needs_graph(self, name: str, needs: list[str]) -> dict[str, list[str]]:
        """The models ``name`` needs, at any depth, each with those it needs."""
        graph = {name: needs}
        todo = list(needs)
        while todo:
            member = todo.pop()
            if member in graph:
                continue
            try:
                graph[member] = folder_members(self._find(member))
            except TritonError:
                graph[member] = []
            todo.extend(graph[member])
        return graph

    def _fail_cycle(self, name: str, path: Path, message: str) -> None:
        """Ensemble ``name`` needs itself: it does not load (what served before serves on)."""
        record = self._records.get(name)
        error = f"{ErrorCode.INVALID_ARG.value}: {message}"
        if record is None or (not record.versions and record.error != error):
            log.error("failed to load '%s': %s", name, message)
            self._put(LoadRecord(name, path, error=error))

    def _load_members(self, ensemble: str, names: Sequence[str]) -> None:
        """Load the models an ensemble needs that do not serve yet (those they need
        first). A member that fails to load is the ensemble's reason when it loads."""
        for name in names:
            record = self._records.get(name)
            if record is not None and record.versions:
                continue
            try:
                mdir = self._find(name)
            except TritonError:
                continue  # not in the repository: the ensemble's load says so
            self._load_members(name, folder_members(mdir))
            with self._model_lock(name):
                try:
                    self._reload(mdir, None, explicit=True)
                except TritonError as exc:
                    log.error("loading '%s' for ensemble '%s' failed: %s", name, ensemble, exc.message)

    def _restore_dependents(self, name: str) -> None:
        """Reload the ensembles that were unloaded because ``name`` was."""
        for ensemble in sorted(self._taken_down):
            record = self._records.get(ensemble)
            if record is None or name not in _folder_members(record):
                continue
            self._taken_down.discard(ensemble)
            try:
                mdir = self._find(ensemble)
                self._load_members(ensemble, folder_members(mdir))
                with self._model_lock(ensemble):
                    self._reload(mdir, None, explicit=True)
            except TritonError as exc:
                log.error("reloading ensemble '%s' after '%s' loaded failed: %s", ensemble, name, exc.message)
                continue
            self._restore_dependents(ensemble)

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Unload every version of ``name`` (explicit mode). Returns at once, as Triton:
        the versions are UNLOADING until their queued and in-flight requests finish,
        then UNAVAILABLE ("unloaded"). A model that is not loaded is left as it is.

        As Triton: the ensembles that use ``name`` are unloaded too (a later load of
        ``name`` brings them back); with ``unload_dependents``, so are the models an
        ensemble loaded for itself that no other serving ensemble uses."""
        if self.mode != "explicit":
            raise TritonError.unavailable(_NOT_ALLOWED)
        self._explicit.discard(name)
        self._taken_down.discard(name)  # unloaded by name: a member's load leaves it so
        record = self._records.get(name)
        members = _record_members(record) if record is not None else []
        self._unload_with_users(name)
        if unload_dependents:
            self._unload_members(members)

    def _unload_with_users(self, name: str) -> None:
        for user in self._users(name):
            if user != name:
                self._taken_down.add(user)
                log.info("unloading ensemble '%s': it uses '%s', which is unloading", user, name)
                self._unload_with_users(user)
        with self._model_lock(name):
            self._unload(name)

    def _unload_members(self, members: list[str]) -> None:
        """Unload ``members`` that were loaded only for ensembles and that no serving
        ensemble uses any more (and theirs in turn)."""
        for member in members:
            record = self._records.get(member)
            if record is None or not record.versions or member in self._explicit or self._users(member):
                continue
            nested = _record_members(record)
            with self._model_lock(member):
                self._unload(member)
            self._unload_members(nested)

    def _users(self, name: str) -> list[str]:
        """The serving ensembles that use model ``name``."""
        return [r.name for r in self._records.values() if name in _record_members(r)]

    def poll(self) -> None:
        """One poll (mode ``poll``): load added models, reload changed ones, unload
        removed ones. A changed model that fails to load keeps its old versions
        serving, and is tried again only once its folder changes again. One poll at
        a time: the poller's and one asked for (``Server.poll_model_repository``)."""
        with self._poll_lock:
            self._poll()

    def _poll(self) -> None:
        try:
            dirs = {d.name: d for d in self._scan()}
        except OSError as exc:  # a root gone, or an object store that did not answer
            log.error("polling the model repository failed: %s", exc)
            return
        for name in sorted(set(self._records) - set(dirs)):
            gone = self._records[name]
            if not gone.stamp and not gone.versions and not gone.failed and gone.error is None:
                continue  # unloaded at an earlier poll
            if gone.versions:
                log.info("model '%s' was removed from the repository; unloading it", name)
            self._failed_stamps.pop(name, None)
            with self._model_lock(name):
                self._unload(name, removed=True)
        members = {name: folder_members(mdir) for name, mdir in dirs.items()}
        waves, cycles = load_waves(members)
        for name, message in cycles.items():
            self._fail_cycle(name, dirs[name].path, message)
        order = [name for wave in waves for name in wave]
        for name in order:
            mdir = dirs[name]
            if self._stop_polling.is_set():
                return
            stamp = folder_stamp(mdir.path)
            record = self._records.get(name)
            if record is not None and record.stamp == stamp:
                continue
            if self._failed_stamps.get(name) == stamp:
                continue
            with self._model_lock(name):
                try:
                    self._reload(mdir, None, explicit=False, stamp=stamp)
                except TritonError:
                    self._failed_stamps[name] = stamp
                else:
                    self._failed_stamps.pop(name, None)

    # -- how a model changes ----------------------------------------------------------------

    def _scan(self) -> list[RepoEntry]:
        """The model folders of every root; remote roots are synced into their cache
        folders first (``RemoteRepositoryError``, an ``OSError``, when a store fails)."""
        roots: list[Path] = []
        mappings: dict[Path, Mapping[str, str]] = {}
        for repository, mapping in self._roots:
            root = repository.sync() if isinstance(repository, RemoteRepository) else repository
            roots.append(root)
            if mapping:
                mappings[root] = mapping
        return scan_repositories(roots, self._config_name, mappings)

    def _find(self, name: str) -> RepoEntry:
        try:
            dirs = self._scan()
        except OSError as exc:
            raise TritonError.internal(
                f"failed to load '{name}', failed to poll from model repository: {exc}"
            ) from None
        for mdir in dirs:
            if mdir.name == name:
                return mdir
        raise TritonError.internal(
            f"failed to load '{name}', failed to poll from model repository: "
            "model not found in any model repository"
        )

    def _reload(self, mdir: RepoEntry, override: Override | None, explicit: bool, stamp: str = "") -> None:
        """Load ``mdir`` and swap it in for what serves; the caller holds the model's lock.
        ``override`` is this call's from now on: kept with the versions loaded from
        it, and its files removed once nothing loaded from them is left."""
        name = mdir.name
        stamp = stamp or folder_stamp(mdir.path)
        old = self._records.get(name)
        if (
            explicit
            and override is None
            and old is not None
            and old.override is None
            and old.versions
            and old.failure() is None
            and old.stamp == stamp
        ):
            # As Triton: a load of a model whose files did not change since it
            # loaded (and that serves without an override) leaves it as it is.
            log.info("model '%s' is unchanged since it was loaded; nothing to reload", name)
            return
        record = self._load(mdir, override, stamp)
        failure = record.failure()
        if failure is not None and old is not None and old.versions:
            # A failed reload: the old versions go on serving. New versions that did
            # load are let go; the failures of versions nobody serves are shown.
            self._retire(list(record.versions.values()), override=override, log_it=False)
            kept = LoadRecord(
                name,
                old.path,
                versions=old.versions,
                failed={v: r for v, r in record.failed.items() if v not in old.versions},
                error=None,
                stamp=old.stamp,
                override=old.override,
                retired=old.retired,
            )
            self._put(kept)
            log.error("reloading '%s' failed; the versions loaded before serve on: %s", name, failure)
            raise _load_failed(record, failure)
        if old is not None:
            record.retired = {
                v: mv for v, mv in {**old.retired, **old.versions}.items() if v not in record.versions
            }
        unloaded = self._serve_none_if_failed(record, override)
        self._put(record)
        if override is not None and not record.versions and not unloaded:
            override.remove()  # every version failed: nothing reads these files
        if old is not None:
            self._retire(list(old.versions.values()), override=old.override)
        if failure is not None:
            raise _load_failed(record, failure)

    def _load(self, mdir: RepoEntry, override: Override | None = None, stamp: str = "") -> LoadRecord:
        """Load ``mdir`` into a new record stamped with its folder as it was before the
        load began (a change made while it loads shows at the next poll)."""
        stamp = stamp or folder_stamp(mdir.path)
        record = self._loader.load(mdir, override, retries=self._retries, members=self._member_state)
        record.stamp = stamp
        return record

    def _unload(self, name: str, removed: bool = False) -> None:
        """Unload model ``name``; ``removed``: its folder is gone (poll mode). As in Triton
        the model stays known, unloaded (requests get "has no available versions", a
        version's "is not at ready state"); the index, which lists folders, leaves it
        out, and its folder loads again should it come back, whatever its stamp."""
        record = self._records.get(name)
        if record is None:
            return
        if record.versions or record.failed or record.error is not None or removed:
            # What a failed load left is cleared too: an unloaded model no longer
            # keeps a strictly-ready server from being ready.
            self._put(
                LoadRecord(
                    name,
                    record.path,
                    retired={**record.retired, **record.versions},
                    stamp="" if removed else record.stamp,
                )
            )
        self._retire(list(record.versions.values()), override=record.override)

    def _serve_none_if_failed(self, record: LoadRecord, override: Override | None = None) -> bool:
        """As Triton: a load that failed for one version serves none of them. Those that did
        load are unloaded (the index shows them UNAVAILABLE, "unloaded"), ``override``'s
        files removed after them. Whether there were any."""
        if not record.versions or record.failure() is None:
            return False
        loaded = list(record.versions.values())
        record.retired = {**record.retired, **record.versions}
        record.versions = {}
        self._retire(loaded, override=override)
        return True

    def _retire(
        self, versions: list[LoadedVersion], override: Override | None = None, log_it: bool = True
    ) -> None:
        """Stop ``versions`` taking requests now, and unload them on a thread of their
        own: their queued and in-flight requests finish first (a model's own BLS call
        may be one of them, so the caller does not wait)."""
        for mv in versions:
            mv.retire()
        if not versions and override is None:
            return

        def run() -> None:
            try:
                for mv in versions:
                    mv.unload()
                    if log_it:
                        log.info("successfully unloaded '%s' version %d", mv.name, mv.version)
            finally:
                if override is not None:
                    override.remove()
                with self._unloading_lock:
                    self._unloading.discard(threading.current_thread())

        thread = threading.Thread(target=run, name="tritonpy-unload", daemon=True)
        with self._unloading_lock:
            self._unloading.add(thread)
        thread.start()

    def _put(self, record: LoadRecord) -> None:
        with self._lock:
            self._records = {**self._records, record.name: record}

    def _model_lock(self, name: str) -> threading.Lock:
        """One lock per model name: its loads and unloads happen one at a time;
        different models load in parallel."""
        with self._lock:
            return self._model_locks.setdefault(name, threading.Lock())

    # -- lookup --------------------------------------------------------------------------

    def _member_state(self, name: str) -> MemberState | None:
        """What an ensemble being loaded sees of its member ``name`` (None: no such model)."""
        record = self._records.get(name)
        if record is None:
            return None
        ready = {v: mv for v, mv in record.versions.items() if mv.ready}
        failure = record.failure()
        return MemberState(ready, failure.removesuffix(";\n") if failure else None)

    def __contains__(self, name: str) -> bool:
        return name in self._records

    def get_version(self, name: str, version: int | str | None = None) -> LoadedVersion:
        """The ready model version ``name``/``version`` (latest when none), or TritonError.

        A lookup that fails on a record replaced meanwhile (a reload swapped a new one
        in and retired the versions this snapshot still holds) looks again."""
        while True:
            record = self._records.get(name)
            try:
                return _version_of(record, name, version)
            except TritonError:
                if self._records.get(name) is record:
                    raise

    def ready_versions(self, name: str) -> list[int]:
        """The versions of ``name`` that are ready, in order."""
        record = self._records.get(name)
        if record is None:
            return []
        return [v for v in sorted(record.versions) if record.versions[v].ready]

    def statistics_versions(self, name: str, version: int | str | None) -> list[LoadedVersion]:
        """The loaded versions of ``name`` the statistics extension reports (Triton's messages)."""
        record = self._records.get(name)
        if record is None or not record.versions:
            raise TritonError.invalid_arg(f"requested model '{name}' is not available")
        v = parse_version(version, name)
        if v < 0:
            return [record.versions[k] for k in sorted(record.versions)]
        if v in record.versions:
            return [record.versions[v]]
        raise TritonError.invalid_arg(f"requested model version is not available for model '{name}'")

    def loaded_versions(self) -> list[LoadedVersion]:
        """Every serving model version, by name then version (read at each metrics scrape)."""
        records = self._records
        return [records[n].versions[v] for n in sorted(records) for v in sorted(records[n].versions)]

    # -- states ----------------------------------------------------------------------------

    def failed_models(self) -> list[tuple[str, str, str]]:
        """``(model, version, reason)`` for everything whose load failed."""
        failed = [
            (r.name, v, reason)
            for r in self._records.values()
            for v, state, reason in r.state_rows()
            if state == ModelState.UNAVAILABLE.value and reason != "unloaded"
        ]
        return failed + [(name, "", reason) for name, reason in self.startup_errors]

    def wait_unloaded(self, name: str, timeout: float | None = None) -> bool:
        """Wait until no version of ``name`` is still unloading (at most ``timeout`` s);
        whether none is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self._records.get(name)
            if record is None or all(
                state != ModelState.UNLOADING.value for _, state, _ in record.state_rows()
            ):
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        """The repository index extension: name, version, state, reason per version.

        As Triton's: the models of the repository folders, those never loaded by
        name only; a model loaded from a load request's files under a name no
        folder has is not listed."""
        records = self._records
        index: list[dict[str, str]] = []
        try:
            names = {d.name for d in self._scan()}
        except OSError:
            names = set()
        for name in sorted(names):
            if name not in records:
                if not ready:
                    index.append({"name": name})
                continue
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


def _root_key(root: Path | RemoteRepository) -> str:
    """What identifies a repository root: a remote root's URI, a folder's normalized path."""
    return root.uri if isinstance(root, RemoteRepository) else os.path.normpath(root)


def _load_failed(record: LoadRecord, failure: str) -> TritonError:
    """The error answering a load that failed with ``failure``. As Triton: a
    ``config.pbtxt`` that cannot be read is a repository poll failure (INTERNAL);
    anything else is the load's INVALID_ARG with its reason."""
    if record.unreadable is not None:
        return TritonError.internal(
            f"failed to load '{record.name}', failed to poll from model repository: {record.unreadable}"
        )
    return TritonError.invalid_arg(f"load failed for model '{record.name}': {failure}")


def _record_members(record: LoadRecord) -> list[str]:
    """The models the serving versions of ``record`` need (an ensemble's members)."""
    return list(dict.fromkeys(m for mv in record.versions.values() for m in config_members(mv.config)))


def _folder_members(record: LoadRecord) -> list[str]:
    """The models the versions ``record`` served or serves need (retired ones included)."""
    versions = [*record.versions.values(), *record.retired.values()]
    return list(dict.fromkeys(m for mv in versions for m in config_members(mv.config)))


_READY = ModelState.READY


def _version_of(record: LoadRecord | None, name: str, version: int | str | None) -> LoadedVersion:
    """The lookup of ``ModelManager.get_version`` in one snapshot of a model's record."""
    if record is None:
        raise TritonError.not_found(f"Request for unknown model: '{name}' is not found")
    v = version if type(version) is int else parse_version(version, name)
    if v < 0:  # the latest ready version (the common case: one loop, no list); 0 is a number
        latest: LoadedVersion | None = None
        for candidate in record.versions.values():
            # ``candidate.ready``, read without the property's call
            if candidate.state is _READY and (latest is None or candidate.version > latest.version):
                latest = candidate
        if latest is None:
            raise TritonError.not_found(f"Request for unknown model: '{name}' has no available versions")
        return latest
    mv = record.versions.get(v)
    if mv is None:
        if v in record.failed or v in record.retired:
            raise TritonError.unavailable(
                f"Request for unknown model: '{name}' version {v} is not at ready state"
            )
        raise TritonError.not_found(f"Request for unknown model: '{name}' version {v} is not found")
    if not mv.ready:
        raise TritonError.unavailable(
            f"Request for unknown model: '{name}' version {v} is not at ready state"
        )
    return mv
