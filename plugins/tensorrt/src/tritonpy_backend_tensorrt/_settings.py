"""The backend's settings, ``--backend-config=tensorrt,<key>=<value>``, as Triton's TensorRT
backend reads them:

- ``plugins``: shared libraries of TensorRT plugins to load, separated by ``;``
  (their plugins register themselves with TensorRT as they load); one that
  cannot be loaded is logged and skipped, as Triton does;
- ``version-compatible``: ``true`` lets engines built version-compatible
  (``--versionCompatible``) run their embedded host code (TensorRT's
  ``engine_host_code_allowed``): only for plans from a trusted source;
- ``coalesce-request-input`` and ``execution-policy`` are accepted and have no
  effect here (inputs are always gathered into one buffer per input; each
  instance runs its batches on its own worker thread).

TensorRT's own plugins (``libnvinfer_plugin``: NMS, ...) are registered for every
model, as Triton registers them, when the backend's runtime is made.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tritonpy_sdk import Backend

log = logging.getLogger("tritonpy.backend.tensorrt")


@dataclass(frozen=True)
class Settings:
    plugins: tuple[str, ...] = ()
    version_compatible: bool = False

    @classmethod
    def from_backend(cls, backend: Backend) -> Settings:
        paths = tuple(p.strip() for p in backend.config.get("plugins", "").split(";") if p.strip())
        return cls(paths, backend.setting_bool("version-compatible", False))


def load_plugins(paths: Sequence[str]) -> list[ctypes.CDLL]:
    """Each plugin library of ``paths`` loaded (kept loaded: the handles are returned);
    one that cannot be is logged and left out."""
    loaded = []
    for path in paths:
        try:
            loaded.append(ctypes.CDLL(path))
        except OSError as exc:
            log.error("unable to load TensorRT plugin library '%s': %s", path, exc)
            continue
        log.info("loaded TensorRT plugin library '%s'", path)
    return loaded
