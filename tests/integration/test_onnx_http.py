"""tritonclient.http against a real ``tritonpy serve`` with the ONNX backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

# Triton type → ONNX element type, for the identity models (all ORT supports).
TYPES = {
    "BOOL": TensorProto.BOOL,
    "UINT8": TensorProto.UINT8,
    "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32,
    "UINT64": TensorProto.UINT64,
    "INT8": TensorProto.INT8,
    "INT16": TensorProto.INT16,
    "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64,
    "FP16": TensorProto.FLOAT16,
    "FP32": TensorProto.FLOAT,
    "FP64": TensorProto.DOUBLE,
    "BYTES": TensorProto.STRING,
}
NUMPY = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


def _save(graph: onnx.GraphProto, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


def _identity(dt: str, path: Path) -> None:
    # x * 1 for numbers would change nothing either; Identity covers every type.
    vi = [helper.make_tensor_value_info(n, TYPES[dt], ["batch", 3]) for n in ("IN", "OUT")]
    _save(helper.make_graph([helper.make_node("Identity", ["IN"], ["OUT"])], "id", [vi[0]], [vi[1]]), path)


def _sample(dt: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if dt == "BYTES":
        return np.array([f"s{i}é".encode() for i in range(n)], dtype=object).reshape(shape)
    if dt == "BOOL":
        return (np.arange(n) % 2 == 0).reshape(shape)
    return (np.arange(n) + 1).astype(NUMPY[dt]).reshape(shape)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    for dt in TYPES:
        _identity(dt, root / f"identity_{dt.lower()}" / "1" / "model.onnx")
    # A model whose backend is not installed: UNAVAILABLE, the rest serve.
    trt_model = root / "needs_tensorrt"
    (trt_model / "1").mkdir(parents=True)
    (trt_model / "1" / "model.plan").write_bytes(b"not loaded")
    (trt_model / "config.pbtxt").write_text('platform: "tensorrt_plan"\nmax_batch_size: 1\n')
    # Two versions, policy "all", plus reshape: the client sends [4], the model sees [2, 2].
    for v in (1, 2):
        x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 2, 2])
        y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 2, 2])
        c = helper.make_tensor("c", TensorProto.FLOAT, [], [float(v)])
        nodes = [helper.make_node("Mul", ["X", "c"], ["Y"])]
        _save(helper.make_graph(nodes, "scale", [x], [y], [c]), root / "scale" / str(v) / "model.onnx")
    (root / "scale" / "config.pbtxt").write_text(
        """
name: "scale"
backend: "onnxruntime"
max_batch_size: 4
version_policy: { all { } }
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
"""
    )
    return root


@pytest.fixture(scope="module")
def server(server_factory, repo: Path):  # type: ignore[no-untyped-def]
    return server_factory([repo, EXAMPLES], "--exit-on-error=false", "--strict-readiness=false")


@pytest.fixture(scope="module")
def client(server) -> httpclient.InferenceServerClient:  # type: ignore[no-untyped-def]
    return httpclient.InferenceServerClient(server.url)


def _direct(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for k, v in feeds.items():
        if v.dtype == object:  # ORT takes str for strings
            feeds[k] = np.array([b.decode() for b in v.reshape(-1)], dtype=object).reshape(v.shape)
    return session.run(None, feeds)


def test_startup_table_lists_every_model(server) -> None:  # type: ignore[no-untyped-def]
    out = server.wait_for_output("Started HTTPService")
    assert "| simple" in out and "READY" in out
    assert "needs_tensorrt" in out and "tritonpy-backend-tensorrt" in out
    assert f"Started HTTPService at {server.url}" in out


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("dt", list(TYPES))
def test_every_dtype_matches_onnxruntime(
    client: httpclient.InferenceServerClient, repo: Path, dt: str, binary: bool
) -> None:
    if dt == "FP16" and not binary:
        pytest.skip("tritonclient sends FP16 only as binary data")
    data = _sample(dt, (2, 3))
    inp = httpclient.InferInput("IN", list(data.shape), dt)
    inp.set_data_from_numpy(data, binary_data=binary)
    out = httpclient.InferRequestedOutput("OUT", binary_data=binary)
    result = client.infer(f"identity_{dt.lower()}", [inp], outputs=[out])
    got = result.as_numpy("OUT")
    (expected,) = _direct(repo / f"identity_{dt.lower()}" / "1" / "model.onnx", {"IN": data})
    if dt == "BYTES":
        # binary BYTES come back as bytes; JSON carries them as text
        as_client = [s.encode() if binary else s for s in expected.reshape(-1)]
        assert got.reshape(-1).tolist() == as_client
    else:
        assert got.dtype == np.dtype(NUMPY[dt])
        np.testing.assert_array_equal(got, expected)


def test_simple_example_binary_and_request_id(client: httpclient.InferenceServerClient) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    inputs = [
        httpclient.InferInput("INPUT0", [2, 16], "INT32"),
        httpclient.InferInput("INPUT1", [2, 16], "INT32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("simple", inputs, request_id="req-42")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response()["id"] == "req-42"
    assert result.get_response()["model_name"] == "simple"


def test_reshape_and_versions(client: httpclient.InferenceServerClient) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    inp = httpclient.InferInput("X", [2, 4], "FP32")
    inp.set_data_from_numpy(x)
    for version, factor in (("1", 1.0), ("2", 2.0), ("", 2.0)):
        result = client.infer("scale", [inp], model_version=version)
        np.testing.assert_array_equal(result.as_numpy("Y"), x * factor)
        assert result.as_numpy("Y").shape == (2, 4)
    meta = client.get_model_metadata("scale")
    assert meta["versions"] == ["1", "2"]
    assert meta["inputs"] == [{"name": "X", "datatype": "FP32", "shape": [-1, 4]}]


def test_classification_with_labels(client: httpclient.InferenceServerClient) -> None:
    x = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    inp = httpclient.InferInput("FEATURES", [2, 4], "FP32")
    inp.set_data_from_numpy(x)
    probs = client.infer("iris_classifier", [inp]).as_numpy("PROBABILITIES")
    top = client.infer(
        "iris_classifier", [inp], outputs=[httpclient.InferRequestedOutput("PROBABILITIES", class_count=2)]
    ).as_numpy("PROBABILITIES")
    assert top.shape == (2, 2)
    labels = ["setosa", "versicolor", "virginica"]
    for row, p in zip(top, probs):
        best = int(np.argmax(p))
        value, index, label = row[0].decode().split(":")
        assert (int(index), label) == (best, labels[best])
        assert float(value) == pytest.approx(float(p[best]), abs=1e-6)


def test_auto_completed_config(client: httpclient.InferenceServerClient) -> None:
    config = client.get_model_config("identity_fp32")
    assert config["backend"] == "onnxruntime"
    assert config["platform"] == "onnxruntime_onnx"
    assert config["max_batch_size"] == 4  # --backend-config default-max-batch-size default
    assert config["input"][0]["name"] == "IN"
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["input"][0]["dims"] == [3]


def test_missing_backend_makes_only_that_model_unavailable(
    client: httpclient.InferenceServerClient,
) -> None:
    index = {(m["name"], m.get("version", "")): m for m in client.get_model_repository_index()}
    assert index[("simple", "1")]["state"] == "READY"
    broken = [m for (name, _), m in index.items() if name == "needs_tensorrt"]
    assert broken and broken[0]["state"] == "UNAVAILABLE"
    assert "tritonpy-backend-tensorrt" in broken[0]["reason"]
    assert not client.is_model_ready("needs_tensorrt")
    assert client.is_server_ready()  # --strict-readiness=false


def test_client_errors_keep_the_server_serving(client: httpclient.InferenceServerClient) -> None:
    inp = httpclient.InferInput("IN", [1, 4], "FP32")
    inp.set_data_from_numpy(np.zeros((1, 4), np.float32))
    with pytest.raises(InferenceServerException, match="unexpected shape for input 'IN'"):
        client.infer("identity_fp32", [inp])
    bad_type = httpclient.InferInput("IN", [1, 3], "INT32")
    bad_type.set_data_from_numpy(np.zeros((1, 3), np.int32))
    with pytest.raises(InferenceServerException, match="data-type is 'INT32'"):
        client.infer("identity_fp32", [bad_type])
    with pytest.raises(InferenceServerException, match="unknown model"):
        client.infer("no_such_model", [inp])
    assert client.is_server_live()
