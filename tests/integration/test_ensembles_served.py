"""Ensembles served by ``tritonpy serve`` to the unmodified tritonclient (HTTP and
gRPC): Python preprocessing feeding an ONNX model, a decoupled Python member
streaming over ModelStreamInfer and generate_stream, step errors with their
status codes, statistics, and BLS calling an ensemble / an ensemble of a BLS model.
Expected answers were recorded from Triton 2.51 on the same Python models."""

from __future__ import annotations

import json
import queue
import shutil
import textwrap
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper

pytestmark = pytest.mark.integration

PYTHON_MODELS = Path(__file__).resolve().parents[2] / "plugins" / "python" / "tests" / "models"

PREPROCESS = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("NORMALIZED", raw / 255.0)]))
        return out
"""


def _ensemble(repo: Path, name: str, body: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "ensemble"\n' + textwrap.dedent(body)
    )


def _write_repo(repo: Path) -> None:
    for model in ("add_sub", "repeat", "raiser", "bls"):
        shutil.copytree(PYTHON_MODELS / model, repo / model)
    (repo / "preprocess" / "1").mkdir(parents=True)
    (repo / "preprocess" / "1" / "model.py").write_text(PREPROCESS)
    (repo / "preprocess" / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "NORMALIZED" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        "dynamic_batching { }\n"
    )
    # ONNX: SCORES = X * W + 1, with W = [1, 2, 3].
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("SCORES", TensorProto.FLOAT, ["batch", 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Mul", ["X", "w"], ["t"]), helper.make_node("Add", ["t", "one"], ["SCORES"])]
    graph = helper.make_graph(nodes, "linear", [x], [y], [w, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / "linear" / "1").mkdir(parents=True)
    onnx.save(model, repo / "linear" / "1" / "model.onnx")
    (repo / "linear" / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 8\n')
    _ensemble(
        repo,
        "classify",
        """
        max_batch_size: 8
        input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 3 ] } ]
        ensemble_scheduling { step [
          { model_name: "preprocess" model_version: -1
            input_map { key: "RAW" value: "IMAGE" } output_map { key: "NORMALIZED" value: "normalized" } },
          { model_name: "linear" model_version: -1
            input_map { key: "X" value: "normalized" } output_map { key: "SCORES" value: "SCORES" } } ] }
        """,
    )
    io4 = """
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
    """
    add_sub_step = """{ model_name: "add_sub" model_version: -1
            input_map { key: "INPUT0" value: "INPUT0" } input_map { key: "INPUT1" value: "INPUT1" }
            output_map { key: "OUTPUT0" value: "OUTPUT0" } output_map { key: "OUTPUT1" value: "OUTPUT1" } }"""
    _ensemble(repo, "ens_add_sub", io4 + f"ensemble_scheduling {{ step [ {add_sub_step} ] }}")
    _ensemble(
        repo,
        "ens_of_bls",
        """
        input [ { name: "MODEL_NAME" data_type: TYPE_STRING dims: [ 1 ] },
                { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        ensemble_scheduling { step [ { model_name: "bls" model_version: -1
          input_map { key: "MODEL_NAME" value: "MODEL_NAME" }
          input_map { key: "INPUT0" value: "INPUT0" } input_map { key: "INPUT1" value: "INPUT1" }
          output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }
        """,
    )
    _ensemble(
        repo,
        "ens_repeat",
        """
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
                 { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
        ensemble_scheduling { step [ { model_name: "repeat" model_version: -1
          input_map { key: "IN" value: "IN" }
          output_map { key: "OUT" value: "OUT" } output_map { key: "IDX" value: "IDX" } } ] }
        """,
    )
    _ensemble(
        repo,
        "ens_raiser",
        """
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        ensemble_scheduling { step [ { model_name: "raiser" model_version: -1
          input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
    )


@pytest.fixture(scope="module")
def server(server_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    repo = tmp_path_factory.mktemp("ensembles")
    _write_repo(repo)
    return server_factory([repo])


@pytest.fixture(scope="module")
def http(server) -> httpclient.InferenceServerClient:  # type: ignore[no-untyped-def]
    return httpclient.InferenceServerClient(server.url)


def _wait_ready(http: httpclient.InferenceServerClient) -> None:
    assert http.is_server_ready()


def _fp32(name: str, data: np.ndarray[Any, Any], module: Any = httpclient) -> Any:
    inp = module.InferInput(name, list(data.shape), "FP32")
    inp.set_data_from_numpy(data.astype(np.float32))
    return inp


def test_server_is_ready_with_ensembles(http: httpclient.InferenceServerClient) -> None:
    assert http.is_server_ready()
    states = {m["name"]: m.get("state") for m in http.get_model_repository_index()}
    assert all(states[n] == "READY" for n in ("classify", "ens_add_sub", "ens_of_bls", "ens_repeat"))


def test_python_preprocessing_feeds_an_onnx_model_over_http(http: httpclient.InferenceServerClient) -> None:
    image = np.array([[255.0, 510.0, 0.0], [0.0, 255.0, 255.0]], np.float32)
    result = http.infer("classify", [_fp32("IMAGE", image)], request_id="img-1")
    expected = image / 255.0 * np.array([1.0, 2.0, 3.0], np.float32) + 1.0
    np.testing.assert_allclose(result.as_numpy("SCORES"), expected, rtol=1e-6)
    assert result.get_response()["id"] == "img-1"
    assert http.get_model_metadata("classify") == {
        "name": "classify",
        "versions": ["1"],
        "platform": "ensemble",
        "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [-1, 3]}],
        "outputs": [{"name": "SCORES", "datatype": "FP32", "shape": [-1, 3]}],
    }


def test_the_same_ensemble_over_grpc(server) -> None:  # type: ignore[no-untyped-def]
    image = np.full((1, 3), 255.0, np.float32)
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        result = client.infer("classify", [_fp32("IMAGE", image, grpcclient)])
        np.testing.assert_allclose(result.as_numpy("SCORES"), [[2.0, 3.0, 4.0]])
        config = client.get_model_config("classify", as_json=True)["config"]
        assert config["platform"] == "ensemble"
        assert [s["model_name"] for s in config["ensemble_scheduling"]["step"]] == ["preprocess", "linear"]


#: What Triton 2.51 puts in an ensemble's response parameters (observed): the
#: request's sequence settings, 0 / false / false outside a sequence.
NO_SEQUENCE = {"sequence_id": 0, "sequence_start": False, "sequence_end": False}


def test_an_ensemble_response_carries_the_sequence_parameters(server) -> None:  # type: ignore[no-untyped-def]
    image = np.full((1, 3), 255.0, np.float32)
    http = httpclient.InferenceServerClient(server.url)
    assert http.infer("classify", [_fp32("IMAGE", image)]).get_response()["parameters"] == NO_SEQUENCE
    binary = http.infer(
        "classify",
        [_fp32("IMAGE", image)],
        outputs=[httpclient.InferRequestedOutput("SCORES", binary_data=True)],
        sequence_id="s-1",
        sequence_start=True,
    )
    assert binary.get_response()["parameters"] == {
        "sequence_id": "s-1",
        "sequence_start": True,
        "sequence_end": False,
    }
    raw = httpx.post(
        f"http://{server.url}/v2/models/classify/infer",
        content=b'{"id":"r","inputs":[{"name":"IMAGE","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}',
    )
    assert raw.content.startswith(
        b'{"id":"r","model_name":"classify","model_version":"1","parameters":'
        b'{"sequence_id":0,"sequence_start":false,"sequence_end":false},"outputs":['
    )
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        answer = client.infer(
            "classify", [_fp32("IMAGE", image, grpcclient)], sequence_id=7, sequence_end=True
        )
        parameters = answer.get_response().parameters
        assert (parameters["sequence_id"].int64_param, parameters["sequence_end"].bool_param) == (7, True)
        assert parameters["sequence_start"].bool_param is False
        assert set(parameters) == set(NO_SEQUENCE)
    # a model that is not an ensemble has none, as in Triton
    assert "parameters" not in http.infer("linear", [_fp32("X", image)]).get_response()


def test_output_subset_and_statistics(http: httpclient.InferenceServerClient) -> None:
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    before = http.get_inference_statistics("ens_add_sub")["model_stats"][0]
    member_before = http.get_inference_statistics("add_sub")["model_stats"][0]
    result = http.infer(
        "ens_add_sub",
        [_fp32("INPUT0", a), _fp32("INPUT1", b)],
        outputs=[httpclient.InferRequestedOutput("OUTPUT1")],
    )
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    after = http.get_inference_statistics("ens_add_sub")["model_stats"][0]
    member_after = http.get_inference_statistics("add_sub")["model_stats"][0]
    assert after["inference_count"] == before["inference_count"] + 1
    assert after["execution_count"] == before["execution_count"] + 1
    assert member_after["inference_count"] == member_before["inference_count"] + 1


def test_a_step_error_fails_the_request_with_its_status(server) -> None:  # type: ignore[no-untyped-def]
    def post(value: int) -> httpx.Response:
        body = {"id": "e1", "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [value]}]}
        return httpx.post(f"http://{server.url}/v2/models/ens_raiser/infer", json=body, timeout=30)

    ok = post(5)
    assert ok.status_code == 200 and ok.json()["outputs"][0]["data"] == [5]
    failed = post(1)  # raiser answers with an error response (Triton: 500, same text)
    assert failed.status_code == 500
    assert failed.json() == {"error": "in ensemble 'ens_raiser', bad input on purpose"}
    raised = post(0)  # raiser raises from execute
    assert raised.status_code == 500
    assert raised.json()["error"].startswith("in ensemble 'ens_raiser', ")
    assert "the model raised on purpose" in raised.json()["error"]
    bad = httpx.post(
        f"http://{server.url}/v2/models/ens_raiser/infer",
        json={"id": "x", "inputs": []},
        timeout=30,
    )
    assert bad.status_code == 400
    assert post(7).status_code == 200  # the server serves on


def test_a_decoupled_member_streams_over_grpc(server) -> None:  # type: ignore[no-untyped-def]
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        config = client.get_model_config("ens_repeat", as_json=True)["config"]
        assert config["model_transaction_policy"] == {"decoupled": True}
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        inp = grpcclient.InferInput("IN", [3], "INT32")
        inp.set_data_from_numpy(np.array([7, 8, 9], np.int32))
        client.async_stream_infer("ens_repeat", [inp], request_id="s1", enable_empty_final_response=True)
        got = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            if response.outputs:
                got.append((result.as_numpy("OUT").tolist(), result.as_numpy("IDX").tolist(), response.id))
            if final:
                break
        client.stop_stream()
    assert got == [([7], [0], "s1"), ([8], [1], "s1"), ([9], [2], "s1")]


def test_a_decoupled_ensemble_over_http(server) -> None:  # type: ignore[no-untyped-def]
    body = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
    refused = httpx.post(f"http://{server.url}/v2/models/ens_repeat/infer", json=body, timeout=30)
    assert refused.status_code == 501  # as Triton: the HTTP infer endpoint is not for decoupled models
    assert refused.json() == {
        "error": "HTTP end point doesn't support models with decoupled transaction policy"
    }
    with httpx.stream(
        "POST", f"http://{server.url}/v2/models/ens_repeat/generate_stream", json={"IN": [4, 5]}, timeout=30
    ) as response:
        events = [
            json.loads(line[len("data: ") :]) for line in response.iter_lines() if line.startswith("data: ")
        ]
    assert [e["OUT"] for e in events] == [4, 5]


def test_bls_calls_an_ensemble(http: httpclient.InferenceServerClient) -> None:
    name = httpclient.InferInput("MODEL_NAME", [1], "BYTES")
    name.set_data_from_numpy(np.array([b"ens_add_sub"], dtype=object))
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2.0, np.float32)
    result = http.infer("bls", [name, _fp32("INPUT0", a), _fp32("INPUT1", b)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_an_ensemble_of_a_python_model_that_uses_bls(http: httpclient.InferenceServerClient) -> None:
    name = httpclient.InferInput("MODEL_NAME", [1], "BYTES")
    name.set_data_from_numpy(np.array([b"add_sub"], dtype=object))
    a, b = np.arange(4, dtype=np.float32), np.full(4, 3.0, np.float32)
    result = http.infer("ens_of_bls", [name, _fp32("INPUT0", a), _fp32("INPUT1", b)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_metrics_count_the_ensemble(server, http: httpclient.InferenceServerClient) -> None:  # type: ignore[no-untyped-def]
    http.infer("classify", [_fp32("IMAGE", np.zeros((1, 3), np.float32))])
    text = httpx.get(server.metrics_url, timeout=30).text
    lines = [line for line in text.splitlines() if line.startswith("nv_inference_request_success{")]
    assert any('model="classify"' in line for line in lines)
    assert any('model="preprocess"' in line for line in lines)
