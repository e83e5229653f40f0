"""The repeat backend without a server (the SDK's harness runs its hooks, no request validation):
what the core's validation never lets through (a WAIT of another size, several requests in one
execution), and that an instance is finalized only after its responses are all sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy_backend_repeat as backend
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, InferenceResponse, ResponseSender, TritonError
from tritonpy_sdk.testing import BackendHarness

CONFIG: dict[str, Any] = {
    "name": "repeat_int32",
    "backend": "repeat",
    "max_batch_size": 0,
    "model_transaction_policy": {"decoupled": True},
    "input": [
        {"name": "IN", "data_type": "TYPE_INT32", "dims": [-1]},
        {"name": "DELAY", "data_type": "TYPE_UINT32", "dims": [-1]},
        {"name": "WAIT", "data_type": "TYPE_UINT32", "dims": [1]},
    ],
    "output": [
        {"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]},
        {"name": "IDX", "data_type": "TYPE_UINT32", "dims": [1]},
    ],
}


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[BackendHarness]:
    (tmp_path / "1").mkdir()
    with BackendHarness(backend, tmp_path, config=CONFIG, backend_name="repeat") as h:
        yield h


def _inputs(values: list[int], delays: list[int] | None = None, wait: Any = None) -> dict[str, Any]:
    return {
        "IN": np.array(values, np.int32),
        "DELAY": np.array(delays if delays is not None else [0] * len(values), np.uint32),
        "WAIT": np.array([0], np.uint32) if wait is None else wait,
    }


def _error(responses: list[InferenceResponse]) -> TritonError:
    (response,) = responses
    assert response.error is not None
    return response.error


def test_each_element_is_a_response(harness: BackendHarness) -> None:
    (responses,) = harness.execute_stream([harness.request(_inputs([4, 5, 6]))])
    assert [(int(r.outputs["OUT"].data[0]), int(r.outputs["IDX"].data[0])) for r in responses] == [
        (4, 0),
        (5, 1),
        (6, 2),
    ]


def test_an_empty_in_gets_no_response(harness: BackendHarness, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert harness.execute_stream([harness.request(_inputs([]))]) == [[]]
    assert "IN size is zero, no responses sent" in caplog.messages


@pytest.mark.parametrize(
    ("wait", "message"),
    [
        (np.array([1, 2], np.uint32), "[request id: r] buffer too small for input tensor 'WAIT', 4 < 8"),
        (np.array([], np.uint32), "unexpected size for WAIT input"),
        (np.array([1], np.uint16), "unexpected size for WAIT input"),
    ],
)
def test_a_wait_of_another_size_is_refused_in_repeat_ccs_words(
    harness: BackendHarness, wait: np.ndarray[Any, Any], message: str
) -> None:
    (responses,) = harness.execute_stream([harness.request(_inputs([1], wait=wait), request_id="r")])
    error = _error(responses)
    assert error.message == message
    assert error.code.name == "INVALID_ARG"


def test_wait_is_read_as_a_little_endian_uint32(harness: BackendHarness) -> None:
    from tritonpy_backend_repeat._respond import read_wait

    request = harness.request(_inputs([1], wait=np.array([2**32 - 1], np.uint32)))
    assert read_wait(request) == 2**32 - 1


def test_several_requests_in_one_execution_are_refused(harness: BackendHarness) -> None:
    requests = [harness.request(_inputs([1])), harness.request(_inputs([2]))]
    with pytest.raises(TritonError, match="^repeat backend does not support batched request execution$"):
        harness.execute_stream(requests)


def test_an_instance_is_finalized_after_its_responses(tmp_path: Path) -> None:
    """execute returns while the responses still come; instance_finalize waits for them
    (repeat.cc's instance destructor waits for its threads). The first send is held until the
    test lets it go, so nothing here depends on how long anything takes."""
    (tmp_path / "1").mkdir()
    harness = BackendHarness(backend, tmp_path, config=CONFIG, backend_name="repeat").start()
    got: list[tuple[InferenceResponse | None, int]] = []
    gate = threading.Event()

    def deliver(response: InferenceResponse | None, flags: int) -> None:
        gate.wait()
        got.append((response, flags))

    request = harness.request(_inputs([1, 2]))
    request.response_sender = ResponseSender(deliver, request, decoupled=True)
    assert harness.hooks.execute(harness.instance, [request]) is None  # released, still sending
    closing = threading.Thread(target=harness.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # instance_finalize waits for the response thread
    gate.set()
    closing.join(10)
    assert not closing.is_alive()
    assert [flags for _, flags in got] == [0, 0, RESPONSE_COMPLETE_FINAL]
    assert got[-1][0] is None  # the FINAL flag alone
