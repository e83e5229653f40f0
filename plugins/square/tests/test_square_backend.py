"""The square backend without a server (the SDK's harness runs its hooks, no request validation):
several requests in one execution, a request cancelled before its first response, an IN
without elements (which the core's validation never lets through), and that an instance is
finalized only after its responses are all sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy_backend_square as backend
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceResponse, ResponseSender
from tritonpy_sdk.testing import BackendHarness

CONFIG: dict[str, Any] = {
    "name": "square_int32",
    "backend": "square",
    "max_batch_size": 0,
    "model_transaction_policy": {"decoupled": True},
    "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]}],
}


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[BackendHarness]:
    (tmp_path / "1").mkdir()
    with BackendHarness(backend, tmp_path, config=CONFIG, backend_name="square") as h:
        yield h


def _in(value: int) -> dict[str, Any]:
    return {"IN": np.array([value], np.int32)}


def test_each_request_of_an_execution_gets_its_own_responses(harness: BackendHarness) -> None:
    got = harness.execute_stream([harness.request(_in(2)), harness.request(_in(0)), harness.request(_in(1))])
    assert [[r.outputs["OUT"].data.tolist() for r in responses] for responses in got] == [
        [[2], [2]],
        [],
        [[1]],
    ]


def test_a_request_cancelled_before_its_first_response_gets_none(
    harness: BackendHarness, caplog: pytest.LogCaptureFixture
) -> None:
    request = harness.request(_in(3))
    request.cancel()
    with caplog.at_level(logging.INFO):
        assert harness.execute_stream([request]) == [[]]
    assert "sent response 1 of 3" in caplog.messages
    assert "cancelled at response 1 of 3" in caplog.messages


def test_zero_is_logged_in_square_ccs_words(
    harness: BackendHarness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        assert harness.execute_stream([harness.request(_in(0))]) == [[]]
    assert "IN size is zero, no responses send " in caplog.messages


def test_an_in_without_elements_is_refused(harness: BackendHarness) -> None:
    ((response,),) = harness.execute_stream([harness.request({"IN": np.array([], np.int32)})])
    assert response.error is not None
    assert response.error.message == "unexpected shape for IN input"


def test_an_instance_is_finalized_after_its_responses(tmp_path: Path) -> None:
    """execute returns at once; instance_finalize waits for the responses still being sent
    (square.cc's instance destructor waits for its threads). The first send is held until the
    test lets it go, so nothing here depends on how long anything takes."""
    (tmp_path / "1").mkdir()
    harness = BackendHarness(backend, tmp_path, config=CONFIG, backend_name="square").start()
    got: list[tuple[InferenceResponse | None, int]] = []
    gate = threading.Event()

    def deliver(response: InferenceResponse | None, flags: int) -> None:
        gate.wait()
        got.append((response, flags))

    request = harness.request(_in(2))
    request.response_sender = ResponseSender(deliver, request, decoupled=True)
    assert harness.hooks.execute(harness.instance, [request]) is None
    closing = threading.Thread(target=harness.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # instance_finalize waits for the response thread
    gate.set()
    closing.join(10)
    assert not closing.is_alive()
    assert [flags for _, flags in got] == [0, 0, RESPONSE_COMPLETE_FINAL]
    assert got[-1][0] is None  # the FINAL flag alone
