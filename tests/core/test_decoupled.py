"""Decoupled models and response senders through the in-process API (no network)."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from contextlib import aclosing

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_testbackend import CANCELLED, TestBackend, write_model, write_sender_models

A = np.array([[1, 2, 3, 4]], np.int32)
B = np.array([[1, 1, 1, 1]], np.int32)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tritonpy.Server]:
    repo = tmp_path_factory.mktemp("repo")
    write_sender_models(repo)
    write_model(repo, "addsub")
    write_model(repo, "addsub_batched", extra="dynamic_batching { }")
    # Not decoupled: one response through the sender, then execute raises.
    write_model(
        repo, "raise_after_one", extra='parameters { key: "raise_after" value: { string_value: "1" } }\n'
    )
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("testbk", TestBackend())
    with server:
        yield server


def _stats(server: tritonpy.Server, model: str) -> tuple[int, int]:
    (stats,) = server.model_statistics(model)
    return stats["inference_stats"]["success"]["count"], stats["inference_stats"]["fail"]["count"]


def _wait_stats(server: tritonpy.Server, model: str, expected: tuple[int, int]) -> tuple[int, int]:
    """The (success, fail) counts once they reach ``expected`` (or after a generous wait).

    A request answered through its sender is recorded once its FINAL was delivered,
    which may be just after the caller saw the last response.
    """
    deadline = time.monotonic() + 10
    while (got := _stats(server, model)) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_model_handle_yields_every_response(server: tritonpy.Server) -> None:
    before = _stats(server, "decoupled")
    responses = list(server.model("decoupled").infer({"INPUT0": A, "INPUT1": B}, request_id="d1"))
    assert [r.parameters["index"] for r in responses] == [0, 1, 2]
    for r in responses:
        assert (r.id, r.model_name, r.model_version) == ("d1", "decoupled", 1)
        np.testing.assert_array_equal(r.outputs["OUTPUT0"].to_numpy(), A + B)
    # One request, one success, however many responses it had.
    assert _wait_stats(server, "decoupled", (before[0] + 1, before[1])) == (before[0] + 1, before[1])


def test_response_count_per_request_and_empty_final(server: tritonpy.Server) -> None:
    handle = server.model("decoupled")
    assert len(list(handle.infer({"INPUT0": A, "INPUT1": B}, parameters={"responses": 5}))) == 5
    assert list(handle.infer({"INPUT0": A, "INPUT1": B}, parameters={"responses": 0})) == []
    responses = list(server.model("decoupled_empty_final").infer({"INPUT0": A, "INPUT1": B}))
    assert [r.parameters["index"] for r in responses] == [0, 1]


async def test_async_infer_yields_every_response(server: tritonpy.Server) -> None:
    handle = server.model("decoupled")
    responses = [r async for r in handle.async_infer({"INPUT0": A, "INPUT1": B})]
    assert [r.parameters["index"] for r in responses] == [0, 1, 2]


def test_infer_refuses_a_decoupled_model(server: tritonpy.Server) -> None:
    request = server.model("decoupled").create_request({"INPUT0": A, "INPUT1": B})
    with pytest.raises(TritonError, match="is decoupled") as info:
        server.infer(request)
    assert info.value.code is ErrorCode.INVALID_ARG
    with pytest.raises(TritonError, match="is decoupled"):
        server.model("decoupled").predict({"INPUT0": A, "INPUT1": B})
    assert server.is_decoupled("decoupled") and not server.is_decoupled("addsub")


def test_leaving_stream_early_cancels_the_request(server: tritonpy.Server) -> None:
    request = server.model("decoupled").create_request(
        {"INPUT0": A, "INPUT1": B}, parameters={"responses": 1, "wait_cancel": True}, request_id="leave"
    )
    stream = server.stream(request, timeout=20)
    first = next(stream)
    assert first.parameters["index"] == 0
    stream.close()  # the caller stops reading
    assert request.is_cancelled()
    assert CANCELLED.saw("leave")


async def test_leaving_async_stream_early_cancels_the_request(server: tritonpy.Server) -> None:
    request = server.model("decoupled").create_request(
        {"INPUT0": A, "INPUT1": B}, parameters={"responses": 1, "wait_cancel": True}, request_id="aleave"
    )
    async with aclosing(server.model("decoupled").async_infer(request)) as responses:
        async for _ in responses:
            break
    assert await asyncio.to_thread(CANCELLED.saw, "aleave")


def test_model_that_is_not_decoupled_answering_through_its_sender(server: tritonpy.Server) -> None:
    out = server.model("sender_one").predict({"INPUT0": A, "INPUT1": B})
    np.testing.assert_array_equal(out["OUTPUT1"], A - B)
    (response,) = server.model("sender_one").infer({"INPUT0": A, "INPUT1": B})
    assert response.parameters["index"] == 0


def test_final_without_a_response_from_a_model_that_is_not_decoupled(server: tritonpy.Server) -> None:
    before = _stats(server, "sender_final_only")
    with pytest.raises(TritonError, match="FINAL flag without a response") as info:
        server.model("sender_final_only").predict({"INPUT0": A, "INPUT1": B})
    assert info.value.code is ErrorCode.INTERNAL
    (response,) = server.model("sender_final_only").infer({"INPUT0": A, "INPUT1": B}, raise_on_error=False)
    assert response.error is not None
    expected = (before[0], before[1] + 2)
    assert _wait_stats(server, "sender_final_only", expected) == expected


def test_execute_raising_after_sending_part(server: tritonpy.Server) -> None:
    before = _stats(server, "raise_after")
    responses = list(server.model("raise_after").infer({"INPUT0": A, "INPUT1": B}, raise_on_error=False))
    assert len(responses) == 2
    assert responses[0].error is None and responses[0].parameters["index"] == 0
    assert responses[1].error is not None and "raised after sending" in responses[1].error.message
    assert _wait_stats(server, "raise_after", (before[0], before[1] + 1)) == (before[0], before[1] + 1)
    with pytest.raises(TritonError, match="raised after sending"):
        list(server.model("raise_after").infer({"INPUT0": A, "INPUT1": B}))


def test_a_model_that_is_not_decoupled_keeps_its_one_response_when_execute_raises_after_it(
    server: tritonpy.Server,
) -> None:
    """The first response wins, as in Triton (its front ends keep a non-decoupled
    request's first response; NVIDIA's response_sender test): the error execute raised
    afterwards does not replace it."""
    (response,) = server.model("raise_after_one").infer({"INPUT0": A, "INPUT1": B}, raise_on_error=False)
    assert response.error is None and response.parameters["index"] == 0
    np.testing.assert_array_equal(response.outputs["OUTPUT0"].to_numpy(), A + B)


@pytest.mark.parametrize("model", ["addsub", "addsub_batched", "decoupled", "sender_one"])
def test_a_finished_request_is_freed_without_the_cyclic_gc(server: tritonpy.Server, model: str) -> None:
    """Requests, senders and batches form no reference cycles: a request's tensors (and the
    shared memory or buffers under them) are released when it ends, not at some later
    garbage collection."""
    handle = server.model(model)
    gc.collect()
    gc.disable()
    try:
        request = handle.create_request({"INPUT0": A.copy(), "INPUT1": B})
        freed = weakref.ref(request.inputs["INPUT0"].data)  # the request's own array
        responses = list(handle.infer(request))
        output = weakref.ref(responses[-1].outputs["OUTPUT0"].data)
        assert freed() is not None and output() is not None
        del request, responses
        deadline = time.monotonic() + 10  # the worker thread lets go of the batch just after
        while (freed() is not None or output() is not None) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert freed() is None and output() is None
    finally:
        gc.enable()
