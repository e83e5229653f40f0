"""The square backend served by ``tritonpy serve``, reached with tritonclient: NVIDIA's
``square_int32`` (decoupled) over gRPC streaming, its non-decoupled copy over HTTP and gRPC, a
batching copy, the parameters of NVIDIA's L0_response_statistics (failed and empty responses),
cancellation (square.cc stops at the next response), and NVIDIA's ``repeat_square`` ensemble
(repeat then square) when the repeat backend is installed.

No test depends on how long anything takes: the slow model sleeps 20 ms per response only so
that a stream of a thousand responses is still running when it is cancelled."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonpy_grpc_stream import Stream, is_final
from tritonpy_serverprocess import ServerProcess
from tritonpy_wait import wait_until

pytestmark = [pytest.mark.integration]

HAS_REPEAT = importlib.util.find_spec("tritonpy_backend_repeat") is not None


def _square(extra: str = "", decoupled: bool = True, batch: int = 0, optional: bool = False) -> str:
    """Triton's ``square_int32`` (server repository, ``src/test/models``)."""
    policy = "model_transaction_policy { decoupled: True }\n" if decoupled else ""
    opt = " optional: true" if optional else ""
    return (
        f'backend: "square"\nmax_batch_size: {batch}\n{policy}'
        f'input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ]{opt} }} ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n' + extra
    )


def _parameters(**values: int) -> str:
    return "".join(
        f'parameters [{{ key: "{key}" value: {{ string_value: "{value}" }} }}]\n'
        for key, value in values.items()
    )


#: NVIDIA's L0_decoupled ``repeat_square``: each response of repeat_int32 feeds square_int32.
REPEAT_SQUARE = """
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
      output_map { key: "OUT" value: "repeat_out" }
    },
    {
      model_name: "square_int32"
      model_version: -1
      input_map { key: "IN" value: "repeat_out" }
      output_map { key: "OUT" value: "OUT" }
    }
  ]
}
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

REPEAT_INT32 = """
backend: "repeat"
max_batch_size: 0
model_transaction_policy { decoupled: True }
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
    "square_int32": _square(),
    "square_int32_non_decoupled": _square(decoupled=False),
    "square_batching": _square(batch=4, extra="dynamic_batching {}\n"),
    # NVIDIA's L0_response_statistics square_int32, without its delays.
    "square_flaky": _square(_parameters(CUSTOM_FAIL_COUNT=2, CUSTOM_EMPTY_COUNT=1)),
    "square_slow": _square(_parameters(CUSTOM_INFER_DELAY_NS=20_000_000, CUSTOM_CANCEL_DELAY_NS=1_000_000)),
    "square_optional": _square(optional=True),
    **({"repeat_int32": REPEAT_INT32, "repeat_square": REPEAT_SQUARE} if HAS_REPEAT else {}),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("square_repo")
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


def _log_match(server: ServerProcess, pattern: str) -> re.Match[str]:
    """The first match of ``pattern`` in the server's log, once it is there."""
    wait_until(lambda: re.search(pattern, server.output()), f"{pattern!r} logged:\n{server.output()}")
    found = re.search(pattern, server.output())
    assert found is not None
    return found


def _in(module: Any, value: int | list[list[int]]) -> list[Any]:
    array = np.array(value if isinstance(value, list) else [value], np.int32)
    tensor = module.InferInput("IN", list(array.shape), "INT32")
    tensor.set_data_from_numpy(array)
    return [tensor]


def _outs(got: list[tuple[Any, Any]]) -> list[Any]:
    """What each message holds: OUT as a list, an error's message, or "FINAL" for the flag alone."""
    out: list[Any] = []
    for result, error in got:
        if error is not None:
            out.append(error.message())
        elif result.as_numpy("OUT") is not None:
            out.append(result.as_numpy("OUT").tolist())
        else:
            out.append("FINAL")
    return out


def test_in_responses_of_in_then_the_final_flag(stream: Stream) -> None:
    stream.send("square_int32", _in(grpcclient, 3))
    got = stream.until_final()
    assert _outs(got) == [[3], [3], [3], "FINAL"]
    assert [is_final(result) for result, _ in got] == [False, False, False, True]
    assert got[0][0].as_numpy("OUT").dtype == np.int32


def test_zero_gets_the_final_flag_only(stream: Stream) -> None:
    stream.send("square_int32", _in(grpcclient, 0), request_id="zero")
    ((final, error),) = stream.until_final()
    assert error is None and is_final(final) and final.get_response().id == "zero"
    assert final.as_numpy("OUT") is None


def test_the_last_responses_fail_or_are_left_out_as_the_parameters_say(stream: Stream) -> None:
    """CUSTOM_FAIL_COUNT 2, CUSTOM_EMPTY_COUNT 1: of 5 responses, 2 succeed, 2 are the UNKNOWN
    error 'simulated failure' (the stream goes on after each), the last is not sent."""
    stream.send("square_flaky", _in(grpcclient, 5))
    assert _outs(stream.until_final()) == [[5], [5], "simulated failure", "simulated failure", "FINAL"]
    stream.send("square_flaky", _in(grpcclient, 2))
    assert _outs(stream.until_final()) == ["simulated failure", "FINAL"]


def test_a_batch_of_one_is_answered_in_its_shape_and_a_larger_one_refused(stream: Stream) -> None:
    stream.send("square_batching", _in(grpcclient, [[2]]))
    got = stream.until_final()
    assert _outs(got) == [[[2]], [[2]], "FINAL"]
    stream.send("square_batching", _in(grpcclient, [[2], [3]]))
    result, error = stream.next()
    assert result is None and error.message() == "unexpected shape for IN input"


def test_a_left_out_optional_in_is_refused_in_tritons_words(stream: Stream) -> None:
    stream.send("square_optional", [], request_id="q")
    result, error = stream.next()
    assert result is None
    assert error.message() == "[request id: q] unknown request input name IN"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_that_is_not_decoupled_answers_one(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    try:
        result = client.infer("square_int32_non_decoupled", _in(module, 1))
        assert result.as_numpy("OUT").tolist() == [1]
    finally:
        client.close()


def test_requests_stream_at_once_and_a_cancelled_one_stops(server: ServerProcess, stream: Stream) -> None:
    """execute returns at once: a second request is answered while the first (1000 responses,
    20 ms each) still streams; cancelling the stream stops the first at its next response."""
    stream.send("square_slow", _in(grpcclient, 1000), request_id="long")
    first, error = stream.next()
    assert error is None and first.get_response().id == "long"
    stream.send("square_slow", _in(grpcclient, 2), request_id="short")
    seen: list[str] = []
    while "short-final" not in seen:
        result, error = stream.next()
        assert error is None
        seen.append(result.get_response().id + ("-final" if is_final(result) else ""))
    assert "long-final" not in seen
    stream.cancel()
    at = _log_match(server, r"cancelled at response (\d+) of 1000\b")
    assert 1 <= int(at.group(1)) < 1000


def test_a_negative_in_is_a_stream_until_cancelled(server: ServerProcess, stream: Stream) -> None:
    """square.cc reads IN as a size_t: -2 is 2^64 - 2 responses, each OUT = -2 (the count
    written back into an int32), until the client cancels."""
    stream.send("square_slow", _in(grpcclient, -2))
    for _ in range(3):
        result, error = stream.next()
        assert error is None and result.as_numpy("OUT").tolist() == [-2] and not is_final(result)
    stream.cancel()
    at = _log_match(server, rf"cancelled at response (\d+) of {2**64 - 2}\b")
    assert int(at.group(1)) >= 4  # after the three seen


@pytest.mark.skipif(not HAS_REPEAT, reason="the ensemble's first step needs tritonpy-backend-repeat")
def test_repeat_then_square_streams_every_squares_responses(stream: Stream) -> None:
    """NVIDIA's L0_decoupled ``repeat_square``: IN [2, 3] is repeated as 2 and 3, and each
    squared: 2 + 3 responses."""
    inputs = []
    for name, array, datatype in (
        ("IN", np.array([2, 3], np.int32), "INT32"),
        ("DELAY", np.array([0, 0], np.uint32), "UINT32"),
        ("WAIT", np.array([0], np.uint32), "UINT32"),
    ):
        tensor = grpcclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    stream.send("repeat_square", inputs)
    outs = _outs(stream.until_final())
    assert outs[-1] == "FINAL"
    assert sorted(outs[:-1]) == [[2], [2], [3], [3], [3]]
