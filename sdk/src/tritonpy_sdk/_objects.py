"""The objects the core passes to backend hooks: Backend, Model, ModelInstance.

Each carries a ``state`` slot that belongs to the backend (Triton's
``TRITONBACKEND_*SetState``): hooks keep no state of their own and store what
they need there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import TritonError

if TYPE_CHECKING:
    from ._device_memory import DeviceMemory
    from ._inference import InferenceResponse
    from ._server_api import ServerApi


@dataclass(eq=False)
class Backend:
    """A loaded backend. One per backend name per server.

    ``config`` holds the ``--backend-config=<name>,<key>=<value>`` settings for
    this backend plus the global ones (``default-max-batch-size`` ...), as
    strings, the way Triton passes them. ``directory`` is the backend's own
    folder under ``--backend-directory`` when it has one (a Python-based backend
    keeps its ``model.py`` there). ``server`` is the server the backend runs in
    (BLS, model control, custom metrics); None only outside a server.
    """

    name: str
    config: dict[str, str] = field(default_factory=dict)
    state: Any = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("tritonpy.backend"))
    directory: Path | None = None
    server: ServerApi | None = None

    @property
    def default_max_batch_size(self) -> int:
        """``--backend-config=default-max-batch-size=N`` (Triton's default: 4)."""
        try:
            return int(self.config.get("default-max-batch-size", "4"))
        except ValueError:
            return 4

    def setting_bool(self, key: str, default: bool) -> bool:
        """The boolean ``--backend-config=<name>,<key>=<value>`` (``true``/``false``,
        ``1``/``0``, ``yes``/``no``, ``on``/``off``, any case), ``default`` when it is not
        given; INVALID_ARG naming the setting for anything else."""
        raw = self.config.get(key, "").strip().lower()
        if not raw:
            return default
        if raw in ("true", "1", "yes", "on"):
            return True
        if raw in ("false", "0", "no", "off"):
            return False
        raise TritonError.invalid_arg(
            f"backend setting '{key}' must be true or false, got '{self.config[key]}'"
        )


@dataclass(eq=False)
class Model:
    """One version of a model, as its backend sees it.

    ``config`` is the model configuration in the JSON form Triton gives
    backends (field names as in ``model_config.proto``). During
    ``auto_complete_config`` the backend may change it; afterwards it is to be
    treated as read-only. ``version_path`` is ``<repository>/<model>/<version>``
    and ``model_path`` the model file in it (``default_model_filename``).

    ``user_config`` is the configuration as the user wrote it (``config.pbtxt``,
    or the config a load request brought): only the fields written there, a
    top-level field written with its default value (``max_batch_size: 0``)
    included, so ``"max_batch_size" in model.user_config`` tells an explicit 0
    from none; ``{}`` for a model without a config. ``config`` instead holds
    every field, defaults included.

    Everything here is set before ``auto_complete_config``; the same object
    then reaches ``model_initialize``, each instance (``instance.model``) and
    ``model_finalize``, so what a hook keeps in ``state`` stays.
    """

    name: str
    version: int
    config: dict[str, Any]
    repository_path: Path
    backend: Backend
    state: Any = None
    user_config: dict[str, Any] = field(default_factory=dict)

    @property
    def version_path(self) -> Path:
        return self.repository_path / str(self.version)

    @property
    def model_path(self) -> Path:
        """The model file or folder named by ``default_model_filename``."""
        filename = self.config.get("default_model_filename") or ""
        return self.version_path / filename if filename else self.version_path

    @property
    def max_batch_size(self) -> int:
        return int(self.config.get("max_batch_size", 0))

    def cc_model_filename(self, compute_capability: str) -> str:
        """The model file ``cc_model_filenames`` names for a GPU of ``compute_capability``
        (``"8.6"``), "" when it names none (``default_model_filename`` is then the file)."""
        return str((self.config.get("cc_model_filenames") or {}).get(compute_capability, ""))

    @property
    def parameters(self) -> dict[str, str]:
        """The config's ``parameters`` as a plain ``{key: string_value}`` dict."""
        params = self.config.get("parameters") or {}
        return {k: str(v.get("string_value", "")) for k, v in params.items()}


@dataclass(eq=False)
class ModelInstance:
    """One instance of a model (an ``instance_group`` member).

    ``kind`` is ``"KIND_CPU"``, ``"KIND_GPU"`` or ``"KIND_MODEL"``;
    ``device_id`` is the GPU for KIND_GPU instances, else 0.
    ``host_allocator`` gives pinned host memory for GPU instances when the core
    has a CUDA runtime (pass it to ``gather_inputs(..., allocator=...)``); None
    means ordinary memory. ``nowait``, set by ``instance_initialize``, says
    the instance executes through the backend's ``execute_nowait`` hook
    wherever the scheduler allows it.

    ``device_inputs``, set by ``instance_initialize``, says the instance takes
    inputs in device memory (Triton's preferred input memory type GPU): an
    input that lies on this instance's GPU (a client's CUDA shared-memory
    region) is then handed over in place, as a device-resident ``Tensor``
    (``tensor.is_device``; take it with DLPack). Left false, every input is host
    memory, copied there by the core. ``device_memory`` is the core's device
    memory for GPU instances when it has a CUDA runtime (pass it to
    ``gather_tensor``); None otherwise.

    ``direct``, set by ``instance_initialize``, says the instance takes a request
    of the in-process API's ``predict`` through the backend's ``execute_direct``
    hook (arrays in, arrays out) where the core allows it.

    ``pipeline_depth``, set by ``instance_initialize`` for a ``nowait`` instance,
    is how many batches the scheduler without threads (a model without dynamic
    batching, sequences or rate limits) may have started on it at once: more than
    1 says the instance queues the batches it is handed and runs them one after
    another, in order, so the next one is already there when one ends (a child
    process reading its socket). A busy instance is handed more only while no
    instance is idle.

    ``passive``, set by the core from the instance group's ``passive``, says the
    instance is initialized (and finalized) but never handed requests by the
    scheduler, nor warmed up, as in Triton (``TRITONBACKEND_ModelInstanceIsPassive``).

    ``artifact_filename``, set by the core for a ``KIND_GPU`` instance whose GPU's
    compute capability the config's ``cc_model_filenames`` names (``{"8.6":
    "model_sm86.plan"}``), is the model file this instance loads instead of
    ``default_model_filename``, as Triton's backends choose it; ``model_path`` is
    that file (the model's ``model_path`` otherwise).
    """

    name: str
    kind: str
    device_id: int
    model: Model
    state: Any = None
    host_allocator: Callable[[tuple[int, ...], Any], Any] | None = None
    nowait: bool = False
    device_inputs: bool = False
    device_memory: DeviceMemory | None = None
    direct: bool = False
    pipeline_depth: int = 1
    passive: bool = False
    artifact_filename: str = ""

    @property
    def model_path(self) -> Path:
        """The model file this instance loads: its ``artifact_filename`` when the core set
        one (``cc_model_filenames``), else the model's ``model_path``."""
        if self.artifact_filename:
            return self.model.version_path / self.artifact_filename
        return self.model.model_path


class ExecuteComplete(Protocol):
    """How a backend's ``execute_nowait`` ends a batch, once, from any thread."""

    def __call__(
        self, responses: Sequence[InferenceResponse | None] | None, error: BaseException | None = None
    ) -> None:
        """``responses`` (one per request, in order; ``None`` for a request handed back
        with ``request.reschedule()``); ``None, error`` to fail every request; ``None``
        alone when each request was answered through its sender."""
