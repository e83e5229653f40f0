"""Which interpreter runs a model's stub: this one, or the one of ``EXECUTION_ENV_PATH``.

``EXECUTION_ENV_PATH`` names an unpacked environment (a folder with
``bin/python``) or a packed one (``.tar.gz``/``.tgz``/``.tar``, e.g. made with
conda-pack), which is unpacked once into a cache folder (and ``conda-unpack``
run when the archive has it). ``$$TRITON_MODEL_DIRECTORY`` in the value is the
model's folder, as in Triton. The stub needs only numpy from that environment:
``triton_python_backend_utils`` is put on its path alone.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import triton_python_backend_utils
from tritonpy_sdk import TritonError

_lock = threading.Lock()
_isolated_path: str | None = None


@dataclass(frozen=True)
class StubEnvironment:
    """The interpreter and environment variables of a stub process."""

    python: str
    env: dict[str, str] = field(default_factory=dict)


#: The ``triton_python_backend_utils`` package every stub imports.
_PACKAGE = Path(triton_python_backend_utils.__file__).resolve().parent


def _isolated_utils_path() -> str:
    """A folder holding only ``triton_python_backend_utils`` (a link), for foreign interpreters.

    One per installed copy of the package, in the cache, so servers share it and
    nothing is left in the temporary folder.
    """
    global _isolated_path
    with _lock:
        if _isolated_path is None:
            key = hashlib.sha256(str(_PACKAGE).encode()).hexdigest()[:16]
            folder = _cache_root().parent / "pbutils" / key
            link = folder / "triton_python_backend_utils"
            if not link.exists():
                folder.mkdir(parents=True, exist_ok=True)
                staging = folder / f".link-{os.getpid()}"
                staging.unlink(missing_ok=True)
                os.symlink(_PACKAGE, staging)
                os.replace(staging, link)  # atomic: a concurrent server sees a whole link
            _isolated_path = str(folder)
        return _isolated_path


def default_environment() -> StubEnvironment:
    env = dict(os.environ)
    path = [str(_PACKAGE.parent), *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(p for p in dict.fromkeys(path) if p)
    return StubEnvironment(sys.executable, env)


def resolve_environment(value: str, model_dir: Path) -> StubEnvironment:
    """The stub environment for an ``EXECUTION_ENV_PATH`` parameter value."""
    path = Path(value.replace("$$TRITON_MODEL_DIRECTORY", str(model_dir))).expanduser()
    if not path.exists():
        raise TritonError.invalid_arg(f"EXECUTION_ENV_PATH '{path}' does not exist")
    if path.is_file():
        path = _unpack(path)
    python = next((p for p in (path / "bin" / "python3", path / "bin" / "python") if p.exists()), None)
    if python is None:
        raise TritonError.invalid_arg(f"EXECUTION_ENV_PATH '{path}' has no bin/python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = _isolated_utils_path()
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return StubEnvironment(str(python), env)


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonpy" / "envs"


def _unpack(archive: Path) -> Path:
    if not archive.name.endswith((".tar.gz", ".tgz", ".tar")):
        raise TritonError.invalid_arg(
            f"EXECUTION_ENV_PATH '{archive}' must be a folder or a .tar.gz/.tgz/.tar archive"
        )
    stat = archive.stat()
    key = hashlib.sha256(f"{archive.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    target = _cache_root() / key
    with _lock:
        if (target / ".unpacked").exists():
            return target
        target.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "tar_filter"):  # Python with extraction filters
                    tar.extractall(target, filter="tar")
                else:
                    tar.extractall(target)  # the model owner's own archive
        except (tarfile.TarError, OSError) as exc:
            raise TritonError.invalid_arg(f"cannot unpack EXECUTION_ENV_PATH '{archive}': {exc}") from None
        unpack = target / "bin" / "conda-unpack"
        if unpack.exists():
            subprocess.run([str(unpack)], cwd=target, check=False, capture_output=True)
        (target / ".unpacked").touch()
    return target
