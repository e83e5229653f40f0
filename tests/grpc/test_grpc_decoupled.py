"""Decoupled models over gRPC with the unmodified tritonclient.grpc streaming API."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy_testbackend import CANCELLED, write_model, write_sender_models
from tritonpy_testservers import GrpcServer

pytestmark = pytest.mark.integration

A = np.array([[1, 2, 3, 4]], np.int32)
B = np.array([[1, 1, 1, 1]], np.int32)
Results = queue.Queue[tuple[Any, Any]]


@pytest.fixture(scope="module")
def test_repos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The models of this module (the shared ``grpc_server`` fixture serves them)."""
    repo = tmp_path_factory.mktemp("decoupled_repo")
    write_sender_models(repo)
    write_model(repo, "addsub")
    return [repo]


@pytest.fixture
def client(grpc_server: GrpcServer) -> Iterator[grpcclient.InferenceServerClient]:
    with grpcclient.InferenceServerClient(grpc_server.url) as client:
        yield client


def _inputs() -> list[grpcclient.InferInput]:
    inputs = []
    for name, arr in (("INPUT0", A), ("INPUT1", B)):
        inp = grpcclient.InferInput(name, list(arr.shape), "INT32")
        inp.set_data_from_numpy(arr)
        inputs.append(inp)
    return inputs


def _start(client: grpcclient.InferenceServerClient) -> Results:
    results: Results = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    return results


def _take(results: Results, n: int) -> list[Any]:
    got = []
    for _ in range(n):
        result, error = results.get(timeout=20)
        assert error is None, error
        got.append(result)
    return got


def test_every_response_arrives(client: grpcclient.InferenceServerClient) -> None:
    results = _start(client)
    try:
        client.async_stream_infer("decoupled", _inputs(), request_id="r1")
        client.async_stream_infer("decoupled", _inputs(), request_id="r2", parameters={"responses": 5})
        got = _take(results, 8)
    finally:
        client.stop_stream()
    assert results.empty()
    by_id: dict[str, list[int]] = {}
    for result in got:
        response = result.get_response(as_json=True)
        by_id.setdefault(response["id"], []).append(int(response["parameters"]["index"]["int64_param"]))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    assert by_id == {"r1": [0, 1, 2], "r2": [0, 1, 2, 3, 4]}


def test_empty_final_response(client: grpcclient.InferenceServerClient) -> None:
    results = _start(client)
    try:
        client.async_stream_infer(
            "decoupled_empty_final", _inputs(), request_id="e", enable_empty_final_response=True
        )
        got = [r.get_response(as_json=True) for r in _take(results, 3)]
    finally:
        client.stop_stream()
    flags = [r["parameters"]["triton_final_response"]["bool_param"] for r in got]
    assert flags == [False, False, True]
    assert not got[-1].get("outputs") and got[-1]["id"] == "e"
    assert all(r["outputs"] for r in got[:2])
    # Triton 2.51: the empty final response carries the request's version string
    # as sent (none here), the others the version that ran
    assert "model_version" not in got[-1] and [r["model_version"] for r in got[:2]] == ["1", "1"]
    assert got[-1]["model_name"] == "decoupled_empty_final"
    results = _start(client)
    try:
        client.async_stream_infer(
            "decoupled_empty_final", _inputs(), model_version="1", enable_empty_final_response=True
        )
        got = [r.get_response(as_json=True) for r in _take(results, 3)]
    finally:
        client.stop_stream()
    assert got[-1]["model_version"] == "1" and not got[-1].get("outputs")


def test_final_flag_rides_on_the_last_response(client: grpcclient.InferenceServerClient) -> None:
    results = _start(client)
    try:
        client.async_stream_infer("decoupled", _inputs(), enable_empty_final_response=True)
        got = [r.get_response(as_json=True) for r in _take(results, 3)]
    finally:
        client.stop_stream()
    assert [r["parameters"]["triton_final_response"]["bool_param"] for r in got] == [False, False, True]
    assert all(r["outputs"] for r in got)


def test_stream_responses_are_flagged_without_the_parameter(client: grpcclient.InferenceServerClient) -> None:
    # Triton 2.51 sets triton_final_response on every stream response, asked or not
    results = _start(client)
    try:
        client.async_stream_infer("decoupled", _inputs())
        got = [r.get_response(as_json=True) for r in _take(results, 3)]
    finally:
        client.stop_stream()
    assert [r["parameters"]["triton_final_response"]["bool_param"] for r in got] == [False, False, True]


def test_unary_infer_on_a_decoupled_model(client: grpcclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer("decoupled", _inputs())
    assert info.value.status() == str(grpc.StatusCode.UNIMPLEMENTED)
    assert "ModelInfer RPC doesn't support models with decoupled transaction policy" in info.value.message()


def test_errors_after_responses_arrive_in_the_stream(client: grpcclient.InferenceServerClient) -> None:
    results = _start(client)
    try:
        client.async_stream_infer("raise_after", _inputs())
        (first,) = _take(results, 1)
        result, error = results.get(timeout=20)
    finally:
        client.stop_stream()
    assert first.as_numpy("OUTPUT1").tolist() == (A - B).tolist()
    assert result is None and "raised after sending" in error.message()


def test_stop_stream_cancels_requests(client: grpcclient.InferenceServerClient) -> None:
    results = _start(client)
    try:
        client.async_stream_infer(
            "decoupled", _inputs(), request_id="cancel_me", parameters={"responses": 1, "wait_cancel": True}
        )
        _take(results, 1)  # the request is running, waiting for its cancellation
    finally:
        client.stop_stream(cancel_requests=True)
    assert CANCELLED.saw("cancel_me")
