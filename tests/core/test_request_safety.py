"""Whatever fails after a request was accepted, every request is answered, only the
failing one gets the error, and nothing stays in flight or keeps its tensors.

A failure is injected at each stage of the path (validation, batch formation,
execute, response conversion, statistics, the caller's callback), under dynamic
batching so a poisoned request shares its batch with innocent ones.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    RequestedOutput,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend

CONFIG = """
backend: "gated"
max_batch_size: 16
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
"""


class Gated(CpuBackend):
    """Echo backend: the request "hold" blocks the instance until ``release`` is set,
    so the requests sent meanwhile form one batch; raises ValueError for any batch
    holding the request "explode"."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.batches: list[list[str]] = []

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        ids = [r.id for r in requests]
        self.batches.append(ids)
        if "hold" in ids:
            self.holding.set()
            assert self.release.wait(30)
        if "explode" in ids:
            raise ValueError("model blew up")
        return self.echo(requests, 2)


class Client:
    """Submits requests and collects each one's answers; ``wait`` bounds every wait."""

    def __init__(self, server: tritonpy.Server) -> None:
        self.server = server
        self.answers: dict[str, list[tuple[InferenceResponse | None, int]]] = {}
        self.finished: dict[str, threading.Event] = {}
        self.inputs: dict[str, weakref.ref[Any]] = {}

    def send(self, request_id: str, raise_in_callback: bool = False, **output_params: Any) -> None:
        x = np.full((1, 4), 1.0, np.float32)
        self.inputs[request_id] = weakref.ref(x)
        outputs = [RequestedOutput("Y", dict(output_params))] if output_params else []
        request = InferenceRequest(
            model_name="m", model_version=-1, inputs={"X": Tensor.from_numpy("X", x)}, id=request_id
        )
        request.requested_outputs = outputs
        self.answers[request_id] = []
        event = self.finished[request_id] = threading.Event()

        def done(response: InferenceResponse | None, flags: int) -> None:
            self.answers[request_id].append((response, flags))
            if flags & RESPONSE_COMPLETE_FINAL:
                event.set()
            if raise_in_callback:
                raise RuntimeError("the caller's callback failed")

        self.server.submit(request, done)

    def wait(self, request_id: str) -> InferenceResponse:
        assert self.finished[request_id].wait(10), f"request '{request_id}' was never answered"
        (response, flags), *rest = self.answers[request_id]
        assert not rest and flags & RESPONSE_COMPLETE_FINAL and response is not None
        return response


class FormattedLog(logging.Handler):
    """Keeps log lines as text, and turns each record's traceback into text too.

    pytest's capture handlers keep every record, exc_info included, whose
    traceback frames would keep a failed batch's tensors alive in these tests
    only; placed first, this handler drops exc_info before they see the record.
    """

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # also caches the traceback as record.exc_text
        record.exc_info = None


@pytest.fixture(autouse=True)
def server_log() -> Iterator[FormattedLog]:
    handler = FormattedLog()
    logger = logging.getLogger("tritonpy")
    logger.handlers.insert(0, handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[tritonpy.Server, Gated, Client]]:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(CONFIG)
    backend = Gated()
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("gated", backend)
    server.start()
    yield server, backend, Client(server)
    backend.release.set()
    server.stop(timeout=10)


def _batch_with(
    server: tritonpy.Server, backend: Gated, client: Client, poison: dict[str, Any] | None = None
) -> list[str]:
    """Hold the instance, queue innocents around "poison" (sent with ``poison`` options),
    release: they run as one batch. Returns the innocents' ids."""
    client.send("hold")
    assert backend.holding.wait(10)
    innocents = [f"ok{i}" for i in range(4)]
    client.send(innocents[0])
    client.send("poison", **(poison or {}))
    for request_id in innocents[1:]:
        client.send(request_id)
    backend.release.set()
    return innocents


def _assert_clean(server: tritonpy.Server, client: Client) -> None:
    """Nothing in flight, and soon no request's input tensor is alive (without a GC:
    the worker drops its references just after answering)."""
    assert not server._inflight
    client.answers.clear()
    deadline = time.monotonic() + 10
    alive = [""]
    while alive and time.monotonic() < deadline:
        alive = [rid for rid, ref in client.inputs.items() if ref() is not None]
        time.sleep(0.01)
    assert alive == [], f"tensors still referenced for {alive}"


def _serves_again(client: Client) -> None:
    client.send("after")
    response = client.wait("after")
    assert response.error is None
    np.testing.assert_array_equal(response.outputs["Y"].data, np.full((1, 4), 2.0, np.float32))


def test_classification_that_is_not_an_integer_is_refused_at_once(
    served: tuple[tritonpy.Server, Gated, Client],
) -> None:
    server, _, client = served
    for key in ("classification", "class_count"):
        for value in ("a", "1.5", True, 1.5, -1, 2**64):
            with pytest.raises(TritonError) as info:
                client.send("bad", **{key: value})
            assert info.value.code is ErrorCode.INVALID_ARG
            assert f"Unable to set '{key}' of output 'Y'" in info.value.message
            assert "non-negative integer" in info.value.message
    del info  # its traceback holds the refused request's frames
    client.send("zero", classification=0)  # 0 means "no classification", as in Triton
    assert client.wait("zero").outputs["Y"].datatype.value == "FP32"
    client.send("two", classification=2)
    assert client.wait("two").outputs["Y"].data.shape == (1, 2)
    _assert_clean(server, client)


def test_failing_response_conversion_fails_only_its_request(
    served: tuple[tritonpy.Server, Gated, Client], monkeypatch: pytest.MonkeyPatch, server_log: FormattedLog
) -> None:
    server, backend, client = served
    import tritonpy.runtime.model as model_module

    real = model_module.finish_response

    def finish(spec: Any, labels: Any, request: InferenceRequest, response: InferenceResponse) -> Any:
        if request.id == "poison":
            raise ValueError("cannot convert")
        return real(spec, labels, request, response)

    monkeypatch.setattr(model_module, "finish_response", finish)
    innocents = _batch_with(server, backend, client)
    error = client.wait("poison").error
    assert error is not None and error.code is ErrorCode.INTERNAL
    # The client learns the type and an incident id; the text and traceback stay in the log.
    assert error.message.startswith("internal error (ValueError); the server log has the details")
    assert "cannot convert" not in error.message
    incident = error.message.rsplit(" ", 1)[1]
    for request_id in ["hold", *innocents]:
        assert client.wait(request_id).error is None
    assert any("poison" in b and "ok0" in b for b in backend.batches), backend.batches
    assert any(incident in line and "ValueError: cannot convert" in line for line in server_log.lines)
    _serves_again(client)
    _assert_clean(server, client)


def test_a_failing_callback_costs_the_others_nothing(served: tuple[tritonpy.Server, Gated, Client]) -> None:
    server, backend, client = served
    innocents = _batch_with(server, backend, client, poison={"raise_in_callback": True})
    assert client.wait("poison").error is None  # it was delivered; its callback then failed
    for request_id in ["hold", *innocents]:
        assert client.wait(request_id).error is None
    _serves_again(client)
    _assert_clean(server, client)


def test_execute_raising_a_plain_exception_answers_the_whole_batch(
    served: tuple[tritonpy.Server, Gated, Client],
) -> None:
    server, backend, client = served
    client.send("hold")
    assert backend.holding.wait(10)
    client.send("explode")
    client.send("ok0")
    backend.release.set()
    assert client.wait("hold").error is None
    for request_id in ("explode", "ok0"):  # one batch: the backend failed it whole
        error = client.wait(request_id).error
        assert error is not None and "ValueError: model blew up" in error.message
    _serves_again(client)
    _assert_clean(server, client)


def test_failing_statistics_still_answer_every_request(
    served: tuple[tritonpy.Server, Gated, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, backend, client = served
    stats = server.get_version("m").stats
    monkeypatch.setattr(stats, "record_execution", _raise)
    monkeypatch.setattr(stats, "record_one", _raise)  # a batch of one records through it
    innocents = _batch_with(server, backend, client)
    for request_id in ["hold", "poison", *innocents]:
        error = client.wait(request_id).error
        assert error is not None and error.code is ErrorCode.INTERNAL
    monkeypatch.undo()
    _serves_again(client)
    _assert_clean(server, client)


def test_the_batcher_survives_a_failure_in_batch_formation(
    served: tuple[tritonpy.Server, Gated, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, client = served
    scheduler = server.get_version("m")._scheduler
    real = scheduler._form  # type: ignore[union-attr]
    calls = {"n": 0}

    def form(now: int) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("batch formation bug")
        return real(now)

    monkeypatch.setattr(scheduler, "_form", form)
    _serves_again(client)
    assert calls["n"] >= 2
    _assert_clean(server, client)


def _raise(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("statistics failed")


def test_nothing_keeps_a_failed_request_alive_without_a_gc(
    served: tuple[tritonpy.Server, Gated, Client],
) -> None:
    server, backend, client = served
    gc.disable()  # reference cycles (e.g. through a traceback) would show as live tensors
    try:
        client.send("hold")
        assert backend.holding.wait(10)
        client.send("explode")
        backend.release.set()
        client.wait("hold")
        assert client.wait("explode").error is not None
        _assert_clean(server, client)
    finally:
        gc.enable()
