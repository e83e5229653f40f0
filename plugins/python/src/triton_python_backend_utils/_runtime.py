"""What ``triton_python_backend_utils`` talks to: the stub's IPC link or the in-process host.

A model's code only sees the public classes; each call that needs the
server (BLS, logging, metrics, model control, response senders) goes
through ``current()``: the runtime of the server whose model is running
(``entered`` while the in-process host calls into a model), else the one
``install``ed for this interpreter (a stub's, or the first in-process server's).
A stub serves one model of one server; in-process models of several ``Server``s
share one interpreter, so each call into a model says whose it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import InferenceRequest, InferenceResponse


class Runtime:
    """The server side of the ``pb_utils`` API. Subclassed by the stub and the in-process host."""

    def bls(
        self, request: InferenceRequest, decoupled: bool, timeout: float | None
    ) -> InferenceResponse | Iterator[InferenceResponse]:
        raise NotImplementedError

    def bls_async(
        self, request: InferenceRequest, decoupled: bool, timeout: float | None
    ) -> Any:  # awaitable of a response, or of an async iterator of responses
        raise NotImplementedError

    def log(self, level: str, message: str, filename: str, line: int) -> None:
        raise NotImplementedError

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        raise NotImplementedError

    def metric(self, family: Any, labels: dict[str, str], buckets: list[float] | None) -> Any:
        raise NotImplementedError

    def metric_update(self, metric: Any, op: str, value: float) -> None:
        raise NotImplementedError

    def metric_value(self, metric: Any) -> float:
        raise NotImplementedError

    def model_control(self, op: str, name: str, version: int, config: str, files: dict[str, bytes]) -> Any:
        raise NotImplementedError


class _Unattached(Runtime):
    """Outside a server (a model imported by a test): everything that needs one says so."""

    def _fail(self, what: str) -> Any:
        from ._api import TritonModelException

        raise TritonModelException(f"{what} needs a running server: this model is not served by tritonpy")

    def bls(self, request: InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        return self._fail("BLS")

    def bls_async(self, request: InferenceRequest, decoupled: bool, timeout: float | None) -> Any:
        return self._fail("BLS")

    def log(self, level: str, message: str, filename: str, line: int) -> None:
        print(f"{level} {filename}:{line}] {message}")

    def metric_family(self, name: str, description: str, kind: str) -> Any:
        return self._fail("a metric family")

    def metric(self, family: Any, labels: dict[str, str], buckets: list[float] | None) -> Any:
        return self._fail("a metric")

    def metric_update(self, metric: Any, op: str, value: float) -> None:
        self._fail("a metric")

    def metric_value(self, metric: Any) -> float:
        return float(self._fail("a metric"))

    def model_control(self, op: str, name: str, version: int, config: str, files: dict[str, bytes]) -> Any:
        return self._fail("model control")


_installed: Runtime = _Unattached()
#: The runtime of the model being called (set by the in-process host around each
#: call into a model; an ``async def execute`` runs in a copy of the caller's context).
_entered: ContextVar[Runtime | None] = ContextVar("triton_python_backend_runtime", default=None)


def current() -> Runtime:
    return _entered.get() or _installed


def installed() -> Runtime:
    """The interpreter's runtime, whatever model is running."""
    return _installed


def install(runtime: Runtime) -> None:
    global _installed
    _installed = runtime


def uninstall(runtime: Runtime) -> None:
    """``runtime``'s server has stopped: if it is the interpreter's, none is any more."""
    global _installed
    if _installed is runtime:
        _installed = _Unattached()


def enter(runtime: Runtime) -> Token[Runtime | None]:
    """Make ``runtime`` current in this context until ``leave(token)``."""
    return _entered.set(runtime)


def leave(token: Token[Runtime | None]) -> None:
    _entered.reset(token)


AsyncResponses = AsyncIterator["InferenceResponse"]
