"""Backend discovery: entry points of the group ``tritonpy.backends``.

Listing reads package metadata only and imports nothing. A backend is imported
and validated when a model first needs it; a backend that fails to import or
to validate is reported once, naming its distribution and the cause, and only
the models that need it become UNAVAILABLE.
"""

from __future__ import annotations

import difflib
import logging
import threading
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from tritonpy_sdk import Backend, ServerApi, TritonError
from tritonpy_sdk.host import ENTRY_POINT_GROUP, BackendHooks, PluginError, call_hook, validate_backend

from ..config import platform_backend

# The name it had before runtime/ existed: log lines and users' logging filters name it.
log = logging.getLogger("tritonpy.backends")

#: The package that provides each backend tritonpy ships, for "not installed" messages.
KNOWN_PACKAGES = {
    "onnxruntime": "tritonpy-backend-onnx",
    "pytorch": "tritonpy-backend-torch",
    "tensorrt": "tritonpy-backend-tensorrt",
    "fil": "tritonpy-backend-fil",
    "python": "tritonpy-backend-python",
    "identity": "tritonpy-backend-identity",
    "repeat": "tritonpy-backend-repeat",
    "square": "tritonpy-backend-square",
}


def install_hint(backend: str) -> str:
    """How to install the package of a backend tritonpy ships, in words that work while the
    packages are not on PyPI; empty for a backend tritonpy does not ship."""
    package = KNOWN_PACKAGES.get(backend)
    if package is None:
        return ""
    folder = package.removeprefix("tritonpy-backend-")  # each has its folder under plugins/
    return (
        f"install the package '{package}' (not on PyPI yet: pip install ./plugins/{folder} "
        f"from a clone of tritonpy, or pip install --find-links DIR {package} with the wheels that "
        "./dev wheels DIR builds)"
    )


#: Default model files of those backends, to name the package a repository needs.
KNOWN_FILES = {
    "model.onnx": "onnxruntime",
    "model.pt": "pytorch",
    "model.pt2": "pytorch",
    "model.plan": "tensorrt",
    "model.py": "python",
}


@dataclass
class BackendEntry:
    """A discovered backend: where it comes from and, once loaded, its hooks."""

    name: str
    distribution: str
    version: str
    target: str
    entry_point: EntryPoint | None = None
    plugin: object | None = None
    hooks: BackendHooks | None = None
    error: str | None = None
    backend: Backend | None = None
    initialized: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class BackendRegistry:
    """The backends one server can use. Thread-safe; owned by a ``Server``."""

    def __init__(
        self,
        settings: dict[str, dict[str, str]] | None = None,
        backend_directory: Path | None = None,
        server_api: ServerApi | None = None,
    ) -> None:
        self._settings = settings or {}
        self._directory = backend_directory
        #: Given to every ``Backend`` as ``backend.server``.
        self.server_api = server_api
        self._entries: dict[str, BackendEntry] = {}
        self._lock = threading.Lock()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist
            entry = BackendEntry(
                name=ep.name,
                distribution=dist.name if dist is not None else "?",
                version=dist.version if dist is not None else "?",
                target=ep.value,
                entry_point=ep,
            )
            if ep.name in self._entries:
                other = self._entries[ep.name]
                log.warning(
                    "backend '%s' is provided by both %s and %s; using %s",
                    ep.name,
                    other.distribution,
                    entry.distribution,
                    other.distribution,
                )
                continue
            self._entries[ep.name] = entry

    def register(self, name: str, plugin: object, distribution: str = "(in-process)") -> None:
        """Add a backend object directly (embedding, tests); replaces a discovered one."""
        with self._lock:
            self._entries[name] = BackendEntry(
                name=name, distribution=distribution, version="", target=repr(plugin), plugin=plugin
            )

    def entries(self) -> list[BackendEntry]:
        """All discovered backends, sorted by name, without importing any."""
        return [self._entries[n] for n in sorted(self._entries)]

    def hooks(self, name: str) -> BackendHooks:
        """The validated hooks of backend ``name``; TritonError if unusable."""
        entry = self._entries.get(name)
        if entry is None:
            entry = self._python_based(name)
        if entry is None:
            raise TritonError.unavailable(self._not_installed(name))
        with entry.lock:
            if entry.hooks is None and entry.error is None:
                self._load(entry)
        if entry.error is not None:
            raise TritonError.unavailable(entry.error)
        assert entry.hooks is not None
        return entry.hooks

    def _not_installed(self, name: str) -> str:
        """Why backend ``name`` cannot be used: how to install it, or for a name tritonpy does not
        ship, the installed backends and the closest name (a misspelling)."""
        hint = install_hint(name)
        if hint:
            return f"backend '{name}' is not installed: {hint}"
        installed = sorted(self._entries)
        message = f"backend '{name}' is not installed; installed backends: {', '.join(installed) or 'none'}"
        close = difflib.get_close_matches(name, sorted(set(installed) | set(KNOWN_PACKAGES)), n=1, cutoff=0.6)
        if close:
            message += f"; did you mean '{close[0]}'?"
            if close[0] not in self._entries:
                message += f" ({install_hint(close[0])})"
        return message

    def _python_based(self, name: str) -> BackendEntry | None:
        """A Python-based backend: ``<backend-directory>/<name>/model.py`` served by "python"."""
        if self._directory is None or name == "python":
            return None
        if not (self._directory / name / "model.py").is_file():
            return None
        python = self._entries.get("python")
        if python is None:
            raise TritonError.unavailable(
                f"backend '{name}' is a Python-based backend ({self._directory / name / 'model.py'}): "
                f"{install_hint('python')}"
            )
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                entry = self._entries[name] = BackendEntry(
                    name=name,
                    distribution=python.distribution,
                    version=python.version,
                    target=python.target,
                    entry_point=python.entry_point,
                    plugin=python.plugin,
                )
            return entry

    def _load(self, entry: BackendEntry) -> None:
        where = f"{entry.distribution} {entry.version}".strip()
        try:
            plugin = entry.plugin
            if plugin is None:
                assert entry.entry_point is not None
                plugin = entry.entry_point.load()
            entry.hooks = validate_backend(entry.name, plugin)
        except PluginError as exc:
            entry.error = f"{exc} (from {where})"
        except Exception as exc:  # import errors of third-party code land here
            entry.error = (
                f"backend '{entry.name}' from {where} failed to import "
                f"'{entry.target}': {type(exc).__name__}: {exc}"
            )
        if entry.error is not None:
            log.error("%s", entry.error)

    def initialized(self, name: str) -> tuple[BackendHooks, Backend]:
        """Hooks and the ``Backend`` object of ``name``, initialising it once."""
        hooks = self.hooks(name)
        entry = self._entries[name]
        with entry.lock:
            if entry.error is not None:
                raise TritonError.unavailable(entry.error)
            if not entry.initialized:
                directory = self._directory / name if self._directory is not None else None
                backend = Backend(
                    name,
                    self._merged_settings(name),
                    logger=logging.getLogger(f"tritonpy.backend.{name}"),
                    directory=directory if directory is not None and directory.is_dir() else None,
                    server=self.server_api,
                )
                try:
                    call_hook(hooks, "initialize", backend=backend)
                except TritonError as exc:
                    entry.error = f"backend '{name}' failed to initialize: {exc.message}"
                    log.error("%s", entry.error)
                    raise TritonError.unavailable(entry.error) from None
                entry.backend = backend
                entry.initialized = True
            assert entry.backend is not None
            return hooks, entry.backend

    def _merged_settings(self, name: str) -> dict[str, str]:
        merged = dict(self._settings.get("", {}))
        merged.update(self._settings.get(name, {}))
        return merged

    def backend_for_platform(self, platform: str) -> str:
        """The backend serving a Triton ``platform:`` string."""
        known = platform_backend(platform)
        if known is not None:
            return known
        for entry in self.entries():
            try:
                if platform in self.hooks(entry.name).info.platforms:
                    return entry.name
            except TritonError:
                continue
        raise TritonError.invalid_arg(f"unexpected platform type '{platform}'")

    def backend_for_files(self, version_dirs: list[Path]) -> str | None:
        """The backend whose default model file exists in one of ``version_dirs``.

        When the files there match the default model files of several backends
        the choice is the user's: TritonError naming each backend and its file.
        """
        claims: list[tuple[BackendEntry, str]] = []
        for entry in self.entries():
            try:
                filename = self.hooks(entry.name).info.default_model_filename
            except TritonError:
                continue
            if filename and any((d / filename).exists() for d in version_dirs):
                claims.append((entry, filename))
        if len(claims) > 1:
            model = version_dirs[0].parent.name if version_dirs else "?"
            named = ", ".join(
                f"'{e.name}' ({f}, from {f'{e.distribution} {e.version}'.strip()})" for e, f in claims
            )
            raise TritonError.invalid_arg(
                f"unable to determine the backend of model '{model}': its files are the default model "
                f"files of more than one backend: {named}; set 'backend' in its config.pbtxt to choose"
            )
        return claims[0][0].name if claims else None

    def finalize(self) -> None:
        """Call ``finalize`` on every initialised backend (errors are logged)."""
        for entry in self.entries():
            if entry.initialized and entry.hooks is not None and entry.backend is not None:
                try:
                    call_hook(entry.hooks, "finalize", backend=entry.backend)
                except TritonError as exc:
                    log.warning("finalize of backend '%s' failed: %s", entry.name, exc.message)
                entry.initialized = False
