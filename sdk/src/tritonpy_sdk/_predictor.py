"""``Predictor``: the high-level way to write a backend — ``load()`` and ``predict()``.

A subclass names its model file and implements two methods; the SDK derives
the hooks from it (:mod:`._predictor_hooks`), so the server's validation,
dynamic batching, statistics and auto-complete apply unchanged::

    class Doubler(Predictor):
        backend_info = BackendInfo(default_model_filename="model.json")

        def load(self) -> None:
            self.scale = json.loads(self.model_path.read_text())["scale"]

        def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {"OUTPUT0": inputs["INPUT0"] * self.scale}

The class itself is the backend: ``[project.entry-points."tritonpy.backends"]
doubler = "my_package:Doubler"``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ._backend_info import BackendInfo
from ._errors import TritonError
from ._inference import InferenceRequest
from ._objects import Model, ModelInstance

Arrays = dict[str, np.ndarray[Any, Any]]


class PartialResult:
    """What ``predict`` returns to fail some requests of a batch and answer the others.

    ``outputs`` are the batch's outputs as usual; ``errors`` maps a row of the
    batch (the first dimension of the concatenated inputs; 0 for a model that
    does not batch) to its error (a ``TritonError``, or any exception or string,
    reported as INVALID_ARG). Each request with a row in ``errors`` gets that
    error instead of outputs; the other requests get their rows of ``outputs``,
    which may hold anything in the failed rows.
    """

    __slots__ = ("outputs", "errors")

    def __init__(
        self, outputs: Mapping[str, np.ndarray[Any, Any]], errors: Mapping[int, TritonError | Exception | str]
    ) -> None:
        self.outputs = dict(outputs)
        self.errors = {int(row): _as_error(err) for row, err in errors.items()}


def _as_error(err: TritonError | Exception | str) -> TritonError:
    if isinstance(err, TritonError):
        return err
    return TritonError.invalid_arg(str(err))


class Predictor:
    """Subclass it, set ``backend_info`` and implement ``load`` and ``predict``.

    One object is made per model instance (``instance_group`` count x kind) and
    ``load`` is called on it once, before it serves; ``unload`` once at unload.
    ``predict`` is never called concurrently on one object, but different
    instances predict at the same time (on their own threads).

    Before ``load`` the object knows where it runs: ``instance``, ``model``,
    ``config``, ``model_path``, ``parameters``, ``kind``, ``device_id``,
    ``max_batch_size``, ``logger``. While ``predict`` runs, ``requests`` holds
    the requests of the current call (ids, parameters, requested outputs).

    ``predict`` gets ``{input name: numpy array}`` and returns ``{output name:
    array}``. For a model with ``max_batch_size > 0`` the arrays of every
    request of a dynamic batch are concatenated along the first (batch)
    dimension and ``predict`` is called once; its outputs must keep that first
    dimension and are cut back per request. Requests whose inputs differ
    beyond the batch dimension (or in which optional inputs they carry) are
    predicted one call each. BYTES tensors are numpy object arrays of
    ``bytes`` (return ``bytes`` or ``str``); other outputs are converted to the
    config's data type. Each request gets only the outputs it asked for.

    Raising fails every request of the call (``TritonError`` keeps its code;
    any other exception is INTERNAL with its message); returning a
    :class:`PartialResult` fails only some. ``predict`` may be ``async def``:
    it then runs on the server's event loop when the server has one (so it
    must not block: await the I/O it waits for), else on a loop of the
    instance's own.
    """

    #: What the server needs before loading a model: default model file, platforms, instances.
    backend_info: ClassVar[BackendInfo] = BackendInfo(default_instance_kind="KIND_CPU")

    instance: ModelInstance
    requests: list[InferenceRequest]

    def __init__(self, instance: ModelInstance) -> None:
        self.instance = instance
        self.requests = []

    # -- what the object knows ---------------------------------------------------------

    @property
    def model(self) -> Model:
        """The model version this instance serves (shared by its instances)."""
        return self.instance.model

    @property
    def config(self) -> dict[str, Any]:
        """The final model configuration, in Triton's JSON form (read-only)."""
        return self.instance.model.config

    @property
    def model_path(self) -> Path:
        """``<repository>/<model>/<version>/<default_model_filename>``."""
        return self.instance.model.model_path

    @property
    def parameters(self) -> dict[str, str]:
        """The config's ``parameters`` as ``{key: string_value}``."""
        return self.instance.model.parameters

    @property
    def max_batch_size(self) -> int:
        return self.instance.model.max_batch_size

    @property
    def kind(self) -> str:
        """``KIND_CPU``, ``KIND_GPU`` or ``KIND_MODEL``."""
        return self.instance.kind

    @property
    def device_id(self) -> int:
        """The GPU of a ``KIND_GPU`` instance, else 0."""
        return self.instance.device_id

    @property
    def logger(self) -> logging.Logger:
        """The backend's logger (``tritonpy.backend.<name>`` in a server)."""
        return self.instance.model.backend.logger

    # -- what a subclass implements ------------------------------------------------------

    @classmethod
    def auto_complete(cls, model: Model) -> None:
        """Optional: fill what the user's config leaves out, before it is validated.

        Called once per model version, before any instance exists, unless the
        server runs with ``--disable-auto-complete-config``. Edit
        ``model.config``; ``model.user_config`` holds what the user wrote, and
        :func:`tritonpy_sdk.complete_input` / ``complete_output`` /
        ``complete_max_batch_size`` add only what is missing. The same
        ``model`` object is later shared by the instances (``self.model``),
        so a model file read here may be kept in ``model.state``.
        """

    def load(self) -> None:
        """Load the model for this instance (from ``self.model_path``). Once per instance."""

    def predict(self, inputs: Arrays) -> Arrays | PartialResult | Awaitable[Arrays | PartialResult]:
        """Inputs by name (batched) in, outputs by name (batched) out."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def unload(self) -> None:
        """Release what ``load`` acquired. Once per instance, at unload."""
