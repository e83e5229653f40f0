"""Load a model folder: config, backend, auto-complete, validation, instances.

Everything that can go wrong becomes a reason on the model (or the version),
which is then UNAVAILABLE; the server goes on with the others. Runs on loader
threads, never on the event loop.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from tritonpy_sdk import Backend, DeviceMemory, ErrorCode, GpuSupport, Model, ModelInstance, TritonError
from tritonpy_sdk.cache import ResponseCache
from tritonpy_sdk.host import BackendHooks, ask_gpu_support, call_hook

from .. import devices
from ..config import (
    FILE_PLATFORMS,
    PLATFORM_BACKENDS,
    ConfigError,
    ModelConfig,
    backend_platform,
    config_from_dict,
    config_to_dict,
    copy_config,
    fill_defaults,
    json_fields,
    load_config_file,
    platform_file,
    platform_pair_error,
    text_fields,
    user_config,
    validate_config,
)
from ..config._defaults import unknown_gpu
from ..config._validate import ENSEMBLE_PLATFORM
from ..hostpolicy import HostPolicy, bound, policy_name
from ..logsettings import OBJECT
from ..memory import PinnedPool
from ..metrics._config import not_customizable
from ..options import ServerOptions
from ..repository import RepoEntry, model_key, read_labels, select_versions, version_dirs
from ..repository._stamp import folder_stamp
from ..repository.agents import run_agents
from ..repository.overrides import Override
from ..scheduler.ensemble import EnsembleScheduler, Submit
from ..scheduler.ratelimiter import Need, RateLimiter
from .backend_runtime import check_runtime
from .backends import KNOWN_FILES, BackendRegistry, install_hint
from .ensemble_plan import ENSEMBLE_BACKEND, ENSEMBLE_HOOKS, MemberLookup, plan_ensemble
from .instance_update import Match, match, signature, signatures
from .model import LoadedVersion, ModelState, finalize_quietly
from .spec import IOSpec
from .warmup import run_warmup

# The name it had before runtime/ existed: log lines and users' logging filters name it.
log = logging.getLogger("tritonpy.loading")

#: An instance and the instance group it belongs to.
Slot = tuple[Any, ModelInstance]


@dataclass(eq=False)
class LoadRecord:
    """A model folder and what became of each of its versions.

    ``versions`` serve; ``failed`` holds the reasons of versions that did not load;
    ``retired`` the versions that served before and are unloading or unloaded
    (the index shows them until a load brings those versions back).
    """

    name: str
    path: Path
    versions: dict[int, LoadedVersion] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    error: str | None = None
    #: The stamp of the folder it was loaded from (``repository.folder_stamp``).
    stamp: str = ""
    #: The load's own config and files, when it brought them.
    override: Override | None = None
    retired: dict[int, LoadedVersion] = field(default_factory=dict)
    #: Why the folder's ``config.pbtxt`` could not be read, when that is what failed:
    #: a broken repository, not a client's mistake (Triton: a poll failure, INTERNAL).
    unreadable: str | None = None
    #: Its repository under model namespacing ("" without; ``RepoEntry.namespace``).
    namespace: str = ""
    #: Under model namespacing: unloaded by name, or its folder left the repository
    #: (poll mode), so it no longer answers to its name, as Triton forgets its
    #: identifier then (``namespaces.lookup_key``).
    removed: bool = False
    #: The config it was loaded from, as read (before auto-complete), and the stamp of
    #: its folder but that config: what tells a model update from a reload
    #: (``ModelLoader.update_version``). None for an ensemble or a load that failed early.
    read_config: ModelConfig | None = None
    read_written: dict[str, Any] = field(default_factory=dict)
    files_stamp: str = ""

    @property
    def key(self) -> str:
        """The model's key (``RepoEntry.key``): its name, or ``<namespace>::<name>``."""
        return model_key(self.namespace, self.name)

    def state_rows(self) -> list[tuple[str, str, str]]:
        """``(version, state, reason)`` rows, as the repository index shows them."""
        if self.error is not None and not self.versions and not self.failed:
            return [("", ModelState.UNAVAILABLE.value, self.error)]
        rows = {v: (str(v), mv.state.value, mv.reason) for v, mv in self.retired.items()}
        rows.update({v: (str(v), ModelState.UNAVAILABLE.value, r) for v, r in self.failed.items()})
        rows.update({v: (str(v), mv.state.value, mv.reason) for v, mv in self.versions.items()})
        return [rows[v] for v in sorted(rows)]

    def failure(self) -> str | None:
        """What went wrong with this load, in Triton's words (None: nothing)."""
        if self.error is not None:
            return self.error
        if not self.failed:
            return None
        return "".join(
            f"version {v} is at {ModelState.UNAVAILABLE.value} state: {self.failed[v]};\n"
            for v in sorted(self.failed)
        )


class ModelLoader:
    """Turns model folders into ``LoadRecord`` objects for one server."""

    def __init__(
        self,
        options: ServerOptions,
        registry: BackendRegistry,
        cache: ResponseCache | None = None,
        rate_limiter: RateLimiter | None = None,
        submit: Submit | None = None,
        pinned: PinnedPool | None = None,
        device_memory: DeviceMemory | None = None,
    ) -> None:
        self._options = options
        #: How an ensemble's steps reach their members (the server's internal submit).
        self._submit = submit
        self._registry = registry
        self._cache = cache
        self._rate_limiter = rate_limiter
        #: The server's pinned pool: batches of GPU instances are gathered there.
        self._pinned = pinned
        #: The server's device memory (per-GPU pools): GPU instances gather device batches there.
        self._device_memory = device_memory

    def load(
        self,
        mdir: RepoEntry,
        override: Override | None = None,
        retries: int = 0,
        members: MemberLookup | None = None,
    ) -> LoadRecord:
        """Load the versions of ``mdir`` (with ``override``'s config instead of its
        ``config.pbtxt``); a version that fails is tried ``retries`` more times.
        An ensemble finds its members (loaded before it) through ``members``."""
        record = LoadRecord(mdir.name, mdir.path, override=override, namespace=mdir.namespace)
        if mdir.error is not None:
            record.error = mdir.error
            return record
        try:
            try:
                config, written = self._read_config(mdir, override)
            except _PollFailure as exc:
                record.unreadable = exc.message
                raise
            if config.platform == ENSEMBLE_PLATFORM:
                return self._load_ensemble(record, mdir, config, members)
            record.read_config, record.read_written = copy_config(config), written
            record.files_stamp = folder_stamp(mdir.path, skip=mdir.config_path)
            hooks, backend, versions = self._prepare(mdir, config)
        except Exception as exc:  # any failure is this model's reason, never the server's end
            record.error = _reason(exc)
            log.error("failed to load '%s': %s", mdir.key, record.error)
            return record
        for version in versions:
            for attempt in range(retries + 1):
                try:
                    record.versions[version] = self._load_version(
                        mdir, config, hooks, backend, version, written
                    )
                    record.failed.pop(version, None)
                    log.info("successfully loaded '%s' version %d", mdir.key, version)
                    break
                except Exception as exc:  # as above: the reason of this version only
                    record.failed[version] = _reason(exc)
                    log.error(
                        "failed to load '%s' version %d%s: %s",
                        mdir.key,
                        version,
                        f" (attempt {attempt + 1} of {retries + 1})" if retries else "",
                        record.failed[version],
                    )
        return record

    def read_config(self, mdir: RepoEntry, override: Override | None) -> tuple[ModelConfig, dict[str, Any]]:
        """The config a load of ``mdir`` (with ``override``) would start from, and as the user
        wrote it (TritonError or ConfigError when it cannot be read)."""
        return self._read_config(mdir, override)

    def versions_to_load(self, mdir: RepoEntry, config: ModelConfig) -> list[int]:
        """The versions a load of ``mdir`` with ``config`` (as read) would bring."""
        return _select_versions(mdir, config, list(version_dirs(mdir.path)))

    def update_version(self, old: LoadedVersion, read: ModelConfig) -> tuple[LoadedVersion, Match]:
        """``old`` with the instance groups of ``read`` (a config as read, equal to the one
        ``old`` loaded from but for those): the same model (no ``model_initialize``),
        the serving instances the new groups keep, and new ones for the rest, started
        and warmed up here. Returns the new version, not serving yet (the manager starts it
        with ``LoadedVersion.start_sharing``), and which instances it kept, added and left
        out (those to finalize once ``old`` has finished its requests: ``step_down``). TritonError
        when the new groups are invalid, the rate limiter cannot ever run an instance, or
        an instance fails to start (then nothing changed)."""
        hooks, model = old.hooks, old.model
        gpus = devices.gpu_count()
        config = copy_config(old.config)
        config.ClearField("instance_group")
        config.instance_group.extend(read.instance_group)
        if read.HasField("version_policy"):
            config.version_policy.CopyFrom(read.version_policy)
        _complete_config(config, hooks, model, gpus, str(model.repository_path / "config.pbtxt"))
        slots = self._slots(model, config, gpus)
        found = match(
            [*old.instances, *old.passive_instances],
            old.signatures,
            [(signature(group, inst.device_id), inst) for group, inst in slots],
        )
        slots = [(group, inst) for (group, _), inst in zip(slots, found.instances, strict=True)]
        policies = self._host_policies(slots)
        needs = self._register(slots)
        try:
            self._start_instances(hooks, config, model.repository_path, found.added, policies, gpus)
        except TritonError:
            self._unregister(needs.values())
            raise
        model.config = config_to_dict(config)
        # The new instances first: schedulers prefer the first idle one, and the kept
        # ones may still be busy with the previous version's batches (``start_sharing``).
        ordered = found.added + found.kept
        for inst in found.added:
            log.info("model '%s' version %d: instance %s started", old.name, old.version, inst.name)
        mv = LoadedVersion(
            name=old.name,
            version=old.version,
            config=config,
            config_dict=model.config,
            spec=old.spec,
            hooks=hooks,
            model=model,
            instances=[inst for inst in ordered if not inst.passive],
            passive_instances=[inst for inst in ordered if inst.passive],
            namespace=old.namespace,
            labels=old.labels,
            load_seconds=old.load_seconds,
            cache=old.cache,
            rate_limiter=self._rate_limiter if any(n.resources for n in needs.values()) else None,
            needs=needs,
            device_tensors=old.device_tensors,
            host_policies=policies,
            stats=old.stats,
            signatures=signatures(slots),
        )
        return mv, found

    def abandon_update(self, mv: LoadedVersion, found: Match) -> None:
        """Undo ``update_version`` (another version's update failed): finalize the
        instances it started and let go of its rate-limiter needs."""
        for inst in found.added:
            finalize_quietly(mv.hooks, "instance_finalize", instance=inst)
        mv.release_needs()

    def _read_config(self, mdir: RepoEntry, override: Override | None) -> tuple[ModelConfig, dict[str, Any]]:
        """The model's config: the load's override, else its config file (``config.pbtxt``,
        or ``configs/<name>.pbtxt`` with ``--model-config-name``; or an
        empty one for auto-complete to fill), named after its folder when unnamed
        (and always when its repository's registration mapped it to a name);
        and the config as the user wrote it (``Model.user_config``)."""
        path = mdir.config_path
        written: list[str] = []
        if override is not None:
            config = copy_config(override.config)
            written = json_fields(override.text)
        elif path.exists():
            try:
                config = load_config_file(path)
            except ConfigError as exc:
                raise _PollFailure(exc.message) from None
            written = text_fields(path.read_text(encoding="utf-8"))
        elif self._options.disable_auto_complete_config:
            raise ConfigError(
                f"failed to load model '{mdir.name}': {path} is missing and "
                "auto-complete is disabled (--disable-auto-complete-config)"
            )
        else:
            config = ModelConfig()
        try:
            run_agents(config, mdir.path)
        except TritonError as exc:
            raise _PollFailure(exc.message) from None
        as_written = user_config(config, written)
        if not config.name or mdir.mapped:  # a mapped folder serves under its mapped name
            config.name = mdir.name
        return config, as_written

    def _prepare(self, mdir: RepoEntry, config: ModelConfig) -> tuple[BackendHooks, Backend, list[int]]:
        """Pick the backend of ``config`` and the versions to load."""
        available = version_dirs(mdir.path)
        if not available:  # before the backend: no version folder also hides the model file
            raise _no_version_folder(mdir)
        dirs = list(available.values())
        backend_name = self._backend_name(config, mdir, dirs)
        hooks, backend = self._registry.initialized(backend_name)
        bind_backend(config, hooks, dirs)
        versions = _select_versions(mdir, config, list(available))
        for version in versions:
            check_runtime(
                config.runtime, hooks.name, mdir.name, available[version], self._options.backend_directory
            )
        return hooks, backend, versions

    def _backend_name(self, config: ModelConfig, mdir: RepoEntry, dirs: list[Path]) -> str:
        if config.backend:
            return config.backend
        named = FILE_PLATFORMS.get(config.default_model_filename)
        if config.platform:
            try:
                return self._registry.backend_for_platform(config.platform)
            except TritonError:
                if named is None:
                    raise
                # As Triton: the backend comes from the model file, and the platform
                # does not belong to it.
                mismatch = platform_pair_error(config.platform, PLATFORM_BACKENDS[named])
                assert mismatch is not None  # an unknown platform never pairs with a known backend
                raise TritonError.invalid_arg(mismatch) from None
        if named is not None:
            return PLATFORM_BACKENDS[named]
        found = self._registry.backend_for_files(dirs)
        if found is None:
            found = self._backend_for_known_files(dirs)
        if found is None:
            for filename, backend in KNOWN_FILES.items():
                if any((d / filename).exists() for d in dirs):
                    raise TritonError.unavailable(
                        f"model '{mdir.name}' has a {filename} but backend '{backend}' is not "
                        f"installed: {install_hint(backend)}"
                    )
            _, dot, suffix = mdir.name.partition(".")
            if dot and not config.default_model_filename:
                return suffix  # Triton's custom-backend rule: model 'm.identity' runs on 'identity'
            raise TritonError.invalid_arg(
                f"Invalid model name: Could not determine backend for model '{mdir.name}' with no "
                "backend in model configuration. Expected model name of the form 'model.<backend_name>'. "
                "Set 'backend' or 'platform' in its config.pbtxt, or install the backend whose model file "
                "(model.onnx, model.pt, model.plan, model.py ...) its version folders hold"
            )
        return found

    def _backend_for_known_files(self, dirs: list[Path]) -> str | None:
        """An installed backend for a model file Triton knows that no backend names as its
        default (``model.pt2``: pytorch)."""
        for filename, platform in FILE_PLATFORMS.items():
            if any((d / filename).is_file() for d in dirs):
                try:
                    return self._registry.hooks(PLATFORM_BACKENDS[platform]).name
                except TritonError:
                    continue
        return None

    def _load_version(
        self,
        mdir: RepoEntry,
        base: ModelConfig,
        hooks: BackendHooks,
        backend: Backend,
        version: int,
        written: dict[str, Any],
    ) -> LoadedVersion:
        load_start = time.monotonic()
        gpus = devices.gpu_count()
        model, config = prepare_model(
            hooks,
            backend,
            mdir.name,
            mdir.path,
            version,
            base,
            written,
            auto_complete=not self._options.disable_auto_complete_config,
            gpus=gpus,
            config_path=mdir.config_path,
        )
        spec = IOSpec.from_config(model.config, version)
        labels = self._labels(mdir, version, model.config)
        slots = self._slots(model, config, gpus)
        instances = [inst for _, inst in slots]
        policies = self._host_policies(slots)
        needs = self._register(slots)
        call_hook(hooks, "model_initialize", model=model)
        try:
            self._start_instances(hooks, config, mdir.path, instances, policies, gpus)
        except TritonError:
            finalize_quietly(hooks, "model_finalize", model=model)
            self._unregister(needs.values())
            raise
        # Passive instances are initialized but take no requests: no warmup, no scheduler.
        active = [inst for inst in instances if not inst.passive]
        passive = [inst for inst in instances if inst.passive]
        if config.response_cache.enable and self._cache is None:
            log.warning(
                "model '%s' enables response_cache but no cache is configured (--cache-config)", mdir.name
            )
        families = [c.metric_identifier.family for c in config.model_metrics.metric_control]
        for warning in not_customizable(families):
            log.warning("%s", warning)
        mv = LoadedVersion(
            name=mdir.name,
            version=version,
            config=config,
            config_dict=model.config,
            spec=spec,
            hooks=hooks,
            model=model,
            instances=active,
            passive_instances=passive,
            namespace=mdir.namespace,
            labels=labels,
            load_seconds=time.monotonic() - load_start,
            cache=self._cache if config.response_cache.enable else None,
            rate_limiter=self._rate_limiter if any(n.resources for n in needs.values()) else None,
            needs=needs,
            # Device-resident inputs come from CUDA regions (or GPU outputs of ensemble steps).
            device_tensors=gpus > 0,
            host_policies=policies,
            signatures=signatures(slots),
        )
        mv.start()
        return mv

    def _load_ensemble(
        self, record: LoadRecord, mdir: RepoEntry, config: ModelConfig, members: MemberLookup | None
    ) -> LoadRecord:
        """An ensemble: no backend and no instances; its scheduler runs the steps.
        A problem with its config or its members is the model's reason."""
        source = str(mdir.config_path)
        try:
            fill_defaults(config, source=source)
            validate_config(config, source=source, folder_name=mdir.name)
            versions = _select_versions(mdir, config, list(version_dirs(mdir.path)))
            plan = plan_ensemble(config, members or (lambda name: None))
            if plan.decoupled:  # as Triton: an ensemble of a decoupled model is decoupled, and
                config.model_transaction_policy.decoupled = True  # checked again as such (a
                validate_config(config, source=source, folder_name=mdir.name)  # response cache)
            if self._submit is None:
                raise TritonError.unsupported("ensembles run only inside a server")
        except Exception as exc:
            record.error = _reason(exc)
            log.error("failed to load '%s': %s", mdir.key, record.error)
            return record
        config_dict = config_to_dict(config)
        outputs = [io.name for io in config.output]
        inherited = {name: labels for name, labels in plan.labels.items() if name in outputs}
        submit = self._submit
        if mdir.namespace:  # its steps' members are looked up in its own repository first
            submit = functools.partial(submit, namespace=mdir.namespace)
        max_inflight = config.ensemble_scheduling.max_inflight_requests
        if max_inflight:
            log.info("Ensemble model '%s' configured with max_inflight_requests: %d", mdir.name, max_inflight)
        for version in versions:
            load_start = time.monotonic()
            mv = LoadedVersion(
                name=mdir.name,
                version=version,
                config=config,
                config_dict=config_dict,
                spec=IOSpec.from_config(config_dict, version),
                hooks=ENSEMBLE_HOOKS,
                model=Model(mdir.name, version, config_dict, mdir.path, ENSEMBLE_BACKEND),
                instances=[],
                namespace=mdir.namespace,
                # Outputs without labels of their own take those of the member that
                # makes them, as Triton completes an ensemble's labels.
                labels={**inherited, **self._labels(mdir, version, config_dict)},
                cache=self._cache if config.response_cache.enable else None,
                scheduler_factory=lambda model: EnsembleScheduler(
                    model, plan.steps, outputs, submit, max_inflight
                ),
            )
            mv.load_seconds = time.monotonic() - load_start
            mv.start()
            record.versions[version] = mv
            log.info("successfully loaded '%s' version %d", mdir.key, version)
        return record

    @staticmethod
    def _labels(mdir: RepoEntry, version: int, cfg: dict[str, Any]) -> dict[str, list[str]]:
        labels: dict[str, list[str]] = {}
        for out in cfg.get("output", []):
            filename = out.get("label_filename")
            if not filename:
                continue
            candidates = [mdir.path / filename, mdir.path / str(version) / filename]
            path = next((p for p in candidates if p.is_file()), None)
            if path is None:
                raise TritonError.invalid_arg(
                    f"label file '{filename}' of output '{out['name']}' of model "
                    f"'{mdir.name}' does not exist in {mdir.path}"
                )
            labels[out["name"]] = read_labels(path)
        return labels

    def _register(self, slots: list[Slot]) -> dict[str, Need]:
        """Each active instance's rate-limiter resources (from its instance group), by name,
        registered with the limiter when there is one: all of them, or, when the limiter
        could never run one (more than ``--rate-limit-resource`` gives), none and the
        TritonError, before anything starts."""
        needs: dict[str, Need] = {}
        for group, inst in slots:
            if inst.passive:
                continue
            limiter = group.rate_limiter
            resources = tuple((r.name, int(r.count), bool(getattr(r, "global"))) for r in limiter.resources)
            needs[inst.name] = Need(resources, inst.device_id, int(limiter.priority) or 1)
        if self._rate_limiter is None:
            return needs
        registered: list[Need] = []
        try:
            for need in needs.values():
                self._rate_limiter.register(need)
                registered.append(need)
        except TritonError:
            self._unregister(registered)
            raise
        return needs

    def _unregister(self, needs: Iterable[Need]) -> None:
        """Undo ``_register`` (a load or update that did not go ahead)."""
        if self._rate_limiter is not None:
            for need in needs:
                self._rate_limiter.unregister(need)

    @staticmethod
    def _slots(model: Model, config: ModelConfig, gpus: int) -> list[Slot]:
        """The instances ``config``'s instance groups ask for (not initialized), each with its group."""
        slots: list[Slot] = []
        for group in config.instance_group:
            kind = group.Kind.Name(group.kind)
            if kind == "KIND_GPU":
                for gpu in group.gpus:
                    if gpu < 0 or gpu >= gpus:
                        where = f"instance group {group.name} of model {model.name}"
                        raise TritonError.invalid_arg(unknown_gpu(where, gpu, gpus))
                ids = list(group.gpus)
            else:
                ids = [0]
            index = 0
            for device in ids:
                for _ in range(group.count):
                    instance = ModelInstance(f"{group.name}_{index}", kind, device, model)
                    instance.passive = group.passive
                    if kind == "KIND_GPU" and config.cc_model_filenames:
                        # As Triton's backends: the file named for this GPU's compute capability.
                        instance.artifact_filename = model.cc_model_filename(
                            devices.compute_capability(device)
                        )
                    slots.append((group, instance))
                    index += 1
        if not slots:
            raise TritonError.invalid_arg(f"model '{model.name}' has no instances to run")
        return slots

    def _host_policies(self, slots: list[Slot]) -> dict[str, HostPolicy]:
        """The ``--host-policy`` of each instance that has one (by instance name)."""
        defined = self._options.host_policies
        if not defined:
            return {}
        policies: dict[str, HostPolicy] = {}
        for group, inst in slots:
            name = policy_name(inst.kind, inst.device_id, group.host_policy)
            if name in defined:
                policies[inst.name] = defined[name]
        return policies

    def _equip(self, instances: list[ModelInstance], gpus: int) -> None:
        """Give GPU instances the server's pinned pool (their batches are gathered there)
        and device memory."""
        pool = self._pinned if gpus and self._pinned is not None and self._pinned.enabled else None
        for inst in instances:
            if inst.kind == "KIND_GPU" and pool is not None:
                inst.host_allocator = pool.allocate
            if inst.kind == "KIND_GPU" and gpus:
                inst.device_memory = self._device_memory

    def _start_instances(
        self,
        hooks: BackendHooks,
        config: ModelConfig,
        model_dir: Path,
        instances: list[ModelInstance],
        policies: dict[str, HostPolicy],
        gpus: int,
    ) -> None:
        """Equip, initialize and warm up ``instances`` (passive ones take no requests: no
        warm-up); on a TritonError those started are finalized, and it is raised."""
        self._equip(instances, gpus)
        started: list[ModelInstance] = []
        try:
            self._init_instances(hooks, instances, started, hooks.info.parallel_instance_init, policies)
            run_warmup(hooks, config, model_dir, [inst for inst in instances if not inst.passive], policies)
        except TritonError:
            for inst in started:
                finalize_quietly(hooks, "instance_finalize", instance=inst)
            raise

    @staticmethod
    def _init_instances(
        hooks: BackendHooks,
        instances: list[ModelInstance],
        started: list[ModelInstance],
        parallel: bool,
        policies: dict[str, HostPolicy],
    ) -> None:
        """``instance_initialize`` each instance on a thread bound by its host policy for
        the time of the call (what it starts, threads or a stub process, stays bound)."""

        def initialize(inst: ModelInstance) -> None:
            with bound(policies.get(inst.name)):
                call_hook(hooks, "instance_initialize", instance=inst)

        if not parallel or len(instances) <= 1:
            for inst in instances:
                initialize(inst)
                started.append(inst)
            return
        with ThreadPoolExecutor(max_workers=min(8, len(instances))) as pool:
            futures = {pool.submit(initialize, i): i for i in instances}
            first_error: TritonError | None = None
            for fut, inst in futures.items():
                try:
                    fut.result()
                    started.append(inst)
                except TritonError as exc:
                    first_error = first_error or exc
            if first_error is not None:
                raise first_error


def _select_versions(mdir: RepoEntry, config: ModelConfig, available: list[int]) -> list[int]:
    """The versions of ``config``'s policy among the folders ``available``; TritonError if none."""
    if not available:
        raise _no_version_folder(mdir)
    policy = config_to_dict(config).get("version_policy") or {"latest": {"num_versions": 1}}
    versions, missing = select_versions(policy, available)
    if missing:
        log.warning("model '%s': version(s) %s of the version policy have no folder", mdir.name, missing)
    if not versions:
        raise TritonError.unavailable(
            f"at least one version must be available under the version policy of model '{mdir.name}'"
        )
    return versions


def _no_version_folder(mdir: RepoEntry) -> TritonError:
    """A model folder without any numbered version folder. Triton says only that no
    version is available under the policy; this says what is missing, and where the
    model file found beside ``config.pbtxt`` belongs."""
    text = (
        f"no version directory found for model '{mdir.name}': its model files belong in a "
        f"numbered folder such as '{mdir.name}/1/'"
    )
    loose = [name for name in KNOWN_FILES if (mdir.path / name).exists()]
    if loose:
        text += f" (move '{mdir.name}/{loose[0]}' to '{mdir.name}/1/{loose[0]}')"
    return TritonError.unavailable(
        f"{text}; at least one version must be available under the version policy of model '{mdir.name}'"
    )


class _PollFailure(ConfigError):
    """The model's repository poll fails (Triton's stage before a load): its
    ``config.pbtxt`` does not parse or cannot be read, or a repository agent refuses it."""


def _reason(exc: Exception) -> str:
    """The reason of a load failure as Triton gives it: ``<code>: <message>``
    (``Internal: RuntimeError: ...``); unexpected exceptions keep their type and are logged.
    An UNAVAILABLE error is its message alone: the model's state says UNAVAILABLE
    already (not ``UNAVAILABLE: Unavailable: ...``)."""
    if isinstance(exc, TritonError):
        if exc.code is ErrorCode.UNAVAILABLE:
            return exc.message
        return f"{exc.code.value}: {exc.message}"
    log.exception("unexpected error while loading a model")
    return f"{ErrorCode.INTERNAL.value}: {type(exc).__name__}: {exc}"


def bind_backend(config: ModelConfig, hooks: BackendHooks, dirs: list[Path]) -> None:
    """Name ``hooks``' backend in ``config`` and derive, as Triton's core does, the
    platform and the model file it leaves out (from the backend and the files)."""
    backend_name = hooks.name
    config.backend = backend_name
    if not config.platform:
        derived = backend_platform(backend_name, config.default_model_filename, dirs)
        if derived is not None:
            config.platform = derived
        elif len(hooks.info.platforms) == 1:
            config.platform = hooks.info.platforms[0]
    mismatch = platform_pair_error(config.platform, backend_name) if config.platform else None
    if mismatch is not None:
        raise TritonError.invalid_arg(mismatch)
    # Triton's Python-based PyTorch runtime looks for model.py, then model.pt, itself.
    python_runtime = backend_name == "pytorch" and config.runtime == "model.py"
    if not config.default_model_filename and not python_runtime:
        filename = platform_file(config.platform, backend_name) or hooks.info.default_model_filename
        if filename:
            config.default_model_filename = filename


def prepare_model(
    hooks: BackendHooks,
    backend: Backend,
    name: str,
    path: Path,
    version: int,
    base: ModelConfig,
    written: dict[str, Any],
    *,
    auto_complete: bool,
    gpus: int,
    config_path: Path | None = None,
) -> tuple[Model, ModelConfig]:
    """The ``Model`` a backend's ``model_initialize`` gets and its final config, made
    from ``base`` (bound by ``bind_backend``) the one way the server makes them:
    the backend's ``auto_complete_config`` (when ``auto_complete``), Triton's
    defaults (on a host with ``gpus``, instance kinds as the backend's
    ``gpu_support`` allows), validation, its messages naming ``config_path`` (the
    model's ``config.pbtxt`` when None). ``tritonpy_sdk.testing`` builds its model
    with this too."""
    source = str(config_path or path / "config.pbtxt")
    model = Model(name, version, config_to_dict(base), path, backend, user_config=copy.deepcopy(written))
    if auto_complete and hooks.has_auto_complete:
        call_hook(hooks, "auto_complete_config", model=model)
        config = config_from_dict(model.config)
        if (
            hooks.info.autofill_dynamic_batching
            and base.max_batch_size == 0
            and config.max_batch_size > 0
            and not config.WhichOneof("scheduling_choice")
        ):
            # Triton: a model found to batch by auto-complete gets the dynamic batcher.
            config.dynamic_batching.SetInParent()
    else:
        config = copy_config(base)
    _complete_config(config, hooks, model, gpus, source)
    model.config = config_to_dict(config)
    return model, config


def _complete_config(config: ModelConfig, hooks: BackendHooks, model: Model, gpus: int, source: str) -> None:
    """Triton's defaults for ``config`` of ``model`` (instance kinds as its backend's
    ``gpu_support`` allows on a host with ``gpus``), validated, its messages naming
    ``source``: for a load (``prepare_model``) and for a model update
    (``ModelLoader.update_version``)."""
    info = hooks.info
    if log.isEnabledFor(logging.DEBUG):
        log.debug("Server side auto-completed config: ", extra={OBJECT: text_format.MessageToString(config)})
    fill_defaults(
        config,
        default_kind=info.default_instance_kind,
        default_count=info.default_instance_count,
        gpu_count=gpus,
        backend_gpu=ask_gpu_support(hooks, model.backend, model) if gpus else GpuSupport(),
        source=source,
    )
    validate_config(config, source=source, folder_name=model.name)
