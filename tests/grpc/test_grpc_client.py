"""The gRPC front end through the unmodified tritonclient.grpc."""

from __future__ import annotations

import queue
from functools import partial

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy.memory import load_runtime
from tritonpy_sdk import DataType

pytestmark = pytest.mark.integration

# Every numeric type the test backend serves, from the SDK's own table.
NUMPY = {dt.value: dt.numpy_dtype.type for dt in DataType if dt not in (DataType.BYTES, DataType.BF16)}


@pytest.fixture(scope="module")
def client(grpc_server) -> grpcclient.InferenceServerClient:  # type: ignore[no-untyped-def]
    return grpcclient.InferenceServerClient(grpc_server.url)


def _inputs(a: np.ndarray, b: np.ndarray, dt: str) -> list[grpcclient.InferInput]:
    inputs = []
    for name, arr in (("INPUT0", a), ("INPUT1", b)):
        inp = grpcclient.InferInput(name, list(arr.shape), dt)
        inp.set_data_from_numpy(arr)
        inputs.append(inp)
    return inputs


def test_health_metadata_config_index(client: grpcclient.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("addsub") and not client.is_model_ready("nope")
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "triton"
    assert "binary_tensor_data" in meta["extensions"]
    assert ("cuda_shared_memory" in meta["extensions"]) == (load_runtime() is not None)
    assert "model_repository(unload_dependents)" in meta["extensions"] and "sequence" in meta["extensions"]
    model = client.get_model_metadata("addsub", "1", as_json=True)
    assert model["platform"] == "testbk"
    assert model["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": ["-1", "4"]}
    config = client.get_model_config("addsub").config
    assert config.max_batch_size == 8 and config.input[0].dims == [4]
    index = client.get_model_repository_index(as_json=True)["models"]
    assert {"name": "classes", "version": "1", "state": "READY"} in index


def test_a_repository_name_is_unsupported(client: grpcclient.InferenceServerClient) -> None:
    """Index, load and unload naming a repository are UNIMPLEMENTED, as Triton 2.51 answers."""
    # tritonclient's methods send no repository name: its stub sends the requests as they are.
    stub, pb = client._client_stub, grpcclient.service_pb2
    named = {"repository_name": "any"}
    for call, request in (
        (stub.RepositoryIndex, pb.RepositoryIndexRequest(**named)),
        (stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="addsub", **named)),
        (stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="addsub", **named)),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call(request)
        assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert info.value.details() == "'repository_name' specification is not supported"
    assert client.is_model_ready("addsub")


@pytest.mark.parametrize("dt", list(NUMPY))
def test_numeric_dtypes_raw(client: grpcclient.InferenceServerClient, dt: str) -> None:
    a = (
        (np.arange(8).reshape(2, 4) % 2 == 0)
        if dt == "BOOL"
        else np.arange(8).reshape(2, 4).astype(NUMPY[dt])
    )
    b = np.zeros_like(a) if dt == "BOOL" else np.ones((2, 4), NUMPY[dt])
    model = "addsub" if dt == "INT32" else f"addsub_{dt.lower()}"
    got = client.infer(model, _inputs(a, b, dt)).as_numpy("OUTPUT0")
    expected = (a | b) if dt == "BOOL" else (a + b).astype(a.dtype)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, expected)


def test_bytes(client: grpcclient.InferenceServerClient) -> None:
    text = np.array([[b"a", b"", "é".encode(), b"\x00z"]], dtype=object)
    got = client.infer("addsub_string", _inputs(text, text, "BYTES")).as_numpy("OUTPUT1")
    assert got.tolist() == text.tolist()


@pytest.mark.parametrize(
    ("dt", "field", "values"),
    [
        ("INT32", "int_contents", [1, 2, 3, 4]),
        ("FP32", "fp32_contents", [0.5, 1, 2, 3]),
        ("BOOL", "bool_contents", [True, False, True, True]),
        ("STRING", "bytes_contents", [b"a", b"b", b"", b"d"]),
        ("INT64", "int64_contents", [1, -2, 3, 2**40]),
        ("UINT8", "uint_contents", [0, 1, 254, 255]),
    ],
)
def test_typed_contents_inputs(grpc_server, dt: str, field: str, values: list) -> None:  # type: ignore[no-untyped-def]
    """Inputs in typed ``contents`` (what other KServe clients send) rather than raw bytes."""
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    channel = grpc.insecure_channel(grpc_server.url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    model = "addsub" if dt == "INT32" else f"addsub_{dt.lower()}"
    datatype = "BYTES" if dt == "STRING" else dt
    request = service_pb2.ModelInferRequest(model_name=model)
    for name in ("INPUT0", "INPUT1"):
        entry = request.inputs.add(name=name, datatype=datatype, shape=[1, 4])
        getattr(entry.contents, field).extend(values)
    response = stub.ModelInfer(request)
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert len(response.raw_output_contents) == 2
    channel.close()


def test_request_id_parameters_outputs_classification(client: grpcclient.InferenceServerClient) -> None:
    a = np.arange(4, dtype=np.int32).reshape(1, 4)
    result = client.infer(
        "addsub",
        _inputs(a, a, "INT32"),
        request_id="g1",
        parameters={"echo": "hi"},
        outputs=[grpcclient.InferRequestedOutput("OUTPUT1")],
    )
    response = result.get_response(as_json=True)
    assert response["id"] == "g1"
    assert response["parameters"]["echo"] == {"string_param": "hi"}
    assert [o["name"] for o in response["outputs"]] == ["OUTPUT1"]
    x = np.array([[0.1, 0.9, 0.3, 0.2]], np.float32)
    top = client.infer(
        "classes",
        _inputs(x, np.zeros_like(x), "FP32"),
        outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=2)],
    )
    assert top.as_numpy("OUTPUT0").tolist() == [[b"0.900000:1:b", b"0.300000:2:c"]]


def test_errors_map_to_grpc_status(client: grpcclient.InferenceServerClient) -> None:
    a = np.zeros((1, 4), np.int32)
    cases = [
        (
            lambda: client.infer("nope", _inputs(a, a, "INT32")),
            "StatusCode.NOT_FOUND",
            "unknown model: 'nope'",
        ),
        (
            lambda: client.infer("addsub", _inputs(a.astype(np.float32), a.astype(np.float32), "FP32")),
            "StatusCode.INVALID_ARGUMENT",
            "data-type is 'FP32'",
        ),
        (lambda: client.infer("failing", _inputs(a, a, "INT32")), "StatusCode.INTERNAL", "backend blew up"),
        (lambda: client.get_model_metadata("addsub", "9"), "StatusCode.NOT_FOUND", "version 9 is not found"),
        (lambda: client.load_model("addsub"), "StatusCode.UNAVAILABLE", "explicit model load / unload"),
        (lambda: client.unload_model("addsub"), "StatusCode.UNAVAILABLE", "explicit model load / unload"),
        (
            lambda: client.register_system_shared_memory("r", "/tritonpy-no-such-key", 16),
            "StatusCode.INTERNAL",
            "Unable to open shared memory region: '/tritonpy-no-such-key'",
        ),
        (
            lambda: client.get_system_shared_memory_status("r"),
            "StatusCode.NOT_FOUND",
            "Unable to find system shared memory region: 'r'",
        ),
        (
            # Not a handle any process exported (and no GPU here): Triton 2.51's answer.
            lambda: client.register_cuda_shared_memory("c", b"\0" * 64, 0, 16),
            "StatusCode.INVALID_ARGUMENT",
            "failed to register shared memory region: invalid args",
        ),
    ]
    for call, status, message in cases:
        with pytest.raises(InferenceServerException) as info:
            call()
        assert info.value.status() == status
        assert message in info.value.message()
    assert client.infer("addsub", _inputs(a, a, "INT32")).as_numpy("OUTPUT0").shape == (1, 4)


def test_the_rest_of_a_request_is_checked_before_its_byte_sizes(
    client: grpcclient.InferenceServerClient,
) -> None:
    """As Triton 2.51: an input whose data does not fit its shape is reported after every
    other check of the request, in Triton's words; a wrong shape comes first."""
    a = np.zeros((1, 4), np.int32)

    def error(inputs: list[grpcclient.InferInput]) -> str:
        with pytest.raises(InferenceServerException) as info:
            client.infer("addsub", inputs)
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        return str(info.value.message())

    short = _inputs(a, a, "INT32")
    short[1].set_shape([1, 2])
    short[1].set_data_from_numpy(np.zeros((1, 2), np.int32))
    short[1].set_shape([1, 4])  # 8 bytes for 16
    assert error(short) == (
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'addsub'. "
        "Expected 16, got 8"
    )
    reshaped = _inputs(a, a, "INT32")
    reshaped[1].set_shape([1, 2])  # its 16 bytes fit neither the shape nor the model's dims
    assert error(reshaped).startswith(
        "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'addsub'. "
        "Expected [-1,4], got [1,2]. NOTE: "
    )
    wrong_type = _inputs(a, a, "INT32")
    wrong_type[0] = grpcclient.InferInput("INPUT0", [1, 2], "FP64")
    wrong_type[0].set_data_from_numpy(np.zeros((1, 2), np.float64))
    wrong_type[0].set_shape([1, 4])  # 16 bytes for 32, and the wrong type: the type first
    assert error(wrong_type) == (
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP64', but model 'addsub' "
        "expects 'INT32'"
    )


def test_stream_infer_responses_and_errors(client: grpcclient.InferenceServerClient) -> None:
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=partial(lambda q, result, error: q.put((result, error)), results))
    try:
        a = np.arange(4, dtype=np.int32).reshape(1, 4)
        for i in range(5):
            client.async_stream_infer("addsub", _inputs(a + i, a, "INT32"), request_id=str(i))
        client.async_stream_infer("nope", _inputs(a, a, "INT32"), request_id="bad")
        client.async_stream_infer(
            "addsub", _inputs(a, a, "INT32"), request_id="final", enable_empty_final_response=True
        )
        got: dict[str, object] = {}
        errors = []
        for _ in range(7):
            result, error = results.get(timeout=20)
            if error is not None:
                errors.append(error)
            else:
                got[result.get_response().id] = result
    finally:
        client.stop_stream()
    assert sorted(got) == ["0", "1", "2", "3", "4", "final"]
    for i in range(5):
        np.testing.assert_array_equal(got[str(i)].as_numpy("OUTPUT0"), 2 * a + i)  # type: ignore[attr-defined]
        # Triton 2.51 flags a non-decoupled model's stream response final, asked or not
        response = got[str(i)].get_response(as_json=True)  # type: ignore[attr-defined]
        assert response["parameters"]["triton_final_response"] == {"bool_param": True}
    final = got["final"].get_response(as_json=True)  # type: ignore[attr-defined]
    assert final["parameters"]["triton_final_response"] == {"bool_param": True}
    assert final["model_version"] == "1" and final["outputs"]
    assert len(errors) == 1 and "unknown model: 'nope'" in errors[0].message()


def test_health_service(grpc_server) -> None:  # type: ignore[no-untyped-def]
    from tritonpy.grpc import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(grpc_server.url) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        assert stub.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="other"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_log_settings(client: grpcclient.InferenceServerClient, grpc_server) -> None:  # type: ignore[no-untyped-def]
    before = client.get_log_settings(as_json=True)["settings"]
    assert before["log_format"] == {"string_param": "default"}
    try:
        client.update_log_settings({"log_verbose_level": 1, "log_warning": False})
        now = client.get_log_settings(as_json=True)["settings"]
        assert now["log_verbose_level"] == {"uint32_param": 1}
        assert now["log_warning"] == {"bool_param": False}
        with pytest.raises(InferenceServerException, match="invalid argument for --log_format"):
            client.update_log_settings({"log_format": "xml"})
        # tritonclient always sends a uint32; another client may send any kind of value.
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        request = service_pb2.LogSettingsRequest()
        request.settings["log_verbose_level"].string_param = "99999999999999999999"
        with grpc.insecure_channel(grpc_server.url) as channel:
            with pytest.raises(grpc.RpcError) as info:
                service_pb2_grpc.GRPCInferenceServiceStub(channel).LogSettings(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "expect unsigned 32-bit integer" in str(info.value.details())
        assert client.get_log_settings(as_json=True)["settings"]["log_verbose_level"] == {"uint32_param": 1}
    finally:
        client.update_log_settings({"log_verbose_level": 0, "log_warning": True})


def test_model_statistics(client: grpcclient.InferenceServerClient) -> None:
    a = np.ones((3, 4), np.int32)
    before = client.get_inference_statistics("addsub", as_json=True)["model_stats"][0]
    client.infer("addsub", _inputs(a, a, "INT32"))
    after = client.get_inference_statistics("addsub", as_json=True)["model_stats"][0]
    assert int(after["inference_count"]) - int(before.get("inference_count", 0)) == 3
    assert int(after["execution_count"]) - int(before.get("execution_count", 0)) == 1
    with pytest.raises(InferenceServerException, match="requested model 'nope' is not available"):
        client.get_inference_statistics("nope")


def test_trace_settings(client: grpcclient.InferenceServerClient) -> None:
    settings = client.get_trace_settings(as_json=True)["settings"]
    assert settings["trace_level"] == {"value": ["OFF"]}
    client.update_trace_settings(model_name="addsub", settings={"trace_rate": "9"})
    assert client.get_trace_settings(model_name="addsub", as_json=True)["settings"]["trace_rate"] == {
        "value": ["9"]
    }
    client.update_trace_settings(model_name="addsub", settings={"trace_rate": None})
    assert client.get_trace_settings(model_name="addsub", as_json=True)["settings"]["trace_rate"] == {
        "value": ["1000"]
    }
    with pytest.raises(InferenceServerException, match="invalid trace level"):
        client.update_trace_settings(settings={"trace_level": ["LOUD"]})
    with pytest.raises(InferenceServerException) as no_file:  # Triton 2.51's answer (observed)
        client.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"]})
    assert no_file.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert no_file.value.message() == "Attempting to set invalid trace setting :trace file name is not given"
    # Triton 2.51: INVALID_ARGUMENT "Request for unknown model : nope", reading or updating
    for call in (
        lambda: client.get_trace_settings(model_name="nope"),
        lambda: client.update_trace_settings(model_name="nope", settings={"trace_level": ["TIMESTAMPS"]}),
    ):
        with pytest.raises(InferenceServerException) as unknown:
            call()
        assert unknown.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert unknown.value.message() == "Request for unknown model : nope"


def test_stream_errors_as_grpc_status_with_triton_grpc_error(
    client: grpcclient.InferenceServerClient,
) -> None:
    """With the triton_grpc_error header an error ends the stream with its status code."""
    results: queue.Queue = queue.Queue()
    client.start_stream(
        callback=partial(lambda q, result, error: q.put((result, error)), results),
        headers={"triton_grpc_error": "true"},
    )
    try:
        a = np.zeros((1, 4), np.int32)
        client.async_stream_infer("nope", _inputs(a, a, "INT32"))
        result, error = results.get(timeout=20)
    finally:
        client.stop_stream()
    assert result is None
    assert error.status() == "StatusCode.NOT_FOUND"
    assert "unknown model: 'nope'" in error.message()


def test_max_message_size(test_repos) -> None:  # type: ignore[no-untyped-def]
    from tritonpy_testservers import start_grpc

    server, frontend = start_grpc(test_repos, grpc_max_message_size=4096)
    try:
        client = grpcclient.InferenceServerClient(frontend.url)
        small = np.zeros((1, 4), np.float32)
        assert client.infer("addsub_fp32", _inputs(small, small, "FP32")).as_numpy("OUTPUT0").shape == (1, 4)
        text = np.array([[b"x" * 3000] * 4], dtype=object)  # 12 kB: over the 4 kB limit
        with pytest.raises(InferenceServerException) as info:
            client.infer("addsub_string", _inputs(text, text, "BYTES"))
        assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
    finally:
        frontend.stop()
        server.stop()


def test_unknown_shared_memory_regions(client: grpcclient.InferenceServerClient) -> None:
    """Regions are looked up by name (tests/integration/test_shared_memory_served.py
    covers registered ones); Triton's answer for a name never registered."""
    a = np.ones((1, 4), np.int32)
    inputs = _inputs(a, a, "INT32")
    inputs[0].set_shared_memory("input_region", 16)  # as NVIDIA's shm example clients do
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", inputs)
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert info.value.message() == "Unable to find shared memory region: 'input_region'"
    output = grpcclient.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("output_region", 16)
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", _inputs(a, a, "INT32"), outputs=[output])
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert info.value.message() == "Unable to find shared memory region: 'output_region'"


_STOL = "version should be an integral value > 0"


@pytest.mark.parametrize(
    ("version", "error"),
    [
        # Triton 2.51 reads the field with std::stol: white space, a sign, then ASCII digits.
        (
            "\u0663",
            f"failed to get model version from specified version string '\u0663' (details: stol), {_STOL}",
        ),
        (
            "\uff11",
            f"failed to get model version from specified version string '\uff11' (details: stol), {_STOL}",
        ),
        ("x1", f"failed to get model version from specified version string 'x1' (details: stol), {_STOL}"),
        (
            str(2**63),
            f"failed to get model version from specified version string '{2**63}' (details: stol), {_STOL}",
        ),
        ("-1", f"invalid model version specified '-1' , {_STOL}"),
        ("0", "Request for unknown model: 'addsub' version 0 is not found"),
        (" 1", None),
        ("+1", None),
        ("1_0", None),  # what follows the digits is ignored
    ],
)
def test_versions_as_triton_reads_them(
    client: grpcclient.InferenceServerClient, version: str, error: str | None
) -> None:
    a = np.ones((1, 4), np.int32)
    if error is None:
        assert (
            client.infer("addsub", _inputs(a, a, "INT32"), model_version=version).get_response().model_version
            == "1"
        )
        assert client.is_model_ready("addsub", version)
        assert client.get_model_metadata("addsub", version).name == "addsub"
        return
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", _inputs(a, a, "INT32"), model_version=version)
    assert info.value.message() == error
    if version == "0":
        assert info.value.status() == "StatusCode.NOT_FOUND"
        assert not client.is_model_ready("addsub", version)
        return
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    for call in (client.is_model_ready, client.get_model_metadata, client.get_inference_statistics):
        with pytest.raises(InferenceServerException) as info:
            call("addsub", version)
        assert info.value.message() == error


def test_an_input_given_twice_in_tritons_words(client: grpcclient.InferenceServerClient) -> None:
    a = np.zeros((1, 4), np.int32)
    twice = _inputs(a, a, "INT32")
    twice[1] = twice[0]
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", twice, request_id="r1")
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert info.value.message() == "[request id: r1] input 'INPUT0' already exists in request"
