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

Records are kept by model key (``namespaces.model_key``): the model's name, or
under model namespacing ``<repository>::<name>``; names from outside (requests,
model control) find their keys through ``namespaces.lookup_key``.

A reload builds the new versions while the old ones serve, swaps them in in one
step, and only then retires the old ones (their queued and in-flight requests
finish; a request that looked an old version up just before the swap goes to
the new one). A reload that fails keeps the old versions serving. Records are
replaced whole (copy on write under a lock), so readers on the hot path
(``get_version``) take no lock.
"""

from __future__ import annotations

import functools
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
from ..runtime.instance_update import Match, needs_reload
from ..runtime.loading import LoadRecord, ModelLoader
from ..runtime.model import LoadedVersion, ModelState
from ..scheduler import remaining
from ._layout import RepoEntry, scan_repositories
from ._stamp import folder_stamp
from .dependencies import config_members, cycle_of, folder_members, load_waves, needed_closure
from .namespaces import keys_by_name, lookup_key, member_key
from .overrides import Override, parse_override
from .remote import RemoteRepository

log = logging.getLogger("tritonpy")

#: Control modes (``--model-control-mode``).
MODES = ("none", "explicit", "poll")

#: Triton's answer to a load or unload the control mode does not allow.
_NOT_ALLOWED = "explicit model load / unload is not allowed if polling is enabled"
#: How long a model update's load waits for the previous instances to finish their
#: requests and the removed ones to be finalized (they go on after it, should it pass).
_UPDATE_WAIT_S = 60.0


def check_load_name(name: str) -> None:
    """Refuse to load a model whose name is blank or could step out of a repository
    folder (``..``, or any ``/``), in Triton's words (its core, since 26.04)."""
    trimmed = name.strip(" \t\n\v\f\r")  # C's isspace, as Triton trims
    if not trimmed:
        raise TritonError.invalid_arg("Model name cannot be empty. Please enter a valid name to deploy.")
    if trimmed == ".." or "/" in trimmed:
        raise TritonError.invalid_arg(
            f"invalid model name '{name}', model name must not contain path traversal characters"
        )


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
        namespacing: bool = False,
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
        #: ``--model-namespacing``: each repository root is a namespace of its own.
        self._namespacing = namespacing
        #: The records by model key, and (``_names``) each model name's keys, both
        #: replaced whole under ``_lock`` (``_set_records``).
        self._records: dict[str, LoadRecord] = {}
        self._names: dict[str, tuple[str, ...]] = {}
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
        #: Models (keys) loaded by name through the API or --load-model (not only as an
        #: ensemble's members): unload_dependents leaves them loaded, as Triton does.
        self._explicit: set[str] = set()
        #: Ensembles (keys) unloaded because a model they use was: its next load brings them back.
        self._taken_down: set[str] = set()
        #: Folder stamps of polls whose load failed (not retried until they change), by key.
        self._failed_stamps: dict[str, str] = {}

    # -- start and stop -------------------------------------------------------------------

    def startup(self, names: Sequence[str] = (), skip: Callable[[], bool] = lambda: False) -> None:
        """Load what the mode loads at start: every model (``none``, ``poll``), or
        ``names`` (``explicit``; ``*`` is every model). Models load in parallel;
        those not started once ``skip()`` is true (the server is stopping) are left out."""
        scan = _Scan(self._scan())
        members = {d.key: scan.members(d) for d in scan.entries.values()}
        dirs = list(scan.entries.values())
        if self.mode == "explicit" and "*" not in names:
            wanted: list[str] = []
            for name in dict.fromkeys(names):
                if name not in scan.names:
                    reason = f"failed to poll model '{name}': model not found in any model repository"
                    log.error("%s", reason)
                    self.startup_errors.append((name, reason))
                wanted.extend(scan.names.get(name, ()))
            # An ensemble named at start brings the models it needs (as a load does:
            # under model namespacing, every model of each name its steps give).
            self._explicit.update(wanted)
            every = {key: scan.named_like(needs) for key, needs in members.items()}
            dirs = [scan.entries[k] for k in needed_closure(wanted, every)]
        self._load_in_waves(dirs, members, skip)

    def _load_in_waves(
        self,
        dirs: Sequence[RepoEntry],
        members: Mapping[str, list[str]],
        skip: Callable[[], bool] = lambda: False,
    ) -> None:
        """Load ``dirs`` in parallel, ensembles after the models they need (``members``:
        each key's member keys)."""
        by_key = {d.key: d for d in dirs}
        waves, cycles = load_waves({d.key: members.get(d.key, []) for d in dirs})
        for key, message in cycles.items():
            log.error("failed to load '%s': %s", key, message)
            self._put(_failed(by_key[key], f"{ErrorCode.INVALID_ARG.value}: {message}"))

        def load(mdir: RepoEntry) -> LoadRecord | None:
            if skip():
                return None
            record = self._load(mdir)
            self._serve_none_if_failed(record)
            return record

        with ThreadPoolExecutor(max_workers=self._load_threads, thread_name_prefix="tritonpy-load") as pool:
            for wave in waves:
                records = [r for r in pool.map(load, [by_key[k] for k in wave]) if r is not None]
                with self._lock:
                    self._set_records({**self._records, **{r.key: r for r in records}})

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
        check_load_name(name)
        override = parse_override(name, config, files)
        try:
            if override and override.folder:  # its own files: the repositories only for its members
                scan = self._scan_for(name, required=False)
                entries = [RepoEntry(name, override.folder, config_name=self._config_name)]
            else:
                scan = self._scan_for(name)
                entries = scan.find_all(name)
        except TritonError:
            if override is not None:
                override.remove()
            raise
        # Under model namespacing a name may be a model in several repositories: as
        # Triton, each of them loads (the first failure is the answer).
        failure: TritonError | None = None
        for mdir in entries:
            try:
                self._load_entry(mdir, override, scan)
            except TritonError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _load_entry(self, mdir: RepoEntry, override: Override | None, scan: _Scan) -> None:
        """``load`` of one model folder (or of the override's files)."""
        key = mdir.key
        names = config_members(override.config) if override is not None else folder_members(mdir)
        needs = [member_key(mdir.namespace, m, scan.names) for m in names]
        if needs:
            cycle = cycle_of(key, self._needs_graph(key, needs, scan))
            if cycle is not None:
                if override is not None:
                    override.remove()
                self._fail_cycle(mdir, cycle)
                raise TritonError.invalid_arg(f"load failed for model '{mdir.name}': {cycle}")
            self._load_members(key, scan.named_like(needs), scan)
        self._explicit.add(key)
        self._taken_down.discard(key)
        with self._model_lock(key):
            self._reload(mdir, override, explicit=True)
        self._restore_dependents(key, scan)

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

    def _needs_graph(self, key: str, needs: list[str], scan: _Scan) -> dict[str, list[str]]:
        """The models ``key`` needs, at any depth, each with those it needs (all keys)."""
        graph = {key: needs}
        todo = list(needs)
        while todo:
            member = todo.pop()
            if member in graph:
                continue
            entry = scan.entries.get(member)
            graph[member] = scan.members(entry) if entry is not None else []
            todo.extend(graph[member])
        return graph

    def _fail_cycle(self, mdir: RepoEntry, message: str) -> None:
        """Ensemble ``mdir`` needs itself: it does not load (what served before serves on)."""
        record = self._records.get(mdir.key)
        error = f"{ErrorCode.INVALID_ARG.value}: {message}"
        if record is None or (not record.versions and record.error != error):
            log.error("failed to load '%s': %s", mdir.key, message)
            self._put(_failed(mdir, error))

    def _load_members(self, ensemble: str, keys: Sequence[str], scan: _Scan) -> None:
        """Load the models an ensemble needs that do not serve yet (those they need
        first). A member that fails to load is the ensemble's reason when it loads."""
        for key in keys:
            record = self._records.get(key)
            if record is not None and record.versions:
                continue
            mdir = scan.entries.get(key)
            if mdir is None:
                continue  # not in the repository: the ensemble's load says so
            self._load_members(key, scan.loaded_with(mdir), scan)
            with self._model_lock(key):
                try:
                    self._reload(mdir, None, explicit=True)
                except TritonError as exc:
                    log.error("loading '%s' for ensemble '%s' failed: %s", key, ensemble, exc.message)

    def _restore_dependents(self, key: str, scan: _Scan) -> None:
        """Reload the ensembles that were unloaded because model ``key`` was."""
        for ensemble in sorted(self._taken_down):
            record = self._records.get(ensemble)
            if record is None or key not in self._member_keys(record, retired=True):
                continue
            self._taken_down.discard(ensemble)
            try:
                mdir = scan.find(ensemble, record.name)
                self._load_members(ensemble, scan.loaded_with(mdir), scan)
                with self._model_lock(ensemble):
                    self._reload(mdir, None, explicit=True)
            except TritonError as exc:
                log.error("reloading ensemble '%s' after '%s' loaded failed: %s", ensemble, key, exc.message)
                continue
            self._restore_dependents(ensemble, scan)

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Unload every version of ``name`` (explicit mode). Returns at once, as Triton:
        the versions are UNLOADING until their queued and in-flight requests finish,
        then UNAVAILABLE ("unloaded"). A model that is not loaded is left as it is.

        As Triton: the ensembles that use ``name`` are unloaded too (a later load of
        ``name`` brings them back); with ``unload_dependents``, so are the models an
        ensemble loaded for itself that no other serving ensemble uses."""
        if self.mode != "explicit":
            raise TritonError.unavailable(_NOT_ALLOWED)
        # Under model namespacing, as Triton: every model of that name.
        for key in self._names.get(name) or (name,):
            self._explicit.discard(key)
            self._taken_down.discard(key)  # unloaded by name: a member's load leaves it so
            record = self._records.get(key)
            members = self._member_keys(record) if record is not None else []
            self._unload_with_users(key, by_name=True)
            if unload_dependents:
                self._unload_members(members)

    def _unload_with_users(self, key: str, by_name: bool = False) -> None:
        for user in self._users(key):
            if user != key:
                self._taken_down.add(user)
                log.info("unloading ensemble '%s': it uses '%s', which is unloading", user, key)
                self._unload_with_users(user)
        with self._model_lock(key):
            self._unload(key, forget=by_name)

    def _unload_members(self, members: list[str]) -> None:
        """Unload ``members`` that were loaded only for ensembles and that no serving
        ensemble uses any more (and theirs in turn)."""
        for member in members:
            record = self._records.get(member)
            if record is None or not record.versions or member in self._explicit or self._users(member):
                continue
            nested = self._member_keys(record)
            with self._model_lock(member):
                self._unload(member)
            self._unload_members(nested)

    def _users(self, key: str) -> list[str]:
        """The serving ensembles that use model ``key``."""
        return [k for k, r in self._records.items() if key in self._member_keys(r)]

    def _member_keys(self, record: LoadRecord, retired: bool = False) -> list[str]:
        """The keys of the models the serving versions of ``record`` need (an
        ensemble's members); ``retired``: those its retired versions needed too."""
        versions = [*record.versions.values(), *(record.retired.values() if retired else ())]
        names = dict.fromkeys(m for mv in versions for m in config_members(mv.config))
        return [member_key(record.namespace, m, self._names) for m in names]

    def poll(self) -> None:
        """One poll (mode ``poll``): load added models, reload changed ones, unload
        removed ones. A changed model that fails to load keeps its old versions
        serving, and is tried again only once its folder changes again. One poll at
        a time: the poller's and one asked for (``Server.poll_model_repository``)."""
        with self._poll_lock:
            self._poll()

    def _poll(self) -> None:
        try:
            scan = _Scan(self._scan())
        except OSError as exc:  # a root gone, or an object store that did not answer
            log.error("polling the model repository failed: %s", exc)
            return
        dirs = scan.entries
        for key in sorted(set(self._records) - set(dirs)):
            gone = self._records[key]
            if not gone.stamp and not gone.versions and not gone.failed and gone.error is None:
                continue  # unloaded at an earlier poll
            if gone.versions:
                log.info("model '%s' was removed from the repository; unloading it", key)
            self._failed_stamps.pop(key, None)
            with self._model_lock(key):
                self._unload(key, removed=True)
        members = {key: scan.members(mdir) for key, mdir in dirs.items()}
        waves, cycles = load_waves(members)
        for key, message in cycles.items():
            self._fail_cycle(dirs[key], message)
        order = [key for wave in waves for key in wave]
        for key in order:
            mdir = dirs[key]
            if self._stop_polling.is_set():
                return
            stamp = folder_stamp(mdir.path)
            record = self._records.get(key)
            if record is not None and record.stamp == stamp:
                continue
            if self._failed_stamps.get(key) == stamp:
                continue
            with self._model_lock(key):
                try:
                    self._reload(mdir, None, explicit=False, stamp=stamp)
                except TritonError:
                    self._failed_stamps[key] = stamp
                else:
                    self._failed_stamps.pop(key, None)

    # -- how a model changes ----------------------------------------------------------------

    def _scan(self) -> list[RepoEntry]:
        """The model folders of every root; remote roots are synced into their cache
        folders first (``RemoteRepositoryError``, an ``OSError``, when a store fails)."""
        roots: list[Path] = []
        mappings: dict[Path, Mapping[str, str]] = {}
        namespaces: dict[Path, str] = {}
        for repository, mapping in self._roots:
            root = repository.sync() if isinstance(repository, RemoteRepository) else repository
            roots.append(root)
            if mapping:
                mappings[root] = mapping
            if self._namespacing:  # the repository as the server was given it
                namespaces[root] = _root_key(repository)
        return scan_repositories(roots, self._config_name, mappings, namespaces)

    def _scan_for(self, name: str, required: bool = True) -> _Scan:
        """``_scan`` for a load of ``name``: a repository that cannot be read fails it
        (unless not ``required``: then it shows no folder)."""
        try:
            return _Scan(self._scan())
        except OSError as exc:
            if not required:
                return _Scan([])
            raise TritonError.internal(
                f"failed to load '{name}', failed to poll from model repository: {exc}"
            ) from None

    def _reload(self, mdir: RepoEntry, override: Override | None, explicit: bool, stamp: str = "") -> None:
        """Load ``mdir`` and swap it in for what serves; the caller holds the model's lock.
        ``override`` is this call's from now on: kept with the versions loaded from
        it, and its files removed once nothing loaded from them is left."""
        name = mdir.name
        stamp = stamp or folder_stamp(mdir.path)
        old = self._records.get(mdir.key)
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
        if old is not None and self._update_in_place(mdir, override, old, stamp):
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
                namespace=old.namespace,
                read_config=old.read_config,
                read_written=old.read_written,
                files_stamp=old.files_stamp,
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

    def _update_in_place(
        self, mdir: RepoEntry, override: Override | None, old: LoadRecord, stamp: str
    ) -> bool:
        """Triton's model update: when only the instance groups (or the version policy)
        of a serving model changed, and none of its files, keep the model and the
        instances the new groups keep; start the new ones and finalize the rest
        (``ModelLoader.update_version``). Whether it did; False: a reload is needed
        (or the config cannot be read: the reload says why). The caller holds the
        model's lock; a failed update raises, and the model serves on as it was."""
        previous = old.read_config
        if (
            previous is None
            or not old.versions
            or old.failure() is not None
            or (override is not None and override.folder is not None)
            or (old.override is not None and old.override.folder is not None)
            or any(mv.has_sequences() or mv.state is not ModelState.READY for mv in old.versions.values())
        ):
            return False
        try:
            config, written = self._loader.read_config(mdir, override)
            files = folder_stamp(mdir.path, skip=mdir.config_path)
            if (
                files != old.files_stamp
                or needs_reload(
                    previous, old.read_written, config, written, [mv.config for mv in old.versions.values()]
                )
                or set(self._loader.versions_to_load(mdir, config)) != set(old.versions)
            ):
                return False
        except Exception:  # the reload reads it again, and reports what is wrong
            return False
        updated: dict[int, tuple[LoadedVersion, Match]] = {}
        try:
            for version, mv in old.versions.items():
                updated[version] = self._loader.update_version(mv, config)
        except Exception as exc:
            for new, found in updated.values():  # what did start for other versions stops again
                self._loader.abandon_update(new, found)
            reason = exc.message if isinstance(exc, TritonError) else f"{type(exc).__name__}: {exc}"
            log.error("updating the instances of '%s' failed; it serves on as it was: %s", mdir.key, reason)
            raise TritonError.invalid_arg(f"load failed for model '{mdir.name}': {reason}") from None
        record = LoadRecord(
            mdir.name,
            mdir.path,
            versions={v: new for v, (new, _) in updated.items()},
            stamp=stamp,
            override=override,
            retired=old.retired,
            namespace=old.namespace,
            read_config=config,
            read_written=written,
            files_stamp=files,
        )
        for new, found in updated.values():
            new.start_sharing(found.kept)
        self._put(record)

        def hand_over() -> None:
            try:
                for version, (new, found) in updated.items():
                    old.versions[version].step_down(found.removed)
                    new.handed_over()
                    log.info("successfully updated the instances of '%s' version %d", mdir.key, version)
            finally:
                if old.override is not None and old.override is not override:
                    old.override.remove()

        # On a thread of its own: the previous instance set finishes what it started or
        # queued first. The load waits for it only when instances are removed (they are
        # finalized then), and not for ever: one of those requests may be the model's
        # own BLS load.
        thread = self._in_background(hand_over, "tritonpy-update")
        if any(found.removed for _, found in updated.values()):
            thread.join(_UPDATE_WAIT_S)
        return True

    def _load(self, mdir: RepoEntry, override: Override | None = None, stamp: str = "") -> LoadRecord:
        """Load ``mdir`` into a new record stamped with its folder as it was before the
        load began (a change made while it loads shows at the next poll)."""
        stamp = stamp or folder_stamp(mdir.path)
        members = functools.partial(self._member_state, namespace=mdir.namespace)
        record = self._loader.load(mdir, override, retries=self._retries, members=members)
        record.stamp = stamp
        return record

    def _unload(self, key: str, removed: bool = False, forget: bool = False) -> None:
        """Unload model ``key``; ``removed``: its folder is gone (poll mode). As in Triton
        the model stays known, unloaded (requests get "has no available versions", a
        version's "is not at ready state"); the index, which lists folders, leaves it
        out, and its folder loads again should it come back, whatever its stamp.

        Under model namespacing a model removed, or unloaded by name (``forget``),
        no longer answers to its name, as Triton drops its identifier then."""
        record = self._records.get(key)
        if record is None:
            return
        if record.versions or record.failed or record.error is not None or removed or forget:
            # What a failed load left is cleared too: an unloaded model no longer
            # keeps a strictly-ready server from being ready.
            self._put(
                LoadRecord(
                    record.name,
                    record.path,
                    retired={**record.retired, **record.versions},
                    stamp="" if removed else record.stamp,
                    namespace=record.namespace,
                    removed=(removed or forget) and self._namespacing,
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
                        log.info("successfully unloaded '%s' version %d", mv.key, mv.version)
            finally:
                if override is not None:
                    override.remove()

        self._in_background(run, "tritonpy-unload")

    def _in_background(self, work: Callable[[], None], name: str) -> threading.Thread:
        """Run ``work`` (an unload, or a model update's hand-over) on a thread of its own,
        which ``unload_all`` waits for."""

        def run() -> None:
            try:
                work()
            finally:
                with self._unloading_lock:
                    self._unloading.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._unloading_lock:
            self._unloading.add(thread)
        thread.start()
        return thread

    def _put(self, record: LoadRecord) -> None:
        with self._lock:
            self._set_records({**self._records, record.key: record})

    def _set_records(self, records: dict[str, LoadRecord]) -> None:
        """Serve ``records`` from now on; the caller holds ``_lock``."""
        self._records = records
        names = keys_by_name((key, r.name) for key, r in records.items() if not r.removed)
        for record in records.values():
            names.setdefault(record.name, ())  # known, but no model answers to it
        self._names = names

    def _model_lock(self, key: str) -> threading.Lock:
        """One lock per model: its loads and unloads happen one at a time; different
        models load in parallel."""
        with self._lock:
            return self._model_locks.setdefault(key, threading.Lock())

    # -- lookup --------------------------------------------------------------------------

    def _member_state(self, name: str, namespace: str = "") -> MemberState | None:
        """What an ensemble of ``namespace`` being loaded sees of its member ``name``
        (None: no such model, or none that can be told from others)."""
        record = self._records.get(member_key(namespace, name, self._names))
        if record is None:
            return None
        ready = {v: mv for v, mv in record.versions.items() if mv.ready}
        failure = record.failure()
        return MemberState(ready, failure.removesuffix(";\n") if failure else None)

    def __contains__(self, name: str) -> bool:
        return bool(self._names.get(name))

    def get_version(self, name: str, version: int | str | None = None, namespace: str = "") -> LoadedVersion:
        """The ready model version ``name``/``version`` (latest when none), or TritonError.
        Under model namespacing ``name`` must mean one model (``namespace``: where an
        ensemble's step looks first).

        A lookup that fails on a record replaced meanwhile (a reload swapped a new one
        in and retired the versions this snapshot still holds) looks again."""
        while True:
            key = lookup_key(name, self._names, namespace) if self._namespacing else name
            record = self._records.get(key)
            try:
                return _version_of(record, key, version)
            except TritonError:
                if self._records.get(key) is record:
                    raise

    def _record_of(self, name: str) -> LoadRecord | None:
        """The record ``name`` means (None: none, or under model namespacing more than one)."""
        if not self._namespacing:
            return self._records.get(name)
        try:
            return self._records.get(lookup_key(name, self._names))
        except TritonError:
            return None

    def ready_versions(self, name: str) -> list[int]:
        """The versions of ``name`` that are ready, in order."""
        record = self._record_of(name)
        if record is None:
            return []
        return [v for v in sorted(record.versions) if record.versions[v].ready]

    def statistics_versions(self, name: str, version: int | str | None) -> list[LoadedVersion]:
        """The loaded versions of ``name`` the statistics extension reports (Triton's messages)."""
        record = self._record_of(name)
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
            (r.key, v, reason)
            for r in self._records.values()
            for v, state, reason in r.state_rows()
            if state == ModelState.UNAVAILABLE.value and reason != "unloaded"
        ]
        return failed + [(name, "", reason) for name, reason in self.startup_errors]

    def wait_unloaded(self, name: str, timeout: float | None = None) -> bool:
        """Wait until no version of a model ``name`` is still unloading (at most
        ``timeout`` s); whether none is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            records = [r for r in self._records.values() if r.name == name]
            if all(state != ModelState.UNLOADING.value for r in records for _, state, _ in r.state_rows()):
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def repository_index(self, ready: bool = False, keys: bool = False) -> list[dict[str, str]]:
        """The repository index extension: name, version, state, reason per version
        (``keys``: each model's key for its name, as Triton's table at start shows it).

        As Triton's: the models of the repository folders, those never loaded by
        name only; a model loaded from a load request's files under a name no
        folder has is not listed."""
        records = self._records
        index: list[dict[str, str]] = []
        try:
            folders = self._scan()  # by repository (under model namespacing), then name
        except OSError:
            folders = []
        for folder in folders:
            name = folder.key if keys else folder.name
            if folder.key not in records:
                if not ready:
                    index.append({"name": name})
                continue
            for version, state, reason in records[folder.key].state_rows():
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


def _failed(mdir: RepoEntry, error: str) -> LoadRecord:
    """The record of a model folder that cannot load, for ``error``."""
    return LoadRecord(mdir.name, mdir.path, error=error, namespace=mdir.namespace)


class _Scan:
    """The model folders of one scan of the repositories, by key and by name."""

    def __init__(self, entries: Sequence[RepoEntry]) -> None:
        self.entries = {entry.key: entry for entry in entries}
        self.names = keys_by_name((entry.key, entry.name) for entry in entries)

    def members(self, entry: RepoEntry) -> list[str]:
        """The keys of the models ``entry``'s ensemble config needs ([]: not an ensemble)."""
        return [member_key(entry.namespace, m, self.names) for m in folder_members(entry)]

    def named_like(self, keys: Sequence[str]) -> list[str]:
        """``keys`` and the keys of the other models of their names: what an explicit load
        of an ensemble loads for it, as Triton loads each model its steps name from
        every repository that has one (under model namespacing)."""
        names = [self.entries[k].name for k in keys if k in self.entries]
        return list(dict.fromkeys([*keys, *(k for n in names for k in self.names[n])]))

    def loaded_with(self, entry: RepoEntry) -> list[str]:
        """What an explicit load of ``entry`` loads first: ``named_like`` its members."""
        return self.named_like(self.members(entry))

    def find(self, key: str, name: str) -> RepoEntry:
        """The folder of model ``key`` (named ``name``), or Triton's load error."""
        entry = self.entries.get(key)
        if entry is None:
            raise TritonError.internal(
                f"failed to load '{name}', failed to poll from model repository: "
                "model not found in any model repository"
            )
        return entry

    def find_all(self, name: str) -> list[RepoEntry]:
        """The folders of the models named ``name`` (under model namespacing, one per
        repository that has one), or Triton's load error."""
        return [self.find(key, name) for key in self.names.get(name) or (name,)]


_READY = ModelState.READY


def _version_of(record: LoadRecord | None, name: str, version: int | str | None) -> LoadedVersion:
    """The lookup of ``ModelManager.get_version`` in one snapshot of a model's record;
    ``name``: the model's key, as Triton's messages name it."""
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
