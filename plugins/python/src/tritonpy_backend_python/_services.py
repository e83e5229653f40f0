"""What a Python model may ask of the server besides inference: logs, metrics, model control.

Shared by stub processes (answering the stub's queries) and in-process models.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

from triton_python_backend_utils._host import is_decoupled
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    Metric,
    MetricFamily,
    OnResponse,
    ServerApi,
    TritonError,
)

_LEVELS = {"INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR, "VERBOSE": logging.DEBUG}


class ServerServices:
    """BLS, logging, custom metrics and model control for the models of one backend."""

    def __init__(self, server: ServerApi | None, logger: logging.Logger) -> None:
        self.server = server
        self.logger = logger
        self._ids = itertools.count(1)
        self._families: dict[int, MetricFamily] = {}
        self._metrics: dict[int, Metric] = {}
        self._lock = threading.Lock()
        #: Model versions whose execute returning None has been looked at (execute_returned_none).
        self._warned_none: set[tuple[str, str]] = set()

    def execute_returned_none(self, args: dict[str, str], pending: int) -> None:
        """A model's ``execute`` returned None while ``pending`` of its requests have no final
        response. Triton says nothing and the clients wait; this says it once per model
        version, at warning level. Not for decoupled models, which answer that way by design."""
        if pending == 0:
            return
        key = (args.get("model_name", "?"), args.get("model_version", "?"))
        with self._lock:
            if key in self._warned_none:
                return
            self._warned_none.add(key)
            if is_decoupled(args.get("model_config", "{}")):
                return
        self.logger.warning(
            "execute() of model '%s' version %s returned None while %d request(s) have no final "
            "response: they will be answered only through their response senders (return a list "
            "with one InferenceResponse per request; this is said once per model)",
            key[0],
            key[1],
            pending,
        )

    def submit(self, request: InferenceRequest, answer: OnResponse) -> None:
        """Run a model's BLS request; a request that cannot start is answered with its error."""
        try:
            self._server().submit(request, answer)
        except TritonError as exc:
            answer(InferenceResponse.from_error(_bls_error(request, exc)), RESPONSE_COMPLETE_FINAL)

    def output_names(self, model: str, version: int) -> list[str]:
        """The outputs of a model a BLS request calls ([] when it has none to tell: the
        request then fails with the server's own words)."""
        try:
            config = self._server().model_config(model, version)
        except TritonError:
            return []
        return [str(o["name"]) for o in config.get("output", [])]

    def log(self, level: str, message: str, filename: str, line: int) -> None:
        levelno = _LEVELS.get(level, logging.INFO)
        if not self.logger.isEnabledFor(levelno):
            return
        # The model's file and line are the record's: the log shows them as Triton's
        # ``model.py:12]``.
        record = self.logger.makeRecord(self.logger.name, levelno, filename, line, "%s", (message,), None)
        self.logger.handle(record)

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop, where stubs are read when there is one."""
        if self.server is None:
            return None
        return self.server.event_loop()

    def _server(self) -> ServerApi:
        if self.server is None:
            raise TritonError.unavailable("this backend does not run inside a server")
        return self.server

    def family(self, name: str, description: str, kind: str) -> int:
        family = self._server().metrics.family(name, description, kind)
        with self._lock:
            handle = next(self._ids)
            self._families[handle] = family
        return handle

    def metric(self, family: int, labels: dict[str, str], buckets: list[float] | None) -> tuple[int, str]:
        fam = self._families.get(family)
        if fam is None:
            raise TritonError.invalid_arg("unknown metric family")
        metric = fam.metric(labels, buckets)
        with self._lock:
            handle = next(self._ids)
            self._metrics[handle] = metric
        return handle, fam.kind.value

    def update(self, handle: int, op: str, value: float) -> None:
        metric = self._metrics.get(handle)
        if metric is not None:
            getattr(metric, op)(value)

    def value(self, handle: int) -> float:
        metric = self._metrics.get(handle)
        if metric is None:
            raise TritonError.invalid_arg("unknown metric")
        return metric.value()

    def control(self, op: str, name: str, version: int, config: str, files: dict[str, bytes]) -> Any:
        server = self._server()
        if op == "ready":
            return server.is_model_ready(name, version)
        if op == "load":
            server.load_model(name, config, files)
            return None
        if op == "unload":
            server.unload_model(name)
            return None
        raise TritonError.invalid_arg(f"unknown model control operation '{op}'")

    def answer(self, what: str, fields: dict[str, Any]) -> Any:
        """A stub's query (``what`` and its fields) → its value; TritonError on failure."""
        if what == "family":
            return self.family(fields["name"], fields["description"], fields["kind"])
        if what == "metric":
            return self.metric(fields["family"], fields["labels"], fields["buckets"])
        if what == "value":
            return self.value(fields["handle"])
        return self.control(what, fields["name"], fields["version"], fields["config"], fields["files"])


def _bls_error(request: InferenceRequest, error: TritonError) -> TritonError:
    """Triton's wording (and INTERNAL code) for a BLS request to a model that is not
    there (as Triton words it since 2026; 2.51 said "not ready" for both) or not ready."""
    if error.code not in (ErrorCode.NOT_FOUND, ErrorCode.UNAVAILABLE):
        return error
    name = request.model_name
    if "unknown model" in error.message:
        return TritonError.internal(f"Model {name} - Error when running inference: {error.message}")
    if "is not ready" in error.message or "has no available versions" in error.message:
        return TritonError.internal(
            f"Model {name} - Error when running inference: Failed for execute the inference "
            f"request. Model '{name}' is not ready."
        )
    return error
