"""SageMaker's multi-model endpoint (MME) contract, as Triton's SageMaker front end serves it.

SageMaker unpacks each model archive into ``<root>/<hash>/model`` (``root``:
``--sagemaker-models-root``, ``/opt/ml/models``) and calls:

- ``POST /models`` with ``{"model_name": <hash>, "url": <folder>}``: the folder
  is registered as a model repository (explicit model control only) whose model
  serves under the ``X-Amzn-SageMaker-Target-Model`` header's name (else the
  hash), then loaded. The folder is the model itself when it holds a
  ``config.pbtxt``; else it holds model folders: the only one, or the ensemble
  among them, which loads the others it uses. 200 empty; 409 when that folder
  or name is already registered; 507 when the load ran out of memory; else 400.
- ``GET /models``: ``{"models": [{"modelName", "modelUrl"}]}``, the ready ones.
- ``GET /models/<hash>``: ``{"modelName", "modelUrl"}``; 404 when not loaded here.
- ``POST /models/<hash>/invoke``: an inference (``sagemaker.py``); 404 when not loaded.
- ``DELETE /models/<hash>``: unload it and the models it brought, wait until they
  are unloaded, unregister the folder; 200 empty, 404 when not loaded here.

Errors carry Triton's JSON error document; the bare answers are ``text/plain``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.responses import Response
from tritonpy_sdk import ErrorCode, TritonError

from . import json_body
from .errors import TEXT_PLAIN, bare, error_response

if TYPE_CHECKING:
    from ..server import Server

log = logging.getLogger(__name__)

#: SageMaker's own folder for a multi-model endpoint's models.
DEFAULT_MODELS_ROOT = "/opt/ml/models"
#: The header naming the archive a request is for.
TARGET_MODEL = "x-amzn-sagemaker-target-model"
#: The paths Triton's SageMaker front end matches as multi-model routes (whole path).
MODELS_ROUTE = re.compile(r"/models(?:/)?([^/]+)?(/invoke)?")
#: How long an unload waits for the model to finish (SageMaker gives up at 360 s).
UNLOAD_TIMEOUT_S = 350.0
_ENSEMBLE = re.compile(r'platform:(\s)*"ensemble"')
_SYSTEM_FOLDERS = ("/dev/", "/proc/", "/sys/")
#: The words in a failure that make Triton's SageMaker front end answer 507 (out of memory).
_OUT_OF_MEMORY = (
    "CUDA out of memory",
    "CUDA_OUT_OF_MEMORY",
    "Out of memory",
    "Out Of Memory",
    "out of memory",
    "MemoryError",
    "OutOfMemory",
    "OOM",
    "Dst tensor is not initialized",
    "Src tensor is not initialized",
    "CNMEM_STATUS_OUT_OF_MEMORY",
    "CUDNN_STATUS_NOT_INITIALIZED",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_NOT_INITIALIZED",
    "Failed to allocate memory",
    "failed to allocate memory",
    "No space left on device",
)


def failure_response(error: TritonError, media_type: str = "application/json") -> Response:
    """A failed load or inference as SageMaker is told of it: 507 when it ran out of
    memory (SageMaker then unloads other models and tries again), else 400."""
    message = error.message
    status = 507 if any(words in message for words in _OUT_OF_MEMORY) else 400
    return error_response(message, status, media_type)


def _refusal(message: str, status: int = 400) -> Response:
    """A refused load or unload: Triton's JSON error document, labelled text/plain as its
    SageMaker front end labels everything but inferences."""
    return error_response(message, status, "text/plain")


@dataclass(frozen=True, slots=True)
class LoadedArchive:
    """A model loaded through ``POST /models``: the repository folder registered for it
    (``modelUrl``) and the name it serves under."""

    url: str
    model: str


class MultiModelEndpoint:
    """The archives loaded through SageMaker's multi-model routes, by hash."""

    def __init__(self, server: Server, models_root: str = DEFAULT_MODELS_ROOT) -> None:
        self.server = server
        root = os.path.normpath(os.path.abspath(models_root))
        self._url_form = re.compile(rf"({re.escape(root)}/[0-9A-Za-z._]+)/(model)/?([0-9A-Za-z._]+)?")
        self._root = root
        self._archives: dict[str, LoadedArchive] = {}
        self._lock = threading.Lock()

    def target(self, name: str, header: str | None) -> str | None:
        """The model an invocation of ``name`` goes to: the target-model header's, else
        the name it was loaded under; None when ``name`` was not loaded here."""
        with self._lock:
            archive = self._archives.get(name)
        if archive is None:
            return None
        return header if header is not None else archive.model

    def list(self) -> Response:
        with self._lock:
            archives = list(self._archives.items())
        rows = [
            {"modelName": name, "modelUrl": archive.url}
            for name, archive in archives
            if self.server.manager.ready_versions(archive.model)
        ]
        return _json({"models": rows})

    def get(self, name: str) -> Response:
        with self._lock:
            archive = self._archives.get(name)
        if archive is None:
            return bare(404)
        return _json({"modelName": name, "modelUrl": archive.url})

    async def load(self, body: bytes, header: str | None) -> Response:
        try:
            name, url = _load_fields(json_body.loads(body) if body else None)
        except TritonError as exc:
            return _refusal(exc.message)
        return await asyncio.to_thread(self._load, name, url, header if header is not None else name)

    async def unload(self, name: str, header: str | None) -> Response:
        return await asyncio.to_thread(self._unload, name, header)

    # -- on a worker thread -----------------------------------------------------------------

    def _load(self, name: str, url: str, target: str) -> Response:
        log.info("Loading SageMaker TargetModel: %s", target)
        path = _absolute(url)
        if path.startswith(_SYSTEM_FOLDERS):
            log.error('Invalid URL: %s. "url" cannot start with /dev/, /proc/, or /sys/.', url)
            return bare(400)
        if self._url_form.fullmatch(path) is None:
            return _refusal(
                f"Invalid \"url\" '{url}': expected a path of the form {self._root}/<hash>/model[/<subdir>]",
            )
        try:
            repository, folder = _model_folder(path)
        except TritonError as exc:
            return _refusal(exc.message)
        manager = self.server.manager
        try:
            manager.register_repository(repository, {folder: target})
        except TritonError as exc:
            return _refusal(exc.message, 409 if exc.code == ErrorCode.ALREADY_EXISTS else 400)
        try:
            self.server.load_model(target)
        except TritonError as exc:
            try:
                manager.unregister_repository(repository)
            except TritonError:  # a concurrent unload took it: nothing left to undo
                pass
            if exc.code == ErrorCode.ALREADY_EXISTS:
                return _refusal(exc.message, 409)
            return failure_response(exc, "text/plain")
        with self._lock:
            self._archives.setdefault(name, LoadedArchive(repository, target))
        return bare(200)

    def _unload(self, name: str, header: str | None) -> Response:
        with self._lock:
            archive = self._archives.get(name)
        if archive is None:
            log.debug("model with hash %s is not loaded", name)
            return bare(404)
        target = header if header is not None else archive.model
        log.info("Unloading SageMaker TargetModel: %s", target)
        try:
            self.server.unload_model(target, unload_dependents=True)
        except TritonError as exc:
            return _refusal(exc.message)
        self._wait_unloaded(target)
        with self._lock:
            self._archives.pop(name, None)
        try:
            self.server.manager.unregister_repository(archive.url)
        except TritonError as exc:
            return _refusal(exc.message)
        return bare(200)

    def _wait_unloaded(self, model: str) -> None:
        """Wait until no version of ``model`` is still unloading (at most ``UNLOAD_TIMEOUT_S``)."""
        start = time.monotonic()
        if not self.server.manager.wait_unloaded(model, UNLOAD_TIMEOUT_S):
            log.error("unloading '%s' did not finish within %.0f s", model, UNLOAD_TIMEOUT_S)
            return
        log.info("UNLOAD for model %s completed in %.1f seconds.", model, time.monotonic() - start)


def _load_fields(doc: object) -> tuple[str, str]:
    """``model_name`` and ``url`` of a load's body (empty when absent, as Triton reads them)."""
    fields = {"model_name": "", "url": ""}
    if isinstance(doc, dict):
        for key in fields:
            if key in doc:
                value = doc[key]
                if not isinstance(value, str):
                    raise TritonError.invalid_arg("attempt to access JSON non-string as string")
                fields[key] = value
    return fields["model_name"], fields["url"]


def _absolute(url: str) -> str:
    """``url`` made absolute and normal; a trailing separator stays, as in Triton's ``modelUrl``."""
    path = os.path.normpath(os.path.abspath(url))
    return path + "/" if url.endswith("/") and path != "/" else path


def _model_folder(path: str) -> tuple[str, str]:
    """The repository folder to register for an archive at ``path``, and its model's folder:
    ``path`` itself when it holds a ``config.pbtxt``; else the only folder in it, or
    the ensemble among several (which brings the others it uses)."""
    folder = Path(path)
    if (folder / "config.pbtxt").is_file():
        return str(folder.parent), folder.name
    try:
        found = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return path, ""  # not there: the registration says so, in Triton's words
    if len(found) == 1:
        return path, found[0].name
    ensembles = [p for p in found if _is_ensemble(p)]
    if len(ensembles) == 1:
        log.info("SageMaker front-end detected an Ensemble config at path: %s", ensembles[0] / "config.pbtxt")
        return path, ensembles[0].name
    raise TritonError.invalid_arg(
        f"'{path}' holds {len(found)} model folders, {len(ensembles)} of them ensembles: a model archive "
        "for a multi-model endpoint holds one model, or one ensemble and the models it uses"
    )


def _is_ensemble(folder: Path) -> bool:
    try:
        text = (folder / "config.pbtxt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _ENSEMBLE.search(text) is not None


def _json(doc: object) -> Response:
    """A document as Triton's SageMaker front end writes one: compact, labelled text/plain."""
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, headers=TEXT_PLAIN)
