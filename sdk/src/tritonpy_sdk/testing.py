"""Run a backend on a model folder without a server.

For backend authors' tests::

    from tritonpy_sdk.testing import BackendHarness
    import my_backend

    with BackendHarness(my_backend, tmp_path / "my_model") as h:
        out = h.infer({"INPUT0": np.ones((1, 4), np.float32)})
        assert out["OUTPUT0"].shape == (1, 4)

The harness calls the hooks in the server's order (backend_info, initialize,
auto_complete_config, gpu_support where the host has a GPU, model_initialize,
instance_initialize ... finalize) on one instance, and builds the model's
config with the server's own code, so a backend sees in its tests the config
it sees when served. It does not validate requests against the config the
way the server does; it is for testing a backend, not the core.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ._inference import InferenceRequest, InferenceResponse, ParameterValue
from ._objects import Backend, Model, ModelInstance
from ._plugin import BackendHooks, call_hook, validate_backend
from ._sender import execute_collect
from ._tensor import Tensor

__all__ = ["BackendHarness"]


class BackendHarness:
    """One backend, one model version, one instance, no server.

    ``plugin`` is a hook module (or object) or a :class:`~tritonpy_sdk.Predictor`
    subclass. The model's config is built by the server's own code (the
    ``tritonpy`` package, a test dependency): ``config`` as a dict in Triton's
    JSON form, else the folder's ``config.pbtxt``, else none; then the backend's
    auto-complete (unless ``auto_complete=False``), Triton's defaults and the
    server's validation, exactly as ``tritonpy serve`` would. ``model.config``
    and ``model.user_config`` are what the backend would get there.
    """

    def __init__(
        self,
        plugin: object,
        model_dir: str | Path,
        *,
        version: int = 1,
        config: Mapping[str, Any] | None = None,
        backend_name: str = "test",
        backend_config: Mapping[str, str] | None = None,
        instance_kind: str = "KIND_CPU",
        auto_complete: bool = True,
    ) -> None:
        self.hooks: BackendHooks = validate_backend(backend_name, plugin)
        self.model_dir = Path(model_dir)
        self.version = version
        self.backend = Backend(backend_name, dict(backend_config or {}))
        self._config = copy.deepcopy(dict(config)) if config is not None else None
        self._instance_kind = instance_kind
        self._auto_complete = auto_complete
        self._started = False
        self._initialized = False
        self.model: Model
        self.instance: ModelInstance

    def start(self) -> BackendHarness:
        """``initialize``, the config as the server builds it, ``model_initialize``,
        ``instance_initialize``; a failing hook raises its ``TritonError``."""
        try:
            from tritonpy.config import config_from_dict, load_config_file, text_fields, user_config
            from tritonpy.devices import gpu_count
            from tritonpy.runtime.loading import bind_backend, prepare_model
        except ImportError as exc:
            raise RuntimeError(
                "BackendHarness builds the model config with the server's own code: "
                "install the 'tritonpy' package in the test environment"
            ) from exc
        path = self.model_dir / "config.pbtxt"
        if self._config is not None:
            base = config_from_dict(self._config)
            written = user_config(base, list(self._config))
        elif path.exists():
            base = load_config_file(path)
            written = user_config(base, text_fields(path.read_text(encoding="utf-8")))
        else:
            base = config_from_dict({})
            written = {}
        if not base.name:
            base.name = self.model_dir.name
        call_hook(self.hooks, "initialize", backend=self.backend)
        self._initialized = True
        try:
            bind_backend(base, self.hooks, [self.model_dir / str(self.version)])
            self.model, _ = prepare_model(
                self.hooks,
                self.backend,
                base.name,
                self.model_dir,
                self.version,
                base,
                written,
                auto_complete=self._auto_complete,
                gpus=gpu_count(),
            )
            self.instance = ModelInstance(f"{self.model.name}_0", self._instance_kind, 0, self.model)
            call_hook(self.hooks, "model_initialize", model=self.model)
            try:
                call_hook(self.hooks, "instance_initialize", instance=self.instance)
            except BaseException:
                call_hook(self.hooks, "model_finalize", model=self.model)
                raise
        except BaseException:
            self._initialized = False
            call_hook(self.hooks, "finalize", backend=self.backend)
            raise
        self._started = True
        return self

    def close(self) -> None:
        if not self._started:
            return
        self._started = False
        call_hook(self.hooks, "instance_finalize", instance=self.instance)
        call_hook(self.hooks, "model_finalize", model=self.model)
        call_hook(self.hooks, "finalize", backend=self.backend)

    def __enter__(self) -> BackendHarness:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def request(
        self,
        inputs: Mapping[str, Any],
        *,
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str = "",
    ) -> InferenceRequest:
        """Build a request the way the core would hand it to ``execute``."""
        tensors = {name: Tensor.from_numpy(name, value) for name, value in inputs.items()}
        batch = 1
        if self.model.max_batch_size > 0 and tensors:
            batch = next(iter(tensors.values())).shape[0]
        return InferenceRequest(
            model_name=self.model.name,
            model_version=self.model.version,
            inputs=tensors,
            id=request_id,
            parameters=dict(parameters or {}),
            batch_size=batch,
        )

    def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        """Call ``execute`` once with ``requests``; one (final) response per request.

        A backend answering through response senders is waited for; for a
        decoupled model use ``execute_stream``.
        """
        return [responses[-1] for responses in self.execute_stream(requests)]

    def execute_stream(self, requests: Sequence[InferenceRequest]) -> list[list[InferenceResponse]]:
        """Call ``execute`` once; every response of each request, however it was sent."""
        if not self._started:
            raise RuntimeError("BackendHarness.start() (or `with`) first")
        decoupled = bool((self.model.config.get("model_transaction_policy") or {}).get("decoupled"))
        got = execute_collect(
            lambda batch: self.hooks.execute(self.instance, batch), list(requests), decoupled
        )
        for index, responses in enumerate(got):
            if not responses and not decoupled:
                raise AssertionError(f"request {index} got no response")
        return got

    def infer(self, inputs: Mapping[str, Any], **kwargs: Any) -> dict[str, np.ndarray[Any, Any]]:
        """One request in, its outputs out as numpy arrays; raises its error."""
        (response,) = self.execute([self.request(inputs, **kwargs)])
        if response.error is not None:
            raise response.error
        return {name: t.data for name, t in response.outputs.items()}
