"""Sequence models served by ``tritonpy serve``, over HTTP and gRPC (unary and streaming).

NVIDIA's sequence example clients run unchanged (``tests/data/nvidia_examples``) on
ONNX builds of Triton's ``simple_sequence`` models; implicit state is checked with an
ONNX model (two instances, ``initial_state`` from a data file) and a Python model;
Triton's refusals arrive as HTTP 400 / gRPC INVALID_ARGUMENT with Triton's words.
"""

from __future__ import annotations

import queue
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy_sequence_models import accumulate_state, sequence_repository

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "nvidia_examples"

PYTHON_STATE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            state = pb_utils.get_input_tensor_by_name(request, "STATE").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            y = (x + state).astype(np.int32)
            cid = np.full(x.shape, request.correlation_id(), np.uint64)
            flags = np.full(x.shape, request.flags(), np.int32)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT", y),
                        pb_utils.Tensor("STATE_OUT", y),
                        pb_utils.Tensor("CID", cid),
                        pb_utils.Tensor("FLAGS", flags + 10 * start.astype(np.int32)),
                    ]
                )
            )
        return responses
"""

PYTHON_STATE_CONFIG = """
backend: "python"
max_batch_size: 2
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [
  { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "CID" data_type: TYPE_UINT64 dims: [ 1 ] },
  { name: "FLAGS" data_type: TYPE_INT32 dims: [ 1 ] }
]
instance_group [ { count: 2 kind: KIND_CPU } ]
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START bool_false_true: [ false, true ] } ] }
  ]
  state [ { input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
"""


BLS = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            step = pb_utils.InferenceRequest(
                model_name="py_state",
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT")],
                requested_output_names=["OUTPUT"],
                correlation_id=request.correlation_id(),
                flags=request.flags(),
            )
            result = step.exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            output = pb_utils.get_output_tensor_by_name(result, "OUTPUT")
            responses.append(pb_utils.InferenceResponse([output]))
        return responses
"""

BLS_CONFIG = """
backend: "python"
max_batch_size: 2
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = sequence_repository(tmp_path_factory.mktemp("sequences"))
    accumulate_state(root)
    # initial state 100 from a data file (Triton's initial_state folder beside the versions)
    model = accumulate_state(
        root,
        "accumulate_from_100",
        "oldest { max_candidate_sequences: 2 }",
        initial=' initial_state { data_type: TYPE_INT32 dims: [ 1 ] data_file: "hundred" name: "h" }',
    )
    (model / "initial_state").mkdir()
    (model / "initial_state" / "hundred").write_bytes(np.array([100], np.int32).tobytes())
    (root / "py_state" / "1").mkdir(parents=True)
    (root / "py_state" / "1" / "model.py").write_text(PYTHON_STATE)
    (root / "py_state" / "config.pbtxt").write_text(PYTHON_STATE_CONFIG)
    (root / "bls_seq" / "1").mkdir(parents=True)
    (root / "bls_seq" / "1" / "model.py").write_text(BLS)
    (root / "bls_seq" / "config.pbtxt").write_text(BLS_CONFIG)
    return root


@pytest.fixture(scope="module")
def server(server_factory, repo: Path):  # type: ignore[no-untyped-def]
    return server_factory([repo])


@pytest.mark.parametrize("dyna", [False, True], ids=["simple", "dyna"])
@pytest.mark.parametrize(
    "client",
    [
        "simple_http_sequence_sync_infer_client.py",
        "simple_grpc_sequence_sync_infer_client.py",
        "simple_grpc_sequence_stream_infer_client.py",
        "simple_grpc_aio_sequence_stream_infer_client.py",
    ],
)
def test_nvidia_sequence_clients(server, client: str, dyna: bool) -> None:  # type: ignore[no-untyped-def]
    url = server.url if "_http_" in client else server.grpc_url
    args = [sys.executable, str(EXAMPLES / client), "-u", url] + (["-d"] if dyna else [])
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout, run.stdout


def _input(module: Any, x: int) -> list[Any]:
    inp = module.InferInput("INPUT", [1, 1], "INT32")
    inp.set_data_from_numpy(np.array([[x]], np.int32))
    return [inp]


def _outputs(module: Any, *names: str) -> list[Any]:
    return [module.InferRequestedOutput(n) for n in names]


def _sum_sequences(module: Any, url: str, model: str, ids: list[Any], steps: int, base: int = 0) -> None:
    """Interleave sequences from threads (one client per thread); each answer must
    be ``base`` plus the running sum of that sequence's inputs."""

    def run(sid: Any) -> list[int]:
        client = module.InferenceServerClient(url)
        try:
            return [
                int(
                    client.infer(
                        model,
                        _input(module, i + 1),
                        sequence_id=sid,
                        sequence_start=i == 0,
                        sequence_end=i == steps - 1,
                    ).as_numpy("OUTPUT")[0][0]
                )
                for i in range(steps)
            ]
        finally:
            client.close()

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(run, ids))
    expected = [base + sum(range(1, i + 2)) for i in range(steps)]
    assert results == [expected] * len(ids)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_implicit_state_onnx_many_sequences(server, module: Any) -> None:  # type: ignore[no-untyped-def]
    url = server.url if module is httpclient else server.grpc_url
    _sum_sequences(module, url, "accumulate_state", list(range(1, 13)), steps=5)
    _sum_sequences(module, url, "accumulate_from_100", [f"s{i}" for i in range(5)], steps=4, base=100)


def test_state_output_is_internal(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    try:
        result = client.infer("accumulate_state", _input(httpclient, 4), sequence_id=77, sequence_start=True)
        assert result.get_output("STATE_OUT") is None and result.as_numpy("OUTPUT").tolist() == [[4]]
        with pytest.raises(InferenceServerException, match="unexpected inference output 'STATE_OUT'"):
            client.infer(
                "accumulate_state",
                _input(httpclient, 1),
                outputs=_outputs(httpclient, "STATE_OUT"),
                sequence_id=77,
            )
        config = client.get_model_config("accumulate_state")
        assert [i["name"] for i in config["input"]] == ["INPUT"]
        assert [o["name"] for o in config["output"]] == ["OUTPUT"]
        result = client.infer("accumulate_state", _input(httpclient, 1), sequence_id=77, sequence_end=True)
        assert result.as_numpy("OUTPUT").tolist() == [[5]]
    finally:
        client.close()


def test_implicit_state_python_model(server) -> None:  # type: ignore[no-untyped-def]
    client = grpcclient.InferenceServerClient(server.grpc_url)
    wanted = _outputs(grpcclient, "OUTPUT", "CID", "FLAGS")
    got = []
    for sid in (5, 6):
        for step, x in enumerate((3, 4, 5)):
            r = client.infer(
                "py_state",
                _input(grpcclient, x),
                outputs=wanted,
                sequence_id=sid,
                sequence_start=step == 0,
                sequence_end=step == 2,
            )
            got.append(tuple(int(r.as_numpy(n)[0][0]) for n in ("OUTPUT", "CID", "FLAGS")))
    # running sums; the model sees the correlation id, the flags and START as Triton's would be
    assert got == [(3, 5, 11), (7, 5, 0), (12, 5, 2), (3, 6, 11), (7, 6, 0), (12, 6, 2)]
    client.close()


def test_bls_requests_carry_the_sequence(server) -> None:  # type: ignore[no-untyped-def]
    # bls_seq is no sequence model: its request's correlation id and flags come from the
    # client's parameters all the same, and its BLS requests pass them on to py_state.
    client = httpclient.InferenceServerClient(server.url)
    try:
        got = [
            int(
                client.infer(
                    "bls_seq",
                    _input(httpclient, x),
                    sequence_id=4711,
                    sequence_start=i == 0,
                    sequence_end=i == 2,
                ).as_numpy("OUTPUT")[0][0]
            )
            for i, x in enumerate((2, 3, 4))
        ]
        assert got == [2, 5, 9]
        with pytest.raises(InferenceServerException, match="must specify the START flag"):
            client.infer("bls_seq", _input(httpclient, 1), sequence_id=4711)
    finally:
        client.close()


TRITON_NO_START = (
    "inference request for sequence {} to model '{}' must specify the START flag on the first request "
    "of the sequence"
)
TRITON_NO_ID = "inference request to model '{}' must specify a non-zero or non-empty correlation ID"


def test_refusals_over_http(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.infer("simple_sequence", _input(httpclient, 1))
        assert info.value.status() == "400"
        assert info.value.message() == TRITON_NO_ID.format("simple_sequence")
        with pytest.raises(InferenceServerException) as info:
            client.infer("simple_sequence", _input(httpclient, 1), sequence_id=123)
        assert info.value.status() == "400"
        assert info.value.message() == TRITON_NO_START.format(123, "simple_sequence")
        with pytest.raises(InferenceServerException) as info:
            client.infer("simple_sequence", _input(httpclient, 1), sequence_id="no-such")
        assert info.value.message() == TRITON_NO_START.format("no-such", "simple_sequence")
    finally:
        client.close()


def test_refusals_over_grpc(server) -> None:  # type: ignore[no-untyped-def]
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException) as info:
        client.infer("simple_dyna_sequence", _input(grpcclient, 1), sequence_id=0)
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert info.value.message() == TRITON_NO_ID.format("simple_dyna_sequence")
    with pytest.raises(InferenceServerException) as info:
        client.infer("simple_dyna_sequence", _input(grpcclient, 1), sequence_id=99, sequence_end=True)
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert info.value.message() == TRITON_NO_START.format(99, "simple_dyna_sequence")
    client.close()


def test_grpc_stream_of_interleaved_sequences_and_an_error(server) -> None:  # type: ignore[no-untyped-def]
    results: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for step in range(4):
            for sid in (301, 302, 303):
                client.async_stream_infer(
                    "accumulate_state",
                    _input(grpcclient, sid - 300),
                    request_id=f"{sid}-{step}",
                    sequence_id=sid,
                    sequence_start=step == 0,
                    sequence_end=step == 3,
                )
        client.async_stream_infer(
            "accumulate_state", _input(grpcclient, 1), request_id="bad", sequence_id=999
        )
        got: dict[str, int] = {}
        errors = []
        for _ in range(13):
            result, error = results.get(timeout=30)
            if error is not None:
                errors.append(error.message())
            else:
                got[result.get_response().id] = int(result.as_numpy("OUTPUT")[0][0])
    finally:
        client.stop_stream()
        client.close()
    assert errors == [TRITON_NO_START.format(999, "accumulate_state")]
    for sid in (301, 302, 303):
        assert [got[f"{sid}-{step}"] for step in range(4)] == [(sid - 300) * (step + 1) for step in range(4)]


def test_sequence_statistics(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    try:
        before = client.get_inference_statistics("py_state")["model_stats"][0]["inference_count"]
        for step in range(3):
            client.infer(
                "py_state",
                _input(httpclient, 1),
                sequence_id=4242,
                sequence_start=step == 0,
                sequence_end=step == 2,
            )
        (stats,) = client.get_inference_statistics("py_state")["model_stats"]
        assert stats["inference_count"] == before + 3
    finally:
        client.close()
