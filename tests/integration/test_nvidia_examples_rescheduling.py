"""Request rescheduling (``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``) in the Python backend.

Triton's own QA models (``tests/data/nvidia_examples/server_qa``, unchanged) run on
``tritonpy serve`` in stub processes and in-process: ``iterative_sequence`` (decoupled,
re-executed until its count runs out), ``request_rescheduling_addsub`` (its first request
handed back once) and ``wrong_return_type`` (a response for a rescheduled request).
Rescheduling needs ``sequence_batching { iterative_sequence: true }``: the same models
under other schedulers get Triton's refusal as an error (Triton logs it and leaves the
client waiting). What Triton's ``grpc_endpoint_test.py`` checks is checked here with
free ports instead of its fixed 8001.
"""

from __future__ import annotations

import json
import queue
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.integration

QA = Path(__file__).resolve().parents[1] / "data" / "nvidia_examples" / "server_qa" / "python_models"
IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'

#: Reschedules each request once, then answers what survived: its parameters, id,
#: correlation id and flags as the second execution saw them, and how often it ran.
ECHO = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.runs = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.request_id()
            self.runs[key] = self.runs.get(key, 0) + 1
            if self.runs[key] == 1:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(None)
                continue
            seen = {
                "parameters": json.loads(request.parameters()),
                "id": request.request_id(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "runs": self.runs[key],
                "input": pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().tolist(),
            }
            out = np.array([json.dumps(seen).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
"""

ECHO_CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
sequence_batching { iterative_sequence: true }
"""

#: Triton's bls_request_rescheduling test, without its model reloads (which sleep 10 s).
BLS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = np.arange(16, dtype=np.float32)
            b = np.full(16, 2, dtype=np.float32)
            result = pb_utils.InferenceRequest(
                model_name="request_rescheduling_addsub",
                inputs=[pb_utils.Tensor("INPUT0", a), pb_utils.Tensor("INPUT1", b)],
                requested_output_names=["OUTPUT0", "OUTPUT1"],
            ).exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            sums = pb_utils.get_output_tensor_by_name(result, "OUTPUT0").as_numpy()
            counts = []
            for response in pb_utils.InferenceRequest(
                model_name="iterative_sequence_bls",
                inputs=[pb_utils.Tensor("IN", np.array([3], dtype=np.int32))],
                requested_output_names=["OUT"],
            ).exec(decoupled=True):
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
                out = pb_utils.get_output_tensor_by_name(response, "OUT")
                if out is not None:
                    counts.append(int(out.as_numpy()[0]))
            ok = np.array_equal(sums, a + b) and counts == [2, 1, 0]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OK", np.array([ok]))]))
        return responses
"""

BLS_CONFIG = """
backend: "python"
output [ { name: "OK" data_type: TYPE_BOOL dims: [ 1 ] } ]
"""


def _copy(repo: Path, model: str, name: str, drop_sequence: bool = False, extra: str = "") -> None:
    """Triton's QA ``model`` as ``repo/name`` (its config renamed, sequence batching
    dropped when asked, ``extra`` appended)."""
    (repo / name / "1").mkdir(parents=True)
    shutil.copy(QA / model / "model.py", repo / name / "1" / "model.py")
    config = (QA / model / "config.pbtxt").read_text()
    config = config.replace(f'name: "{model}"', f'name: "{name}"')
    if drop_sequence:
        start = config.index("sequence_batching")
        config = config[:start] + config[config.index("}", start) + 1 :]
    (repo / name / "config.pbtxt").write_text(config + extra)


def _model(repo: Path, name: str, source: str, config: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(source)
    (repo / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, server_factory: Any) -> Any:
    repo = tmp_path_factory.mktemp("rescheduling")
    for model in ("iterative_sequence", "request_rescheduling_addsub", "wrong_return_type"):
        _copy(repo, model, model)
        _copy(repo, model, f"{model}_inproc", extra=IN_PROCESS)
    # Triton's iterative_sequence counts down across requests (its test reloads it before
    # each one): a fresh copy for each test that uses it.
    for name in ("iterative_sequence_id", "iterative_sequence_id_inproc", "iterative_sequence_bls"):
        _copy(repo, "iterative_sequence", name, extra=IN_PROCESS if "inproc" in name else "")
    _copy(repo, "request_rescheduling_addsub", "addsub_no_sequence", drop_sequence=True)
    _copy(repo, "request_rescheduling_addsub", "addsub_dynamic", True, "dynamic_batching {}\n")
    _copy(repo, "iterative_sequence", "iterative_no_sequence", drop_sequence=True)
    _copy(repo, "iterative_sequence", "iterative_no_sequence_inproc", True, IN_PROCESS)
    _model(repo, "echo", ECHO, ECHO_CONFIG)
    _model(repo, "echo_inproc", ECHO, ECHO_CONFIG + IN_PROCESS)
    _model(repo, "bls_rescheduling", BLS, BLS_CONFIG)
    return server_factory([repo])


def _stream(served: Any, model: str, value: int, **kwargs: Any) -> list[Any]:
    """Every answer of one streamed request (a response or an exception), until FINAL."""
    answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        tensor = grpcclient.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([value], dtype=np.int32))
        client.async_stream_infer(model, [tensor], enable_empty_final_response=True, **kwargs)
        got = []
        while True:
            item = answers.get(timeout=30)
            got.append(item)
            if isinstance(item, InferenceServerException):
                break
            final = item.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                break
        client.stop_stream()
    return got


def _outs(answers: list[Any]) -> list[int]:
    return [int(a.as_numpy("OUT")[0]) for a in answers if a.get_output("OUT") is not None]


@pytest.mark.parametrize("model", ["iterative_sequence", "iterative_sequence_inproc"])
def test_decoupled_iterative_sequence_runs_until_done(served: Any, model: str) -> None:
    # Triton's grpc_endpoint_test.test_grpc_decoupled: one request, three executions,
    # one response each (2, 1, 0), the last one FINAL.
    answers = _stream(served, model, 3)
    assert _outs(answers) == [2, 1, 0]
    with httpclient.InferenceServerClient(served.url) as client:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    assert stats["execution_count"] == 3  # every execution counts, as in Triton
    assert stats["inference_stats"]["success"]["count"] == 3


@pytest.mark.parametrize("model", ["iterative_sequence_id", "iterative_sequence_id_inproc"])
def test_iterative_sequence_with_a_client_sequence_id(served: Any, model: str) -> None:
    answers = _stream(served, model, 2, sequence_id=4242, sequence_start=True)
    assert _outs(answers) == [1, 0]


@pytest.mark.parametrize("model", ["request_rescheduling_addsub", "request_rescheduling_addsub_inproc"])
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_non_decoupled_rescheduled_request_keeps_its_inputs(served: Any, model: str, protocol: str) -> None:
    # Triton's grpc_endpoint_test.test_grpc_non_decoupled: the first request is handed back
    # once (None in execute's list) and answered by its second execution.
    module: Any = grpcclient if protocol == "grpc" else httpclient
    url = served.grpc_url if protocol == "grpc" else served.url
    a = np.random.randn(16).astype(np.float32)
    b = np.random.randn(16).astype(np.float32)
    inputs = [module.InferInput("INPUT0", [16], "FP32"), module.InferInput("INPUT1", [16], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    with module.InferenceServerClient(url) as client:
        result = client.infer(model, inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("model", ["echo", "echo_inproc"])
def test_request_id_parameters_and_correlation_id_survive(served: Any, model: str) -> None:
    tensor = grpcclient.InferInput("IN", [2], "INT32")
    tensor.set_data_from_numpy(np.array([7, 8], dtype=np.int32))
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        for request_id, sequence_id, start in (("first", 0, False), ("second", 77, True)):
            result = client.infer(
                model,
                [tensor],
                request_id=request_id,
                sequence_id=sequence_id,
                sequence_start=start,
                parameters={"temperature": 0.5, "tag": "x"},
            )
            seen = json.loads(result.as_numpy("OUT")[0])
            assert seen["runs"] == 2
            assert seen["id"] == request_id
            assert seen["parameters"] == {"temperature": 0.5, "tag": "x"}
            assert seen["input"] == [7, 8]
            assert seen["flags"] == 0  # as Triton: neither START nor END once rescheduled
            if sequence_id:
                assert seen["correlation_id"] == sequence_id
            else:  # an iterative sequence of its own
                assert seen["correlation_id"] > 0


@pytest.mark.parametrize("model", ["wrong_return_type", "wrong_return_type_inproc"])
def test_a_response_for_a_rescheduled_request_fails(served: Any, model: str) -> None:
    tensor = grpcclient.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    with grpcclient.InferenceServerClient(served.grpc_url) as client:
        with pytest.raises(InferenceServerException) as info:
            client.infer(model, [tensor])
    assert "Expected a None object in the execute function return list for reschduled request" in str(
        info.value
    )


REFUSED = (
    "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not "
    "configured to handle such a flag."
)


@pytest.mark.parametrize("model", ["addsub_no_sequence", "addsub_dynamic"])
def test_rescheduling_without_iterative_sequence_is_refused(served: Any, model: str) -> None:
    inputs = [httpclient.InferInput(n, [16], "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(16, dtype=np.float32))
    with httpclient.InferenceServerClient(served.url) as client:
        with pytest.raises(InferenceServerException) as info:
            client.infer(model, inputs)
        assert info.value.status() == "400"
        assert REFUSED in str(info.value)
        client.infer(model, inputs)  # the model rescheduled only its first request


@pytest.mark.parametrize("model", ["iterative_no_sequence", "iterative_no_sequence_inproc"])
def test_decoupled_rescheduling_without_iterative_sequence_ends_with_the_error(
    served: Any, model: str
) -> None:
    answers = _stream(served, model, 3)
    assert _outs(answers[:-1]) == [2]  # what it sent before handing the request back stands
    assert isinstance(answers[-1], InferenceServerException)
    assert REFUSED in str(answers[-1])


def test_bls_requests_are_rescheduled_too(served: Any) -> None:
    with httpclient.InferenceServerClient(served.url) as client:
        result = client.infer("bls_rescheduling", [])
    assert bool(result.as_numpy("OK")[0])
