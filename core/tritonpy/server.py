"""The server facade: ``Server``, the one door to the core for front ends and in-process callers.

Shaped like Triton's own in-process Python API (the ``tritonserver``
package), so code written for it ports with an import change::

    server = tritonpy.Server(model_repository="models").start(wait_until_ready=True)
    model = server.model("simple")
    for response in model.infer(inputs={"INPUT0": a, "INPUT1": b}):
        print(response.outputs["OUTPUT0"].to_numpy())
    server.stop()

``Server`` checks the options and owns the parts (the model records of
``repository.manager``, the model runtime of ``runtime/``, memory, tracer, log
settings); it holds model control, admission and drain, and the ways to call
inference. Every semantic lives once, behind it: the HTTP and gRPC front ends
only translate. Beside it: ``handle.ModelHandle`` (what ``model()`` returns),
``inputs`` (Python values to tensors, for the handle), ``bridges`` (answers
carried from worker threads to an event loop or a blocked thread).

What a front end may use, and nothing else (a front end that reaches past this
list cannot move into a worker process):

- settings: ``options`` (read only: its own address, limits, TLS),
  ``http_restrictions`` / ``grpc_restrictions``;
- health: ``live()``, ``ready()``, ``model_ready_async()``;
- metadata: ``metadata()``, ``model_metadata()``, ``model_config()`` (JSON),
  ``model_config_proto()`` (gRPC's ModelConfig), ``model_spec()`` (the inputs and
  outputs tensors are decoded against), ``is_decoupled()``;
- inference: ``infer_async()`` (one response), ``start_infer()`` (one response to
  a callback), ``stream_flags_async()`` / ``stream_async()`` (any number, decoupled
  models), ``submit()`` (the callback of every response, with its flags);
- extensions: ``repository_index()``, ``load_model()``, ``unload_model()``,
  ``model_statistics()``, ``trace_settings()``, ``log_settings`` (``get``,
  ``update``), ``shared_memory`` (register, unregister, status; regions read
  while decoding);
- serving (``serving.py``, which runs the front ends): ``start()``, ``drain()``,
  ``wait_idle()``, ``stop()``, ``event_loop``, ``last_refused``; the metrics front
  end reads ``loaded_versions()``, ``cache``, ``custom_metrics`` and ``memory.pinned``
  at each scrape.

In-process callers use ``Server(...)`` with ``start`` / ``stop`` (or ``with``),
``model()`` / ``load()`` / ``unload()``, ``infer()`` / ``stream()`` and their
``_async`` forms, and the health, metadata and extension methods above.
Backends see the server only through ``backend_api.BackendServerApi``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    InvalidArgumentError,
    OnResponse,
    TritonError,
)
from tritonpy_sdk.cache import ResponseCache
from tritonpy_sdk.host import MetricRegistry

from ._version import __version__
from .backend_api import BackendServerApi
from .bridges import Answer, answer_on, awaited_response, call_soon_threadsafe, responses
from .config import ModelConfig
from .handle import ModelDictionary, ModelHandle, response_arrays
from .logsettings import LogSettings, LogState
from .memory.manager import MemoryManager
from .options import ServerOptions
from .repository.manager import ModelManager
from .repository.overrides import split_load_parameters
from .repository.remote import RemoteRepository, is_remote, repository_root
from .response_iterators import ResponseIterator
from .restricted import parse_restrictions
from .runtime.backends import BackendRegistry
from .runtime.cache import create_cache
from .runtime.loading import ModelLoader
from .runtime.model import LoadedVersion, VersionRetired
from .runtime.spec import IOSpec
from .scheduler.ratelimiter import RateLimiter, parse_resource_flags
from .trace import FrontEnd, Tracer, parse_flags
from .tritonserver_options import MetricFormat

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger("tritonpy")

#: Protocol extensions this server implements, as server metadata reports them:
#: Triton 2.51's list, in its order and spelling; ``cuda_shared_memory`` (after
#: ``system_shared_memory``) is added only where a GPU and cuda-python are.
EXTENSIONS = (
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "trace",
    "logging",
)


class Server:
    """A tritonpy server: a model repository loaded in this process.

    Takes a ``ServerOptions`` or the same fields as keyword arguments
    (``Server(model_repository="models")``). Use ``start`` / ``stop`` or a
    ``with`` block. Thread-safe; ``infer_async`` must be awaited on an event loop.
    """

    def __init__(self, options: ServerOptions | None = None, **kwargs: Any) -> None:
        options = options or ServerOptions()
        for key, value in kwargs.items():  # tritonpy's names or tritonserver's; TypeError if neither
            setattr(options, key, value)
        #: What ``start`` raises: an option of the wrong type or a missing repository, found
        #: when the server is made but raised when it starts, as ``tritonserver`` does.
        self._start_error: Exception | None = None
        repos = options.model_repository
        if isinstance(repos, str | Path):
            repos = [repos]
        if repos is None:
            self._start_error = InvalidArgumentError("Model repository must be specified.")
            repos = []
        elif not isinstance(repos, list | tuple) or not all(isinstance(p, str | Path) for p in repos):
            self._start_error = TypeError(
                f"model_repository must be a path or a list of paths, not {repos!r}"
            )
            repos = []
        if not isinstance(options.server_id, str):
            self._start_error = TypeError(f"server_id must be a str, not {type(options.server_id).__name__}")
        options.model_repository = [repository_root(p) for p in repos]
        #: The repositories in object storage, each with its local cache folder.
        self.remote_repositories = [
            RemoteRepository(str(p)) for p in options.model_repository if is_remote(p)
        ]
        remote = iter(self.remote_repositories)
        roots = [next(remote) if is_remote(p) else Path(p) for p in options.model_repository]
        self.options = options
        self.log_settings = LogSettings(
            LogState(
                log_file=options.log_file,
                log_info=options.log_info,
                log_warning=options.log_warning,
                log_error=options.log_error,
                log_verbose_level=options.log_verbose,
                log_format=options.log_format,
            )
        )
        try:
            self.tracer = Tracer(*parse_flags(options.trace_config))
        except (ValueError, RuntimeError) as exc:  # RuntimeError: the OpenTelemetry SDK is missing
            raise TritonError.invalid_arg(str(exc)) from None
        if options.pinned_memory_pool_byte_size < 0:
            raise TritonError.invalid_arg("--pinned-memory-pool-byte-size must be 0 or more bytes")
        if any(d < 0 or b < 0 for d, b in options.cuda_memory_pool_byte_size.items()):
            raise TritonError.invalid_arg(
                "--cuda-memory-pool-byte-size must be <gpu>:<bytes>, both 0 or more"
            )
        #: The pinned and CUDA pools, and the CUDA runtime if this host has one.
        self.memory = MemoryManager.create(
            options.pinned_memory_pool_byte_size, options.cuda_memory_pool_byte_size
        )
        #: Shared-memory regions (system and CUDA) that clients register.
        self.shared_memory = self.memory.shared_memory
        self.cache: ResponseCache | None = None
        if options.cache_config:
            if len(options.cache_config) > 1:
                raise TritonError.invalid_arg(  # Triton's words
                    "found multiple cache configurations, but only a single cache is currently supported"
                )
            ((cache_name, cache_settings),) = options.cache_config.items()
            self.cache = create_cache(cache_name, cache_settings)
        #: Metric families that backends and models define (exported with Triton's own).
        self.custom_metrics = MetricRegistry()
        self.backends = BackendRegistry(
            options.backend_config,
            options.backend_directory,
            BackendServerApi(self, self.custom_metrics),
        )
        self.rate_limiter: RateLimiter | None = None
        if options.rate_limit not in ("off", "execution_count"):
            raise TritonError.invalid_arg(
                f"--rate-limit must be off or execution_count, got '{options.rate_limit}'"
            )
        if options.rate_limit == "execution_count":
            self.rate_limiter = RateLimiter(parse_resource_flags(options.rate_limit_resource))
        #: Restricted API groups (``--http-restricted-api``, ``--grpc-restricted-protocol``).
        self.http_restrictions = parse_restrictions("--http-restricted-api", options.http_restricted_api)
        self.grpc_restrictions = parse_restrictions(
            "--grpc-restricted-protocol", options.grpc_restricted_protocol
        )
        #: The model records: states, lookup, index, load and unload (model control).
        self.manager = ModelManager(
            ModelLoader(
                options,
                self.backends,
                self.cache,
                self.rate_limiter,
                submit=self._submit_step,
                pinned=self.memory.pinned,
                device_memory=self.memory.device_memory,
            ),
            roots,
            mode=options.model_control_mode,
            load_threads=options.model_load_thread_count,
            load_retries=options.model_load_retry_count,
            config_name=options.model_config_name,
            namespacing=options.model_namespacing,
        )
        #: ``metrics()``'s own Metrics, made at its first call.
        self._metrics: Metrics | None = None
        self._metrics_lock = threading.Lock()
        self._started = False
        self._stopping = False
        #: ``time.monotonic()`` by which a stopping server must be done; None while serving.
        self.exit_deadline: float | None = None
        #: The loop the network front ends run on (set by ``tritonpy serve`` before
        #: ``start``); backends may watch their descriptors there (``ServerApi.event_loop``).
        self.event_loop: asyncio.AbstractEventLoop | None = None
        #: Set by ``drain``: clients' new requests are refused while in-flight ones finish.
        self.draining = False
        #: ``time.monotonic()`` of the last request refused while stopping (0: none).
        self.last_refused = 0.0
        # One element per request in flight: ``append`` and ``pop`` are atomic, so
        # counting a request in and out takes no lock. ``wait_idle`` counts itself in
        # ``_idle_waiters`` under the condition's lock before it looks, and a request
        # that leaves looks at that count after its ``pop``: no wake-up is lost.
        self._inflight: list[None] = []
        self._idle = threading.Condition(threading.Lock())
        #: Threads in ``wait_idle`` (notifying nobody is skipped: it is not free).
        self._idle_waiters = 0

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, wait_until_ready: bool = True) -> Server:
        """Load the models the control mode loads at start: every model of the
        repositories (``none``, ``poll``), or those of ``load_model`` (``explicit``).

        Models that fail are UNAVAILABLE with their reason. With
        ``exit_on_error`` a failure raises ``TritonError`` after the others
        loaded; the caller decides whether to stop. ``wait_until_ready`` is
        accepted for API compatibility: loading finishes before ``start`` returns.
        In mode ``poll`` the repositories are polled from then on.
        """
        if self._started:
            return self
        if self._start_error is not None:
            raise self._start_error
        self.memory.describe()  # once per start, before models load: what memory they get
        # A stop while loading skips the models not started yet.
        try:
            self.manager.startup(self.options.load_model, skip=lambda: self.draining)
        except FileNotFoundError as exc:  # a repository folder missing: Triton's INTERNAL error
            raise TritonError.internal(str(exc)) from None
        self.manager.start_polling(self.options.repository_poll_secs)
        self._started = True
        return self

    def failed_models(self) -> list[tuple[str, str, str]]:
        """``(model, version, reason)`` for everything that failed to load."""
        return self.manager.failed_models()

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new requests, wait for in-flight ones (and the BLS requests they
        make), then unload every model and finalize backends, all within
        ``timeout`` (default ``exit_timeout_secs``)."""
        if not self._started:
            return
        self.drain()
        limit = self.options.exit_timeout_secs if timeout is None else timeout
        # One deadline for the whole shutdown: draining, schedulers and backends'
        # finalize (they read it through ServerApi.exit_deadline) share it.
        deadline = self.exit_deadline = time.monotonic() + limit
        if not self.wait_idle(limit):
            log.warning("timed out waiting for %d in-flight request(s)", len(self._inflight))
        self._stopping = True
        self.manager.unload_all(deadline)  # polling stops, unloads under way are waited for
        self.backends.finalize()
        self.memory.close()  # every region unregistered, the pools' idle buffers freed
        self.tracer.flush()
        for repository in self.remote_repositories:
            repository.close()  # a temporary cache folder goes
        self._started = False

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- health and metadata -------------------------------------------------------------

    def _require_started(self) -> None:
        """InvalidArgumentError on a server never started, as ``tritonserver`` answers
        (one that was started and stopped answers not live and not ready)."""
        if not (self._started or self._stopping):  # a stopped server keeps ``_stopping``
            raise InvalidArgumentError("Server not started")

    def live(self) -> bool:
        self._require_started()
        return self._started and not self._stopping

    def ready(self) -> bool:
        """Live, not draining, and (with strict readiness) every model loaded."""
        if not self.live() or self.draining:
            return False
        if self.options.strict_readiness:
            return not self.failed_models()
        return True

    def metadata(self) -> dict[str, Any]:
        return {"name": self.options.server_id, "version": __version__, "extensions": self.extensions()}

    def extensions(self) -> list[str]:
        """The protocol extensions served, in Triton's order."""
        out = list(EXTENSIONS)
        if self.memory.cuda_shared_memory:
            out.insert(out.index("system_shared_memory") + 1, "cuda_shared_memory")
        return out

    def models(self, exclude_not_ready: bool = False) -> ModelDictionary:
        """The repository index as ``tritonserver``'s ``Server.models()`` gives it:
        ``{(name, version): {"name", "version", "state"}}`` (with the ``reason`` when there
        is one; version -1 and state None for a model never loaded);
        ``exclude_not_ready`` keeps the ready versions only. ``models()["name"]`` is the
        model's handle."""
        self._require_started()
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for entry in self.manager.repository_index(exclude_not_ready):
            version = int(entry["version"]) if "version" in entry else -1
            row: dict[str, Any] = {"name": entry["name"], "version": version, "state": entry.get("state")}
            if "reason" in entry:
                row["reason"] = entry["reason"]
            rows[(entry["name"], version)] = row
        return ModelDictionary(self, rows)

    def poll_model_repository(self) -> None:
        """Poll the repositories now (control mode ``poll``), as the poller does every
        ``repository_poll_secs`` (which may be 0: then only this call polls)."""
        if self.manager.mode != "poll":
            raise TritonError.unavailable("polling is disabled")
        self._refuse_while_stopping()
        self.manager.poll()

    def metrics(self, metric_format: MetricFormat = MetricFormat.PROMETHEUS) -> str:
        """The server's metrics in the Prometheus text format, as the metrics port serves them."""
        self._require_started()
        if metric_format != MetricFormat.PROMETHEUS:
            raise TritonError.unsupported(f"metric format {metric_format!r} is not supported")
        with self._metrics_lock:
            if self._metrics is None:
                from .metrics.frontend import server_metrics  # only for those who ask

                self._metrics = server_metrics(self)
            self._metrics.poll()
            return self._metrics.render()

    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        """The repository index extension: name, version, state, reason per version."""
        return self.manager.repository_index(ready)

    def load_model(self, name: str, config: str = "", files: Mapping[str, bytes] | None = None) -> None:
        """Load or reload model ``name`` (control mode ``explicit``).

        ``config`` (Triton's JSON form of a ModelConfig) replaces its
        ``config.pbtxt``; ``files`` (``{"1/model.onnx": bytes}``, with a ``config``)
        replace its folder. Returns once the new versions serve; the versions
        that served before finish what they hold. TritonError if the load failed
        (then what served before serves on).
        """
        self._refuse_while_stopping()
        self.manager.load(name, config or None, files)

    def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload model ``name`` (control mode ``explicit``): it takes no new requests
        from now on; those it holds finish, then it is UNAVAILABLE ("unloaded")."""
        self._refuse_while_stopping()
        self.manager.unload(name, unload_dependents)

    def register_model_repository(
        self, repository_path: str, name_mapping: Mapping[str, str] | None = None
    ) -> None:
        """Serve the model folders of ``repository_path`` too (control mode ``explicit``);
        ``name_mapping`` (``{folder: model name}``) serves some under other names.
        Nothing loads until ``load_model``. Triton's ``register_model_repository``."""
        self._refuse_while_stopping()
        self.manager.register_repository(repository_path, name_mapping)

    def unregister_model_repository(self, repository_path: str) -> None:
        """Stop finding models in ``repository_path`` (control mode ``explicit``); the
        models loaded from it stay loaded. Triton's ``unregister_model_repository``."""
        self._refuse_while_stopping()
        self.manager.unregister_repository(repository_path)

    def load(self, model_name: str, parameters: Mapping[str, Any] | None = None) -> ModelHandle:
        """``tritonserver``'s spelling: load ``model_name`` with load parameters
        (``{"config": json_text, "file:1/model.onnx": bytes}``); its handle."""
        config, files = split_load_parameters(model_name, parameters or {})
        self.load_model(model_name, config, files)
        return ModelHandle(self, model_name)

    def unload(
        self,
        model: str | ModelHandle,
        unload_dependents: bool = False,
        wait_until_unloaded: bool = False,
        timeout: float | None = None,
    ) -> None:
        """``tritonserver``'s spelling of ``unload_model``; ``wait_until_unloaded``
        waits (at most ``timeout`` s) until its versions finished unloading."""
        name = model.name if isinstance(model, ModelHandle) else model
        self.unload_model(name, unload_dependents)
        if wait_until_unloaded and not self.manager.wait_unloaded(name, timeout):
            raise TritonError.unavailable(f"model '{name}' is still unloading after {timeout} s")

    def _refuse_while_stopping(self) -> None:
        if self._stopping or self.draining:
            raise TritonError.unavailable("Server is stopping")

    def get_version(self, name: str, version: int | str | None = None) -> LoadedVersion:
        """The ready model version ``name``/``version`` (latest when none), or TritonError."""
        return self.manager.get_version(name, version)

    def model_spec(self, name: str, version: int | str | None = None) -> IOSpec:
        """The ready version's inputs and outputs, as a front end decodes tensors against
        them (TritonError, as ``get_version``, when there is none)."""
        return self.manager.get_version(name, version).spec

    def model_config_proto(self, name: str, version: int | str | None = None) -> ModelConfig:
        """The ready version's config as the protobuf message (gRPC's ModelConfig)."""
        return self.manager.get_version(name, version).config

    def model_ready(self, name: str, version: int | str | None = None) -> bool:
        """Whether the model (version) is loaded and its backend says it can serve now."""
        try:
            mv = self.get_version(name, version)
        except TritonError:
            return False
        return mv.ready and mv.instances_ready()

    async def model_ready_async(self, name: str, version: int | str | None = None) -> bool:
        """``model_ready`` for the front ends: a backend's check runs off the event loop,
        and one that takes longer than ``READY_CHECK_SECONDS`` counts as not ready."""
        try:
            mv = self.get_version(name, version)
        except TritonError:
            return False
        if not mv.ready:
            return False
        if mv.hooks.instance_ready is None:
            return True
        try:
            return await asyncio.wait_for(asyncio.to_thread(mv.instances_ready), READY_CHECK_SECONDS)
        except asyncio.TimeoutError:
            return False

    def model_metadata(self, name: str, version: int | str | None = None) -> dict[str, Any]:
        mv = self.get_version(name, version)
        spec = mv.spec
        versions = (
            [str(mv.version)]
            if version not in (None, "", -1, 0)
            else [str(v) for v in self.manager.ready_versions(name)]
        )
        return {
            "name": name,
            "versions": versions,
            "platform": mv.config.platform or mv.config.backend,
            "inputs": [
                {"name": t.name, "datatype": t.datatype.value, "shape": t.full_shape(spec.batching)}
                for t in spec.inputs.values()
            ],
            "outputs": [
                {"name": t.name, "datatype": t.datatype.value, "shape": t.full_shape(spec.batching)}
                for t in spec.outputs.values()
            ],
        }

    def model_config(self, name: str, version: int | str | None = None) -> dict[str, Any]:
        return self.get_version(name, version).config_dict

    def model_statistics(self, name: str = "", version: int | str | None = None) -> list[dict[str, Any]]:
        """The statistics extension: every loaded version, or those of ``name``."""
        versions = self.manager.statistics_versions(name, version) if name else self.loaded_versions()
        return [{"name": mv.name, "version": str(mv.version), **mv.stats.snapshot()} for mv in versions]

    def trace_settings(self, model: str = "", changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The trace extension: read (and with ``changes``, update) global or model settings."""
        if model:
            # Triton's check (the model's latest version ready: a model only in the repository,
            # or unloaded, is unknown here), status (400, INVALID_ARGUMENT) and wording.
            try:
                self.get_version(model)
            except TritonError:
                raise TritonError.invalid_arg(f"Request for unknown model : {model}") from None
        if changes:
            return self.tracer.update(changes, model)
        return self.tracer.settings(model)

    def loaded_versions(self) -> list[LoadedVersion]:
        """Every loaded model version (metrics read it at each scrape)."""
        return self.manager.loaded_versions()

    def model(self, name: str, version: int = -1) -> ModelHandle:
        """A handle on model ``name`` (latest ready version when ``version`` is -1). As
        ``tritonserver``'s, it may be taken before the model loads: using it for a model
        that does not serve raises then."""
        return ModelHandle(self, name, version)

    # -- inference --------------------------------------------------------------------------

    def _admit(self, request: InferenceRequest, internal: bool = False, namespace: str = "") -> LoadedVersion:
        if self._stopping or not self._started or (self.draining and not internal):
            self.last_refused = time.monotonic()
            raise TritonError.unavailable("Server is stopping" if self._started else "Server is not started")
        # as get_version; ``namespace``: where an ensemble's step looks first
        return self.manager.get_version(request.model_name, request.model_version, namespace)

    def _leave(self) -> None:
        inflight = self._inflight
        inflight.pop()
        if not inflight and self._idle_waiters:
            self._leave_notify()

    def _leave_notify(self) -> None:
        """Wake ``wait_idle``: the last request in flight left."""
        with self._idle:
            self._idle.notify_all()

    def drain(self) -> None:
        """Refuse new requests from clients (UNAVAILABLE "Server is stopping") and
        report not ready, while requests in flight finish; requests those make
        (BLS, ``internal`` submits) are still taken. ``stop`` follows."""
        self.draining = True

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until no request is in flight (at most ``timeout`` s); whether none is."""
        with self._idle:
            self._idle_waiters += 1
            try:
                return self._idle.wait_for(lambda: not self._inflight, timeout=timeout)
            finally:
                self._idle_waiters -= 1

    def submit(
        self,
        request: InferenceRequest,
        done: OnResponse,
        internal: bool = False,
        here: bool = False,
        front: FrontEnd | None = None,
    ) -> None:
        """Queue ``request``; ``done(response, flags)`` gets its responses from worker threads.

        The last call carries ``RESPONSE_COMPLETE_FINAL``; a model that is not
        decoupled answers with exactly that one call. Raises ``TritonError`` if
        the request is refused before queueing. ``internal`` marks a request made
        on behalf of one in flight (BLS): it is taken while the server drains.
        ``here``: the caller waits for the answer anyway and may run it itself.
        ``front``: a front end's stamps (``Tracer.front``) for the request's trace.
        """
        self._submit(self._admit(request, internal), request, done, internal, here, front)

    def _submit_step(self, request: InferenceRequest, done: OnResponse, namespace: str = "") -> None:
        """An ensemble step's request to its member: internal, as BLS requests are.
        Under model namespacing the member is looked up in the ``namespace`` (the
        ensemble's repository) first, as Triton binds it."""
        self._submit(self._admit(request, True, namespace), request, done, True)

    def _submit(
        self,
        mv: LoadedVersion,
        request: InferenceRequest,
        done: OnResponse,
        internal: bool,
        here: bool = False,
        front: FrontEnd | None = None,
    ) -> None:
        """``submit`` to ``mv``, the version ``_admit`` found for ``request``; ``here``: the
        caller blocks for the answer, so it may run the request itself (``LoadedVersion.submit``);
        ``front``: the front end's stamps, which join the request's trace when it has one."""
        requested = request.model_version
        request.model_version = mv.version
        self._inflight.append(None)  # ``_enter``, inlined
        tracer = self.tracer
        trace = None
        if not tracer.off:  # ``sample``'s own first check, read here without its call
            trace = tracer.sample(request.model_name, request.id, request.trace_context, internal, front)
        if trace is not None:
            trace.model_version = mv.version
            trace.stamp("REQUEST_START", time.monotonic_ns())
            request._trace_activity = trace.stamp  # the backend's custom activities (report_activity)
            request.trace_context = trace.context()  # what its steps and BLS requests carry

        def finished(response: InferenceResponse | None, flags: int) -> None:
            if trace is not None and response is not None and trace.tensors is not None:
                trace.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs.values())  # as Triton's
            try:  # InferenceResponse::Send, before the response goes
                done(response, flags)
            finally:
                if trace is not None and response is not None and not internal:
                    # Triton's front ends stamp each response they were handed.
                    trace.stamp("INFER_RESPONSE_COMPLETE", time.monotonic_ns())
                if flags & RESPONSE_COMPLETE_FINAL:
                    inflight = self._inflight  # ``_leave``, inlined (once per request)
                    inflight.pop()
                    if not inflight and self._idle_waiters:
                        self._leave_notify()
                    if trace is not None:
                        trace.stamp("REQUEST_END", time.monotonic_ns())
                        self.tracer.release(trace)

        try:
            for _ in range(_RESUBMITS):
                try:
                    mv.submit(request, finished, trace, here)
                    return
                except VersionRetired:
                    # A reload or unload took this version away between the lookup
                    # and the queueing: what serves now takes the request (or, when
                    # nothing does, the lookup says why).
                    request.model_version = requested
                    mv = self._admit(request, internal)
                    request.model_version = mv.version
                    if trace is not None:
                        trace.model_version = mv.version
            mv.submit(request, finished, trace, here)
        except BaseException:
            self._leave()
            raise

    def predict(
        self,
        name: str,
        version: int,
        inputs: dict[str, Any],
        make_request: Callable[[dict[str, Any]], InferenceRequest],
    ) -> dict[str, Any]:
        """``ModelHandle.predict(inputs)`` without options: ``{output name: array}``.

        Run on the calling thread through the backend's ``execute_direct``
        (``LoadedVersion.run_direct``) when nothing would treat the request
        differently: the server serves, tracing is off, the model's direct lane takes
        these inputs and an instance is free. Otherwise the usual way, as ``infer`` of
        ``make_request(inputs)`` (on the version already found, when there is one)."""
        mv = None
        if not (self._stopping or not self._started or self.draining):
            try:
                mv = self.manager.get_version(name, version)
            except TritonError:  # ``infer`` words it
                pass
        if mv is not None and mv.direct and self.tracer.off:
            inflight = self._inflight
            inflight.append(None)  # ``_enter``, inlined
            try:
                result = mv.run_direct(inputs)
                if isinstance(result, Answer):
                    response = result.wait(None)
                    if response.error is not None:
                        raise response.error
                    return response_arrays(response)
                if result is not None:
                    return result
            finally:
                inflight.pop()  # ``_leave``, inlined
                if not inflight and self._idle_waiters:
                    self._leave_notify()
        request = make_request(inputs)
        # ``infer``, on the version found when there is one (``_admit``'s checks passed above).
        response = self.infer(request) if mv is None else self._infer_on(mv, request, None)
        return response_arrays(response)

    def is_decoupled(self, name: str, version: int | str | None = None) -> bool:
        """Whether model ``name`` may send any number of responses per request."""
        return self.get_version(name, version).decoupled

    def start_infer(
        self,
        request: InferenceRequest,
        on_response: Callable[[InferenceResponse], None],
        decoupled_message: str | None = None,
        stream_call: str = "stream_async()",
        here: bool = False,
        front: FrontEnd | None = None,
    ) -> None:
        """Queue ``request`` for a model that is not decoupled; ``on_response(response)``
        gets its one response (an error response included), on whichever thread
        answers it. Raises ``TritonError`` when it is refused before queueing: a
        decoupled model as UNSUPPORTED with ``decoupled_message`` (a front end's
        wording) when given, else as INVALID_ARG pointing to ``stream_call``. ``here``:
        the calling thread waits for the answer anyway, and may run the request itself
        when an instance is free (no hand-off to a worker thread and back). ``front``: a
        front end's stamps (``Tracer.front``) for the request's trace."""
        mv = self._admit(request)
        if mv.decoupled:
            raise _decoupled_refusal(request, decoupled_message, stream_call)

        def done(response: InferenceResponse | None, flags: int) -> None:
            if response is not None:
                on_response(response)

        self._submit(mv, request, done, False, here, front)

    async def infer_async(
        self, request: InferenceRequest, decoupled_message: str | None = None, front: FrontEnd | None = None
    ) -> InferenceResponse:
        """Run ``request``; raise ``TritonError`` if it fails, else return its response.

        For a model that is not decoupled (see ``start_infer``). Cancelling the
        awaiting task cancels the request.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[InferenceResponse] = loop.create_future()
        self.start_infer(request, functools.partial(answer_on, loop, fut), decoupled_message, front=front)
        return await awaited_response(fut, request)

    def infer(self, request: InferenceRequest, timeout: float | None = None) -> InferenceResponse:
        """Blocking ``infer_async`` for threads without an event loop."""
        return self._infer_on(self._admit(request), request, timeout)

    def _infer_on(
        self, mv: LoadedVersion, request: InferenceRequest, timeout: float | None
    ) -> InferenceResponse:
        """``infer`` on ``mv``, the version ``_admit`` found for ``request``."""
        # ``start_infer`` spelt out, its callback the answer's own.
        if mv.decoupled:
            raise _decoupled_refusal(request, None, "stream()")
        answer = Answer()
        # Without a timeout this thread may run the request itself: it waits anyway.
        self._submit(mv, request, answer.done, False, timeout is None)
        response = answer.wait(timeout)
        if response.error is not None:
            raise response.error
        return response

    def stream_async(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Every response of ``request`` (any model), errors included, as they come.

        Leaving the loop early (or cancelling the task) cancels the request.
        """
        return responses(self.stream_flags_async(request))

    async def stream_flags_async(
        self, request: InferenceRequest
    ) -> AsyncGenerator[tuple[InferenceResponse | None, int], None]:
        """``stream_async`` with each response's flags: ``(response, flags)`` as the model
        sends them, the last with ``RESPONSE_COMPLETE_FINAL`` (a decoupled model's final
        flag may come without a response: None). For front ends that tell the client
        which response is final (gRPC's ``triton_final_response``).
        """
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[InferenceResponse | None, int]] = asyncio.Queue()

        def done(response: InferenceResponse | None, flags: int) -> None:
            call_soon_threadsafe(loop, inbox.put_nowait, (response, flags))

        self.submit(request, done)
        finished = False
        try:
            while not finished:
                call = await inbox.get()
                finished = bool(call[1] & RESPONSE_COMPLETE_FINAL)
                yield call
        finally:
            if not finished:
                request.cancel()

    def stream(self, request: InferenceRequest, timeout: float | None = None) -> ResponseIterator:
        """Blocking ``stream_async``: every response of ``request``, errors included (a
        request refused raises); ``timeout`` bounds the wait for each response, and
        ``close()`` on the iterator before the end cancels the request."""
        return ResponseIterator(self, request, raise_on_error=False, timeout=timeout, raise_refusal=True)


def _decoupled_refusal(request: InferenceRequest, message: str | None, stream_call: str) -> TritonError:
    """A one-response call's refusal of a decoupled model: UNSUPPORTED with a front end's
    ``message`` when given, else INVALID_ARG pointing to ``stream_call``."""
    if message is not None:
        return TritonError.unsupported(message)
    return TritonError.invalid_arg(
        f"model '{request.model_name}' is decoupled (it may send any number of responses); "
        f"use {stream_call} or ModelHandle.infer() to receive them"
    )


#: How often a request is sent on to what serves after the version it found was replaced.
_RESUBMITS = 3

#: How long a backend's readiness check may take before the model counts as not ready.
READY_CHECK_SECONDS = 5.0
