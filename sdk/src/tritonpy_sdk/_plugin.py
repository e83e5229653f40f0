"""Validate a backend plugin against the hook specifications and bind its hooks.

pluggy checks that every ``@hookimpl`` names a known hook and accepts only
arguments the specification has. ``BackendHooks`` then holds the plugin's own
functions, so the core calls them directly: a direct call is far cheaper than
``pm.hook.execute(...)``, and reaches only this backend.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from . import _hookspecs
from ._backend_info import BackendInfo, GpuSupport
from ._direct import DirectCall
from ._errors import TritonError
from ._inference import InferenceRequest, InferenceResponse
from ._objects import Backend, Model, ModelInstance
from ._predictor import Predictor
from ._predictor_hooks import predictor_plugin

#: The entry-point group under which backend packages declare themselves.
ENTRY_POINT_GROUP = "tritonpy.backends"

HookFn = Callable[..., Any]


class PluginError(Exception):
    """A backend plugin that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class _Hook:
    fn: HookFn
    argnames: tuple[str, ...]

    def __call__(self, **kwargs: Any) -> Any:
        return self.fn(**{k: kwargs[k] for k in self.argnames})


def _noop(**_: Any) -> None:
    return None


_NOOP = _Hook(_noop, ())


@dataclass(frozen=True, slots=True)
class BackendHooks:
    """A validated backend's hook functions, bound once for direct calls."""

    name: str
    info: BackendInfo
    plugin: object
    initialize: _Hook
    finalize: _Hook
    auto_complete_config: _Hook
    has_auto_complete: bool
    model_initialize: _Hook
    model_finalize: _Hook
    instance_initialize: _Hook
    instance_finalize: _Hook
    #: The backend's ``instance_ready`` (None: instances are ready while loaded).
    instance_ready: _Hook | None
    #: The backend's ``execute_nowait`` (None: every batch goes through ``execute``).
    execute_nowait: _Hook | None
    #: The backend's ``execute_direct`` (None: ``predict`` requests go through ``execute``).
    execute_direct: _Hook | None
    #: The backend's ``gpu_support`` (None: it can use every GPU the host has).
    gpu_support: _Hook | None
    _execute: HookFn
    _execute_args: tuple[str, ...]

    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> Sequence[InferenceResponse | None] | None:
        """Call the backend's ``execute`` (hot path: no per-call introspection)."""
        if self._execute_args == ("instance", "requests"):
            return self._execute(instance, requests)  # type: ignore[no-any-return]
        kwargs = {"instance": instance, "requests": requests}
        return self._execute(**{k: kwargs[k] for k in self._execute_args})  # type: ignore[no-any-return]

    def execute_function(
        self,
    ) -> Callable[[ModelInstance, Sequence[InferenceRequest]], Sequence[InferenceResponse | None] | None]:
        """``execute`` as one function to bind once: the backend's own when it takes
        ``(instance, requests)`` in that order (no call in between), else ``execute``."""
        if self._execute_args == ("instance", "requests"):
            return self._execute
        return self.execute

    def nowait_function(self) -> Callable[..., Any] | None:
        """``execute_nowait`` as one function to bind once (None without the hook), called
        with the keywords ``instance``, ``requests`` and ``complete``: the backend's own
        when it takes exactly those (no call in between), else the hook, which passes
        each only the ones it takes."""
        hook = self.execute_nowait
        if hook is None:
            return None
        if sorted(hook.argnames) == ["complete", "instance", "requests"]:
            return hook.fn
        return hook

    def direct_function(self) -> Callable[[ModelInstance, DirectCall], Any] | None:
        """``execute_direct`` as one function to bind once (None without the hook): the
        backend's own when it takes ``(instance, call)`` in that order."""
        hook = self.execute_direct
        if hook is None:
            return None
        if hook.argnames == ("instance", "call"):
            return hook.fn
        return lambda instance, call: hook(instance=instance, call=call)


def validate_backend(name: str, plugin: object) -> BackendHooks:
    """Check ``plugin`` against the hook specifications and bind its hooks.

    Raises :class:`PluginError` naming the backend and the hook at fault: an
    unknown hook, an argument the specification lacks, a missing required
    hook, or a ``backend_info`` that fails or returns the wrong type. A
    :class:`Predictor` subclass stands for the hooks the SDK derives from it.
    """
    if isinstance(plugin, type) and issubclass(plugin, Predictor):
        try:
            plugin = predictor_plugin(plugin)
        except TypeError as exc:
            raise PluginError(f"backend '{name}': {exc}") from None
    pm = pluggy.PluginManager(_hookspecs.PROJECT_NAME)
    pm.add_hookspecs(_hookspecs)
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"backend '{name}': {exc}") from None
    impls: dict[str, _Hook] = {}
    for hook_name in _HOOK_NAMES:
        caller = getattr(pm.hook, hook_name)
        found = [i for i in caller.get_hookimpls() if i.plugin is plugin]
        if found:
            impl = found[0]
            impls[hook_name] = _Hook(impl.function, tuple(impl.argnames))
    missing = [h for h in _hookspecs.REQUIRED_HOOKS if h not in impls]
    if missing:
        raise PluginError(
            f"backend '{name}': required hook(s) {', '.join(missing)} not implemented "
            f"(mark them with @tritonpy_sdk.hookimpl)"
        )
    try:
        info = impls["backend_info"]()
    except Exception as exc:  # a plugin's own bug: report it, don't propagate it
        raise PluginError(f"backend '{name}': hook backend_info raised {exc!r}") from None
    if not isinstance(info, BackendInfo):
        raise PluginError(
            f"backend '{name}': hook backend_info returned {type(info).__name__}, "
            "expected tritonpy_sdk.BackendInfo"
        )
    for hook_name, hook in impls.items():
        if inspect.iscoroutinefunction(hook.fn):
            raise PluginError(f"backend '{name}': hook {hook_name} must not be async")
    execute = impls["execute"]
    return BackendHooks(
        name=name,
        info=info,
        plugin=plugin,
        initialize=impls.get("initialize", _NOOP),
        finalize=impls.get("finalize", _NOOP),
        auto_complete_config=impls.get("auto_complete_config", _NOOP),
        has_auto_complete="auto_complete_config" in impls,
        model_initialize=impls.get("model_initialize", _NOOP),
        model_finalize=impls.get("model_finalize", _NOOP),
        instance_initialize=impls.get("instance_initialize", _NOOP),
        instance_finalize=impls.get("instance_finalize", _NOOP),
        instance_ready=impls.get("instance_ready"),
        execute_nowait=impls.get("execute_nowait"),
        execute_direct=impls.get("execute_direct"),
        gpu_support=impls.get("gpu_support"),
        _execute=execute.fn,
        _execute_args=execute.argnames,
    )


def call_hook(hooks: BackendHooks, hook_name: str, **kwargs: Backend | Model | ModelInstance) -> None:
    """Call a lifecycle hook, turning any exception into ``TritonError``."""
    hook: _Hook = getattr(hooks, hook_name)
    try:
        hook(**kwargs)
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError.internal(f"{hook_name} of backend '{hooks.name}' failed: {exc}") from exc


def ask_gpu_support(hooks: BackendHooks, backend: Backend, model: Model) -> GpuSupport:
    """The backend's ``gpu_support`` answer for ``model`` (usable without the hook);
    a failing hook or a wrong answer is ``TritonError`` (INTERNAL) naming the backend."""
    if hooks.gpu_support is None:
        return GpuSupport()
    try:
        answer = hooks.gpu_support(backend=backend, model=model)
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError.internal(f"gpu_support of backend '{hooks.name}' failed: {exc}") from exc
    if not isinstance(answer, GpuSupport):
        raise TritonError.internal(
            f"gpu_support of backend '{hooks.name}' returned {type(answer).__name__}, "
            "expected tritonpy_sdk.GpuSupport"
        )
    return answer


_HOOK_NAMES = (
    "backend_info",
    "initialize",
    "finalize",
    "auto_complete_config",
    "model_initialize",
    "model_finalize",
    "instance_initialize",
    "instance_finalize",
    "instance_ready",
    "execute",
    "execute_nowait",
    "execute_direct",
    "gpu_support",
)
