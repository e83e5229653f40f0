"""The repeat backend served by ``tritonpy serve``, reached with tritonclient: NVIDIA's
``repeat_int32`` (decoupled) over gRPC streaming, its non-decoupled copy over HTTP and gRPC, an
ensemble over it (NVIDIA's ``simple_repeat``), and requests it refuses in repeat.cc's words.

Delays are a few hundred milliseconds at most, and only where the order of responses is what a
test checks: that ``WAIT`` releases a request while its responses still come, and that it holds
the instance until then."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy_grpc_stream import Stream, is_final
from tritonpy_serverprocess import ServerProcess

pytestmark = [pytest.mark.integration]


def _repeat(decoupled: bool, optional: str = "") -> str:
    """Triton's ``repeat_int32`` (server repository, ``src/test/models``)."""
    policy = "model_transaction_policy { decoupled: True }\n" if decoupled else ""
    opt = {name: " optional: true" if name in optional.split() else "" for name in ("IN", "DELAY", "WAIT")}
    return (
        'backend: "repeat"\nmax_batch_size: 0\n' + policy + "input [\n"
        f'  {{ name: "IN" data_type: TYPE_INT32 dims: [ -1 ]{opt["IN"]} }},\n'
        f'  {{ name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ]{opt["DELAY"]} }},\n'
        f'  {{ name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ]{opt["WAIT"]} }}\n'
        "]\noutput [\n"
        '  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },\n'
        '  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }\n'
        "]\n"
    )


#: NVIDIA's L0_decoupled ``simple_repeat``: an ensemble of one decoupled repeat step.
SIMPLE_REPEAT = """
platform: "ensemble"
max_batch_size: 0
ensemble_scheduling {
  step [
    {
      model_name: "repeat_int32"
      model_version: -1
      input_map { key: "IN" value: "IN" }
      input_map { key: "DELAY" value: "DELAY" }
      input_map { key: "WAIT" value: "WAIT" }
      output_map { key: "OUT" value: "OUT" }
      output_map { key: "IDX" value: "IDX" }
    }
  ]
}
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
"""

REPOSITORY = {
    "repeat_int32": _repeat(decoupled=True),
    "repeat_int32_non_decoupled": _repeat(decoupled=False),
    "repeat_optional": _repeat(decoupled=True, optional="IN DELAY WAIT"),
    "simple_repeat": SIMPLE_REPEAT,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("repeat_repo")
    for name, config in REPOSITORY.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    proc = ServerProcess([repo], log=tmp_path_factory.mktemp("logs") / "server.log")
    yield proc
    proc.stop()


@pytest.fixture
def stream(server: ServerProcess) -> Iterator[Stream]:
    s = Stream(server.grpc_url)
    yield s
    s.close()


def _inputs(
    module: Any, values: list[int], delays: list[int] | None = None, wait: int = 0, leave_out: str = ""
) -> list[Any]:
    arrays = {
        "IN": (np.array(values, np.int32), "INT32"),
        "DELAY": (np.array(delays if delays is not None else [0] * len(values), np.uint32), "UINT32"),
        "WAIT": (np.array([wait], np.uint32), "UINT32"),
    }
    tensors = []
    for name, (array, datatype) in arrays.items():
        if name in leave_out.split():
            continue
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def _answers(results: list[Any]) -> list[tuple[str, int, int]]:
    """(request id, OUT, IDX) of each response that carries outputs."""
    return [
        (r.get_response().id, int(r.as_numpy("OUT")[0]), int(r.as_numpy("IDX")[0]))
        for r in results
        if r.as_numpy("OUT") is not None
    ]


def test_one_response_per_element_then_the_final_flag(stream: Stream) -> None:
    stream.send("repeat_int32", _inputs(grpcclient, [100, 101, -7, 2**31 - 1], delays=[1, 0, 2, 1], wait=1))
    results = stream.results_until_final()
    assert _answers(results) == [("", 100, 0), ("", 101, 1), ("", -7, 2), ("", 2**31 - 1, 3)]
    assert [is_final(r) for r in results] == [False] * 4 + [True]
    final = results[-1]
    assert final.as_numpy("OUT") is None and final.as_numpy("IDX") is None  # the flag alone
    for r in results[:-1]:
        assert r.as_numpy("OUT").dtype == np.int32 and r.as_numpy("OUT").shape == (1,)
        assert r.as_numpy("IDX").dtype == np.uint32 and r.as_numpy("IDX").shape == (1,)


def test_an_empty_in_gets_the_final_flag_only(stream: Stream) -> None:
    stream.send("repeat_int32", _inputs(grpcclient, []), request_id="none")
    (final,) = stream.results_until_final()
    assert is_final(final) and final.get_response().id == "none"
    assert final.as_numpy("OUT") is None


def test_only_the_requested_outputs_come_back(stream: Stream) -> None:
    stream.send("repeat_int32", _inputs(grpcclient, [5, 6]), outputs=[grpcclient.InferRequestedOutput("OUT")])
    results = stream.results_until_final()
    assert [int(r.as_numpy("OUT")[0]) for r in results[:-1]] == [5, 6]
    assert all(r.as_numpy("IDX") is None for r in results)


def test_a_request_released_by_wait_streams_beside_the_next(stream: Stream) -> None:
    """WAIT 0 releases the first request at once: the second runs on the same instance while
    the first still sleeps before its second response (repeat.cc's interleaving)."""
    stream.send("repeat_int32", _inputs(grpcclient, [1, 2], delays=[0, 300], wait=0), request_id="a")
    stream.send("repeat_int32", _inputs(grpcclient, [9], delays=[0], wait=0), request_id="b")
    answers = _answers(stream.results_until_final(2))
    assert answers == [("a", 1, 0), ("b", 9, 0), ("a", 2, 1)]


def test_wait_holds_the_instance_until_it_has_passed(stream: Stream) -> None:
    """WAIT longer than the delays: the only instance takes the next request once the first
    request's responses are all sent."""
    stream.send("repeat_int32", _inputs(grpcclient, [1, 2], delays=[0, 200], wait=500), request_id="a")
    stream.send("repeat_int32", _inputs(grpcclient, [9], delays=[0], wait=0), request_id="b")
    answers = _answers(stream.results_until_final(2))
    assert answers == [("a", 1, 0), ("a", 2, 1), ("b", 9, 0)]


def test_in_and_delay_of_other_shapes_are_refused(stream: Stream) -> None:
    """NVIDIA's L0_decoupled test_wrong_shape: one error, in repeat.cc's words."""
    inputs = _inputs(grpcclient, [100], delays=[1000, 1000], wait=2000)
    stream.send("repeat_int32", inputs)
    result, error = stream.next()
    assert result is None
    assert "expected IN and DELAY shape to match, got [1] and [2]" in str(error)


@pytest.mark.parametrize(
    ("leave_out", "request_id", "message"),
    [
        ("WAIT", "w", "[request id: w] unknown request input name WAIT"),
        ("WAIT", "", "[request id: <id_unknown>] unknown request input name WAIT"),
        ("DELAY", "d", "[request id: d] unknown request input name DELAY"),
        ("IN", "i", "[request id: i] unknown request input name IN"),
    ],
)
def test_a_left_out_optional_input_is_refused_in_tritons_words(
    stream: Stream, leave_out: str, request_id: str, message: str
) -> None:
    stream.send("repeat_optional", _inputs(grpcclient, [3], leave_out=leave_out), request_id=request_id)
    result, error = stream.next()
    assert result is None
    assert message in str(error)
    # The stream goes on: the next request is answered.
    stream.send("repeat_optional", _inputs(grpcclient, [4]), request_id="next")
    assert _answers(stream.results_until_final()) == [("next", 4, 0)]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_that_is_not_decoupled_answers_one_element(server: ServerProcess, protocol: str) -> None:
    """NVIDIA's L0_decoupled NonDecoupledTest: the response and the FINAL flag, sent apart, reach
    the client as one response."""
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    try:
        for delay, wait in ((0, 0), (40, 20), (20, 40)):
            result = client.infer("repeat_int32_non_decoupled", _inputs(module, [1], [delay], wait))
            assert int(result.as_numpy("OUT")[0]) == 1
            assert int(result.as_numpy("IDX")[0]) == 0
    finally:
        client.close()


def test_a_model_that_is_not_decoupled_refuses_a_shape_mismatch(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url)
    try:
        with pytest.raises(InferenceServerException, match=r"got \[2\] and \[3\]"):
            client.infer("repeat_int32_non_decoupled", _inputs(httpclient, [1, 2], [0, 0, 0]))
    finally:
        client.close()


def test_an_ensemble_streams_the_repeat_steps_responses(stream: Stream) -> None:
    """NVIDIA's L0_decoupled ``simple_repeat``."""
    stream.send("simple_repeat", _inputs(grpcclient, [7, 8, 9]), request_id="e")
    results = stream.results_until_final()
    assert sorted(_answers(results)) == [("e", 7, 0), ("e", 8, 1), ("e", 9, 2)]


def test_the_server_log_tells_each_response(server: ServerProcess, stream: Stream) -> None:
    """repeat.cc's log lines, at INFO."""
    stream.send("repeat_int32", _inputs(grpcclient, [1, 2], delays=[0, 2**32 - 1]))
    stream.results_until_final()
    out = server.wait_for_output("sent response 2 of 2")
    # A DELAY above 2^31 - 1 is read as repeat.cc reads it: a negative int32, no sleep.
    assert "waiting -1 ms, then sending response 2 of 2" in out
    assert "waiting 0 ms before releasing requests" in out
    assert "model instance repeat_int32_0, executing 1 requests" in out
