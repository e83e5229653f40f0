"""The HTTP front end through the unmodified tritonclient.http."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy.memory import load_runtime
from tritonpy_sdk import DataType

pytestmark = pytest.mark.integration

# Every numeric type the test backend serves, from the SDK's own table.
NUMPY = {dt.value: dt.numpy_dtype.type for dt in DataType if dt not in (DataType.BYTES, DataType.BF16)}


@pytest.fixture(scope="module")
def client(live) -> httpclient.InferenceServerClient:  # type: ignore[no-untyped-def]
    return httpclient.InferenceServerClient(live.url)


def _inputs(a: np.ndarray, b: np.ndarray, dt: str, binary: bool) -> list[httpclient.InferInput]:
    inputs = []
    for name, arr in (("INPUT0", a), ("INPUT1", b)):
        inp = httpclient.InferInput(name, list(arr.shape), dt)
        inp.set_data_from_numpy(arr, binary_data=binary)
        inputs.append(inp)
    return inputs


#: What Triton 2.51 lists in GET /v2 (recorded from the real server), less
#: cuda_shared_memory, which tritonpy lists only with a GPU and cuda-python.
TRITON_EXTENSIONS = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "trace",
    "logging",
]


def test_health_and_metadata(client: httpclient.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "triton"  # Triton's default --id, which NVIDIA's example clients check
    assert [e for e in meta["extensions"] if e != "cuda_shared_memory"] == TRITON_EXTENSIONS
    assert ("cuda_shared_memory" in meta["extensions"]) == (load_runtime() is not None)
    assert client.is_model_ready("addsub") and client.is_model_ready("addsub", "1")
    model = client.get_model_metadata("addsub", "1")
    assert model["versions"] == ["1"] and model["platform"] == "testbk"
    assert model["inputs"][1] == {"name": "INPUT1", "datatype": "INT32", "shape": [-1, 4]}
    config = client.get_model_config("addsub")
    assert config["name"] == "addsub" and config["input"][0]["dims"] == [4]
    index = client.get_model_repository_index()
    assert {"name": "classes", "version": "1", "state": "READY"} in index


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("dt", list(NUMPY))
def test_numeric_dtypes(client: httpclient.InferenceServerClient, dt: str, binary: bool) -> None:
    if dt == "FP16" and not binary:
        pytest.skip("tritonclient sends FP16 only as binary data")
    a = (
        (np.arange(8).reshape(2, 4) % 2 == 0)
        if dt == "BOOL"
        else np.arange(8).reshape(2, 4).astype(NUMPY[dt])
    )
    b = np.zeros_like(a) if dt == "BOOL" else np.ones((2, 4), NUMPY[dt])
    outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
    model = "addsub" if dt == "INT32" else f"addsub_{dt.lower()}"
    result = client.infer(model, _inputs(a, b, dt, binary), outputs=outputs)
    expected = (a | b) if dt == "BOOL" else (a + b).astype(a.dtype)
    got = result.as_numpy("OUTPUT0")
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, expected)


def test_bf16_binary(client: httpclient.InferenceServerClient) -> None:
    import ml_dtypes

    a = np.array([[1.0, 2.0, 3.0, 4.0]], ml_dtypes.bfloat16)
    result = client.infer("addsub_bf16", _inputs(a, a, "BF16", True))
    np.testing.assert_allclose(result.as_numpy("OUTPUT0").astype(np.float32), a.astype(np.float32) * 2)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes(client: httpclient.InferenceServerClient, binary: bool) -> None:
    text = np.array([[b"a", b"", "é".encode(), b"\x00z"]], dtype=object)
    if not binary:
        text = np.array([["a", "", "é", "z"]], dtype=object)
    inp = httpclient.InferInput("INPUT0", [1, 4], "BYTES")
    inp.set_data_from_numpy(text, binary_data=binary)
    other = httpclient.InferInput("INPUT1", [1, 4], "BYTES")
    other.set_data_from_numpy(text, binary_data=binary)
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
    got = client.infer("addsub_string", [inp, other], outputs=[out]).as_numpy("OUTPUT0")
    expected = [v.encode() if isinstance(v, str) and binary else v for v in text.reshape(-1)]
    assert got.reshape(-1).tolist() == expected


def test_bytes_that_are_not_utf8_need_binary_output(client: httpclient.InferenceServerClient) -> None:
    """JSON cannot carry them: 400 saying so (Triton writes them into its JSON raw, and
    tritonclient then fails to decode the answer); as binary data they come back whole."""
    text = np.array([[b"\xfa\x03", b"ok", b"\x94", b""]], dtype=object)
    inputs = [httpclient.InferInput(n, [1, 4], "BYTES") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(text, binary_data=True)
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub_string", inputs, outputs=[out])
    assert str(info.value) == (
        "[400] output 'OUTPUT0' holds bytes that are not UTF-8 text (invalid start byte at byte 0 "
        "of an element), which JSON cannot carry: request it with binary_data: true"
    )
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    got = client.infer("addsub_string", inputs, outputs=[out]).as_numpy("OUTPUT0")
    assert got.reshape(-1).tolist() == text.reshape(-1).tolist()


def test_request_id_parameters_and_output_subset(client: httpclient.InferenceServerClient) -> None:
    a = np.arange(4, dtype=np.int32).reshape(1, 4)
    result = client.infer(
        "addsub",
        _inputs(a, a, "INT32", True),
        request_id="abc",
        parameters={"echo": "hello"},
        outputs=[httpclient.InferRequestedOutput("OUTPUT1")],
    )
    response = result.get_response()
    assert response["id"] == "abc"
    assert response["parameters"] == {"echo": "hello"}
    assert [o["name"] for o in response["outputs"]] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - a)


def test_priority_and_timeout_pass_through(client: httpclient.InferenceServerClient) -> None:
    a = np.arange(4, dtype=np.int32).reshape(1, 4)
    result = client.infer(
        "addsub", _inputs(a, a, "INT32", False), priority=1, timeout=10_000_000, parameters={"echo": "p"}
    )
    assert result.get_response()["parameters"] == {"echo": "p"}
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)


def test_classification(client: httpclient.InferenceServerClient) -> None:
    a = np.array([[0.1, 0.9, 0.3, 0.2]], np.float32)
    z = np.zeros_like(a)
    out = httpclient.InferRequestedOutput("OUTPUT0", class_count=2)
    result = client.infer("classes", _inputs(a, z, "FP32", True), outputs=[out])
    assert result.as_numpy("OUTPUT0").tolist() == [[b"0.900000:1:b", b"0.300000:2:c"]]


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compression(client: httpclient.InferenceServerClient, algorithm: str) -> None:
    a = np.arange(8, dtype=np.int32).reshape(2, 4)
    result = client.infer(
        "addsub",
        _inputs(a, a, "INT32", True),
        request_compression_algorithm=algorithm,
        response_compression_algorithm=algorithm,
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)


def test_errors_reach_the_client_and_the_server_keeps_serving(
    client: httpclient.InferenceServerClient,
) -> None:
    a = np.zeros((1, 4), np.int32)
    with pytest.raises(InferenceServerException) as unknown:
        client.infer("nope", _inputs(a, a, "INT32", True))
    assert unknown.value.status() == "404"
    assert "Request for unknown model: 'nope' is not found" in unknown.value.message()
    with pytest.raises(InferenceServerException) as dtype:
        client.infer("addsub", _inputs(a.astype(np.float32), a.astype(np.float32), "FP32", True))
    assert dtype.value.status() == "400"
    assert "data-type is 'FP32', but model 'addsub' expects 'INT32'" in dtype.value.message()
    with pytest.raises(InferenceServerException, match=r"Expected \[-1,4\], got \[1,3\]"):
        client.infer("addsub", _inputs(np.zeros((1, 3), np.int32), np.zeros((1, 3), np.int32), "INT32", True))
    only_one = httpclient.InferInput("INPUT0", [1, 4], "INT32")
    only_one.set_data_from_numpy(a)
    with pytest.raises(InferenceServerException, match=r"missing required input\(s\) \['INPUT1'\]"):
        client.infer("addsub", [only_one])
    with pytest.raises(InferenceServerException) as failing:
        client.infer("failing", _inputs(a, a, "INT32", True))
    assert failing.value.status() == "500" and "backend blew up" in failing.value.message()
    with pytest.raises(InferenceServerException, match="version 3 is not found"):
        client.get_model_metadata("addsub", "3")
    assert client.infer("addsub", _inputs(a, a, "INT32", True)).as_numpy("OUTPUT0").shape == (1, 4)
