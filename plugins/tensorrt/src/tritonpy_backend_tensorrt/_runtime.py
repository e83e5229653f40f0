"""The backend's TensorRT: the module, one ``tensorrt.Runtime``, and deserializing plans.

``probe`` imports tensorrt and cuda-python and counts GPUs once, at the
backend's ``initialize``; nothing fails there, so a host without them still
lists the backend and serves every other model, while a ``model.plan`` model
is UNAVAILABLE with ``reason``. The runtime is made on first use and shared
by every model and instance of the server (TensorRT's runtime is not tied to a
GPU: an engine is deserialized while the instance's GPU is current).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonpy_sdk import TritonError, cuda_runtime_module

from ._availability import deserialize_message, unavailable_reason
from ._cuda import Cuda

log = logging.getLogger("tritonpy.backend.tensorrt")


@dataclass(eq=False)
class TensorRT:
    """What ``initialize`` found; ``reason`` is "" when plans can be served."""

    trt: Any = None
    cuda: Cuda | None = None
    reason: str = ""
    #: Whether version-compatible plans may run their embedded host code, and the plugin
    #: libraries loaded for the backend (kept loaded) (``_settings.py``).
    version_compatible: bool = False
    plugins: list[Any] = field(default_factory=list)
    _runtime: Any = None
    _logger: Any = None
    #: TensorRT's deserialization is serialized (as Triton does, with one global lock).
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def probe(cls) -> TensorRT:
        try:
            import tensorrt as trt
        except ImportError as exc:  # also a broken install (missing libnvinfer)
            return cls(reason=unavailable_reason(None, str(exc), False, 0))
        rt = cuda_runtime_module()
        cuda = Cuda(rt) if rt is not None else None
        count = cuda.device_count() if cuda is not None else 0
        version = str(getattr(trt, "__version__", "0"))
        return cls(trt=trt, cuda=cuda, reason=unavailable_reason(version, "", cuda is not None, count))

    @property
    def version(self) -> str:
        return str(getattr(self.trt, "__version__", "?"))

    def require(self) -> None:
        """Raise UNAVAILABLE with the reason when plans cannot be served here."""
        if self.reason:
            raise TritonError.unavailable(self.reason)

    def runtime(self) -> Any:
        """The server's ``tensorrt.Runtime``, made once, after TensorRT's own plugins are
        registered (as Triton registers them: engines using NMS and the like need them)."""
        with self._lock:
            if self._runtime is None:
                self._logger = _logger(self.trt)
                if not self.trt.init_libnvinfer_plugins(self._logger, ""):
                    log.error("Failed to register TensorRT Plugins")
                runtime = self.trt.Runtime(self._logger)
                if self.version_compatible:
                    runtime.engine_host_code_allowed = True
                self._runtime = runtime
            return self._runtime

    def deserialize(self, model_name: str, path: Path, device: int) -> Any:
        """The engine in ``path``, deserialized on GPU ``device`` (which is made current)."""
        assert self.cuda is not None
        try:
            plan = path.read_bytes()
        except OSError as exc:
            raise TritonError.unavailable(
                f"unable to find '{path}' for model '{model_name}': {exc}"
            ) from None
        runtime = self.runtime()
        self.cuda.set_device(device)
        with self._lock:
            self._logger.errors.clear()
            try:
                engine = runtime.deserialize_cuda_engine(plan)
            except Exception as exc:  # the bindings raise on some malformed plans
                self._logger.errors.append(str(exc))
                engine = None
            errors = list(self._logger.errors)
        if engine is None:
            gpu = self.cuda.compute_capability(device)
            raise TritonError.invalid_arg(
                deserialize_message(model_name, path.name, device, gpu, self.version, errors)
            )
        return engine


def _logger(trt: Any) -> Any:
    """A ``tensorrt.ILogger`` keeping the errors of the call in progress (the reason a plan is
    refused) and passing everything at WARNING and above to Python's logging."""

    class Logger(trt.ILogger):  # type: ignore[misc]  # TensorRT's pybind11 base class
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR):
                self.errors.append(msg)
                log.error("TensorRT: %s", msg)
            elif severity == trt.ILogger.WARNING:
                log.warning("TensorRT: %s", msg)
            else:
                log.debug("TensorRT: %s", msg)

    return Logger()
