"""Sequence models on the torch backend: control inputs and implicit state bound to ``forward()``
as Triton's PyTorch backend binds them, the load checks in its words, and sequences served by
the core's sequence batcher to tritonclient over HTTP and gRPC."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonpy_backend_torch as backend
from torch_testmodels import Accumulator, Tagged, accumulator_config, config, io, save_script
from tritonpy_sdk import ErrorCode, RequestedOutput, TritonError
from tritonpy_sdk.testing import BackendHarness
from tritonpy_serverprocess import ServerProcess

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]

F32 = np.float32


def _column(*values: float, dtype: Any = F32) -> np.ndarray:
    return np.array([[v] for v in values], dtype)


def test_controls_and_state_reach_forward_by_their_indices(tmp_path: Path) -> None:
    """Without the core: the request carries what the sequence batcher would add."""
    save_script(Accumulator(), tmp_path / "acc", accumulator_config())
    with BackendHarness(backend, tmp_path / "acc") as h:
        request = h.request(
            {
                "INPUT__0": _column(2, 5),
                "START__1": _column(1, 0, dtype=np.int32),
                "END__2": _column(False, True, dtype=np.bool_),
                "READY__3": _column(1, 1),
                "STATE_IN__4": _column(0, 10),
            }
        )
        # The core asks for the state output beside what the client asked for.
        request.requested_outputs = [RequestedOutput("OUTPUT__0"), RequestedOutput("FLAGS__1")]
        request.requested_outputs.append(RequestedOutput("STATE_OUT__2"))
        (response,) = h.execute([request])
    assert response.error is None
    out = {name: t.data.tolist() for name, t in response.outputs.items()}
    assert out == {"OUTPUT__0": [[2], [15]], "FLAGS__1": [[101], [110]], "STATE_OUT__2": [[2], [15]]}


def _tagged_config(corrid_type: str) -> str:
    """``Tagged``'s config: an input named after its argument, a CORRID control of ``corrid_type``."""
    return config(
        [io("value", "TYPE_INT64", [1])],
        [io("OUT__0", "TYPE_INT64", [1])],
        0,
        'sequence_batching { control_input [ { name: "CORRID__1" control [ '
        f"{{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }} ] }} ] }}",
    )


def test_a_control_binds_by_its_index_beside_inputs_named_after_arguments(tmp_path: Path) -> None:
    save_script(Tagged(), tmp_path / "tagged", _tagged_config("TYPE_INT64"))
    with BackendHarness(backend, tmp_path / "tagged") as h:
        out = h.infer({"value": np.array([7], np.int64), "CORRID__1": np.array([3], np.int64)})
    assert out["OUT__0"].tolist() == [3007]


_ACC_IO = (
    '[ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]',
    '[ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "FLAGS__1" data_type: TYPE_FP32 '
    "dims: [ 1 ] } ]",
)
_START = '{ name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'
_END = '{ name: "END__2" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }'
_READY = '{ name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }'
_STATE = '{ input_name: "STATE_IN__4" output_name: "STATE_OUT__2" data_type: TYPE_FP32 dims: [ 1 ] }'


def _acc_config(controls: list[str], states: list[str], inputs: str = _ACC_IO[0]) -> str:
    return (
        f'platform: "pytorch_libtorch"\nmax_batch_size: 2\ninput {inputs}\noutput {_ACC_IO[1]}\n'
        f"sequence_batching {{ control_input [ {', '.join(controls)} ] state [ {', '.join(states)} ] }}\n"
    )


@pytest.mark.parametrize(
    ("text", "message", "code"),
    [
        (
            _acc_config([_START.replace("START__1", "START"), _END, _READY], [_STATE]),
            "input 'START' does not follow <name>__<index> naming convention.",
            ErrorCode.INTERNAL,
        ),
        (
            _acc_config([_START, _END, _READY], [_STATE.replace("STATE_IN__4", "STATE_IN")]),
            "PyTorch model 'acc' is using sequence batching with state but state 'STATE_IN' does not "
            "follow the <name>__<index> naming convention. ",
            ErrorCode.INVALID_ARG,
        ),
        (
            _acc_config(
                [_START, _END, _READY], [_STATE], '[ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]'
            ),
            "PyTorch model 'acc' is using sequence batching with state but not all inputs and outputs "
            "follow the <name>__<index> naming convention. ",
            ErrorCode.INVALID_ARG,
        ),
        (
            _acc_config([_START, _READY], [_STATE]),
            "unable to load model 'acc', configuration expects 4 inputs, model provides 5",
            ErrorCode.INVALID_ARG,
        ),
        (
            _acc_config([_START, _END, _READY], [_STATE.replace("TYPE_FP32", "TYPE_UINT32")]),
            "unsupported datatype TYPE_UINT32 for input state 'STATE_IN__4' for model 'acc'",
            ErrorCode.INTERNAL,
        ),
        (
            _acc_config([_START, _END.replace("END__2", "END__1"), _READY], [_STATE]),
            "unable to load model 'acc': two inputs of the configuration refer to the same argument of "
            "forward() (INPUT__0 -> 0, START__1 -> 1, END__1 -> 1, READY__3 -> 3, STATE_IN__4 -> 4)",
            ErrorCode.INVALID_ARG,
        ),
    ],
    ids=["control-name", "state-name", "inputs-by-argument", "count", "state-type", "same-argument"],
)
def test_sequence_configs_that_do_not_fit_fail_the_load(
    tmp_path: Path, text: str, message: str, code: ErrorCode
) -> None:
    save_script(Accumulator(), tmp_path / "acc", text)
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "acc").start()
    assert (err.value.message, err.value.code) == (message, code)


def test_a_corrid_of_a_type_torch_lacks_fails_the_load(tmp_path: Path) -> None:
    save_script(Tagged(), tmp_path / "tagged", _tagged_config("TYPE_STRING"))
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "tagged").start()
    assert err.value.message == "input 'CORRID__1' type 'TYPE_STRING' is not supported by PyTorch."


# -- served: the core's sequence batcher feeds the controls and keeps the state ------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("torch_sequence_repo")
    save_script(Accumulator(), root / "acc", accumulator_config())
    proc = ServerProcess([root], log=tmp_path_factory.mktemp("logs") / "server.log")
    yield proc
    proc.stop()


def _output_names(result: Any) -> list[str]:
    response = result.get_response()
    if isinstance(response, dict):  # HTTP
        return sorted(o["name"] for o in response["outputs"])
    return sorted(o.name for o in response.outputs)


def _step(
    client: Any, module: Any, sequence: int, value: float, start: bool, end: bool
) -> tuple[float, float]:
    """One request of a sequence: (OUTPUT__0, FLAGS__1); the state output never reaches the client."""
    tensor = module.InferInput("INPUT__0", [1, 1], "FP32")
    tensor.set_data_from_numpy(_column(value))
    result = client.infer("acc", [tensor], sequence_id=sequence, sequence_start=start, sequence_end=end)
    assert _output_names(result) == ["FLAGS__1", "OUTPUT__0"]
    return float(result.as_numpy("OUTPUT__0")[0, 0]), float(result.as_numpy("FLAGS__1")[0, 0])


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequences_keep_their_own_state_and_see_their_controls(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    base = 100 if protocol == "http" else 200
    try:
        # Two sequences interleaved: each adds up its own values.
        assert _step(client, module, base + 1, 1, True, False) == (1, 101)
        assert _step(client, module, base + 2, 10, True, False) == (10, 101)
        assert _step(client, module, base + 1, 2, False, False) == (3, 100)
        assert _step(client, module, base + 2, 20, False, True) == (30, 110)
        assert _step(client, module, base + 1, 3, False, True) == (6, 110)
        # An id used again after its end starts from the initial state (zeros).
        assert _step(client, module, base + 2, 5, True, True) == (5, 111)
    finally:
        client.close()


@pytest.mark.integration
def test_concurrent_sequences_batched_by_the_core_keep_their_sums(server: ServerProcess) -> None:
    """Four sequences at once on two slots: batches of two, waiting sequences, one state each."""
    totals: dict[int, list[float]] = {}
    errors: list[BaseException] = []

    def run(sequence: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            got = []
            for step in range(5):
                total, _ = _step(client, grpcclient, sequence, sequence * (step + 1), step == 0, step == 4)
                got.append(total)
            totals[sequence] = got
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in (301, 302, 303, 304)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    for sequence in (301, 302, 303, 304):
        assert totals[sequence] == [sequence * n * (n + 1) / 2 for n in range(1, 6)]


def test_a_state_output_listed_under_output_is_bound_there(tmp_path: Path) -> None:
    """A client may ask for the state (Triton: it must then be a config output too)."""
    state = '{ name: "STATE_OUT__2" data_type: TYPE_FP32 dims: [ 1 ] }, '
    save_script(
        Accumulator(), tmp_path / "acc", accumulator_config().replace("output [ ", "output [ " + state, 1)
    )
    with BackendHarness(backend, tmp_path / "acc") as h:
        assert [o["name"] for o in h.model.config["output"]][0] == "STATE_OUT__2"
        out = h.infer(
            {
                "INPUT__0": _column(4),
                "START__1": _column(1, dtype=np.int32),
                "END__2": _column(False, dtype=np.bool_),
                "READY__3": _column(1),
                "STATE_IN__4": _column(3),
            }
        )
    assert {k: v.tolist() for k, v in out.items()} == {
        "STATE_OUT__2": [[7]],
        "OUTPUT__0": [[7]],
        "FLAGS__1": [[101]],
    }
