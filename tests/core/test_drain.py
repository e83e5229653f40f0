"""Stopping drains: clients' new requests are refused while the ones in flight
finish, including the requests those make to other models (BLS)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend

CONFIG = """
backend: "chain"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


class Chain(CpuBackend):
    """Model "outer" waits for ``go``, then asks model "inner" (as BLS does) and
    returns inner's answer; "inner" doubles X."""

    def __init__(self) -> None:
        self.server: tritonpy.Server | None = None
        self.entered = threading.Event()
        self.go = threading.Event()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        if instance.model.name == "inner":
            doubled = [Tensor.from_numpy("Y", 2 * r.inputs["X"].data) for r in requests]
            return [InferenceResponse({"Y": y}) for y in doubled]
        self.entered.set()
        assert self.go.wait(30)
        assert self.server is not None
        api = self.server.backends.server_api
        assert api is not None
        answers: list[InferenceResponse] = []
        done = threading.Event()

        def on_response(response: InferenceResponse | None, flags: int) -> None:
            if response is not None:
                answers.append(response)
            if flags & RESPONSE_COMPLETE_FINAL:
                done.set()

        inner = InferenceRequest(model_name="inner", model_version=-1, inputs=dict(requests[0].inputs))
        api.submit(inner, on_response)
        assert done.wait(30)
        return answers


def test_stop_refuses_new_requests_and_finishes_those_in_flight(tmp_path: Path) -> None:
    for name in ("outer", "inner"):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(CONFIG)
    backend = Chain()
    server = tritonpy.Server(model_repository=tmp_path)
    backend.server = server
    server.backends.register("chain", backend)
    server.start()
    x = np.array([1.0, 2.0], np.float32)
    result: dict[str, object] = {}

    def call() -> None:
        result["outer"] = server.model("outer").predict({"X": x})["Y"]

    caller = threading.Thread(target=call)
    caller.start()
    assert backend.entered.wait(10)
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 30})
    stopper.start()
    deadline = time.monotonic() + 10
    while not server.draining and time.monotonic() < deadline:  # stop() has begun draining
        time.sleep(0.01)
    assert server.draining and not server.ready()
    with pytest.raises(TritonError) as refused:
        server.model("inner").predict({"X": x})
    assert refused.value.code is ErrorCode.UNAVAILABLE
    assert refused.value.message == "Server is stopping"
    backend.go.set()  # the request in flight now makes its BLS call: taken while draining
    caller.join(30)
    stopper.join(30)
    assert not stopper.is_alive()
    np.testing.assert_array_equal(result["outer"], x * 2)
