"""The system shared-memory extension served by ``tritonpy serve``, over HTTP and gRPC.

NVIDIA's shared-memory example clients run unchanged (``tests/data/nvidia_examples``);
``tritonclient.utils.shared_memory`` regions carry numeric and BYTES inputs and
outputs, at offsets; every error answers with Triton 2.51's status and words
(recorded from the real server).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from onnx import TensorProto, helper
from tritonclient import utils
from tritonclient.utils import InferenceServerException
from tritonpy.memory import load_runtime

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "nvidia_examples"

SIMPLE_STRING = """
name: "simple_string"
backend: "onnxruntime"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_STRING dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_STRING dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_STRING dims: [ 16 ] }
]
"""


def simple_string(repo: Path) -> None:
    """Triton's ``simple_string``: strings of integers in, their sums and differences out."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Cast", ["INPUT0"], ["A"], to=TensorProto.INT32),
        helper.make_node("Cast", ["INPUT1"], ["B"], to=TensorProto.INT32),
        helper.make_node("Add", ["A", "B"], ["SUM"]),
        helper.make_node("Sub", ["A", "B"], ["DIFF"]),
        helper.make_node("Cast", ["SUM"], ["OUTPUT0"], to=TensorProto.STRING),
        helper.make_node("Cast", ["DIFF"], ["OUTPUT1"], to=TensorProto.STRING),
    ]
    graph = helper.make_graph(
        nodes,
        "simple_string",
        [vi(n, TensorProto.STRING, ["B", 16]) for n in ("INPUT0", "INPUT1")],
        [vi(n, TensorProto.STRING, ["B", 16]) for n in ("OUTPUT0", "OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / "simple_string" / "1").mkdir(parents=True)
    onnx.save(model, repo / "simple_string" / "1" / "model.onnx")
    (repo / "simple_string" / "config.pbtxt").write_text(SIMPLE_STRING)


SLOW = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(1.0)  # long enough for the test to unregister its regions meanwhile
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy()
            tensors = [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
            out.append(pb_utils.InferenceResponse(tensors))
        return out
"""


@pytest.fixture(scope="module")
def server(server_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    repo = tmp_path_factory.mktemp("shm_repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    simple_string(repo)
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "1" / "model.py").write_text(SLOW)
    config = (repo / "simple" / "config.pbtxt").read_text()
    config = config.replace('name: "simple"', 'name: "slow"').replace(
        'platform: "onnxruntime_onnx"', 'backend: "python"'
    )
    (repo / "slow" / "config.pbtxt").write_text(config)
    return server_factory([repo], "--allow-client-shm=true")


class Regions:
    """Client-side regions made with tritonclient's own module, destroyed at the end."""

    def __init__(self) -> None:
        self.handles: list[Any] = []

    def make(self, size: int, *arrays: np.ndarray[Any, Any], offset: int = 0) -> tuple[str, Any]:
        key = f"/tritonpy-served-{os.getpid()}-{len(self.handles)}"
        handle = shm.create_shared_memory_region(key, key, size)
        self.handles.append(handle)
        if arrays:
            shm.set_shared_memory_region(handle, list(arrays), offset=offset)
        return key, handle

    def close(self) -> None:
        for handle in self.handles:
            shm.destroy_shared_memory_region(handle)


@pytest.fixture
def regions() -> Iterator[Regions]:
    made = Regions()
    yield made
    made.close()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    if request.param == "http":
        c: Any = httpclient.InferenceServerClient(server.url)
    else:
        c = grpcclient.InferenceServerClient(server.grpc_url)
    c.unregister_system_shared_memory()
    yield c
    c.unregister_system_shared_memory()
    c.close()


def _module(client: Any) -> Any:
    return httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient


def _names(status: Any) -> list[str]:
    """Region names in a status answer: a list over HTTP, a message over gRPC."""
    return [r["name"] for r in status] if isinstance(status, list) else list(status.regions)


def _status(exc: InferenceServerException) -> str:
    """The status in the form each client gives it, as the HTTP number or gRPC name."""
    return str(exc.status()).removeprefix("StatusCode.")


# -- NVIDIA's example clients --------------------------------------------------------------


@pytest.mark.parametrize(
    "script, protocol",
    [
        ("simple_http_shm_client.py", "http"),
        ("simple_grpc_shm_client.py", "grpc"),
        ("simple_http_shm_string_client.py", "http"),
        ("simple_grpc_shm_string_client.py", "grpc"),
        ("reuse_infer_objects_client.py", "http"),
        ("reuse_infer_objects_client.py", "grpc"),
    ],
)
def test_nvidia_shm_clients(server, script: str, protocol: str) -> None:  # type: ignore[no-untyped-def]
    url = server.url if protocol == "http" else server.grpc_url
    args = [sys.executable, str(EXAMPLES / script), "-u", url]
    if script.startswith("reuse"):
        args += ["-i", protocol]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    # The simple_* clients print PASS; reuse_infer_objects exits 1 on any mismatch.
    assert "PASS" in run.stdout or script.startswith("reuse"), run.stdout


# -- the extension's endpoints ---------------------------------------------------------------


def test_metadata_lists_system_shared_memory(server) -> None:  # type: ignore[no-untyped-def]
    http = httpclient.InferenceServerClient(server.url)
    extensions = http.get_server_metadata()["extensions"]
    http.close()
    assert "system_shared_memory" in extensions
    # cuda_shared_memory only where a GPU and cuda-python are (test_cuda_shared_memory_served.py).
    assert ("cuda_shared_memory" in extensions) == (load_runtime() is not None)


def test_register_status_unregister(client: Any, regions: Regions) -> None:
    key, _ = regions.make(2 * 4096)
    client.register_system_shared_memory("a", key, 4096)
    client.register_system_shared_memory("b", key.lstrip("/"), 16, 4096)
    expected = {
        "a": {"name": "a", "key": key, "offset": 0, "byte_size": 4096},
        "b": {"name": "b", "key": key.lstrip("/"), "offset": 4096, "byte_size": 16},
    }
    if _module(client) is httpclient:
        assert client.get_system_shared_memory_status() == list(expected.values())
        assert client.get_system_shared_memory_status("b") == [expected["b"]]
    else:
        status = client.get_system_shared_memory_status(as_json=True)["regions"]
        assert {
            k: {**v, "offset": int(v.get("offset", 0)), "byte_size": int(v["byte_size"])}
            for k, v in status.items()
        } == expected
    client.unregister_system_shared_memory("a")
    client.unregister_system_shared_memory("never-registered")  # no error, as Triton
    assert _names(client.get_system_shared_memory_status()) == ["b"]
    client.unregister_system_shared_memory()
    assert _names(client.get_system_shared_memory_status()) == []
    # NVIDIA's clients clear CUDA regions first: none registered here.
    client.unregister_cuda_shared_memory()
    client.unregister_cuda_shared_memory("c")
    assert _names(client.get_cuda_shared_memory_status()) == []


def _raises(call: Any, http_status: str, grpc_status: str, message: str, client: Any) -> None:
    with pytest.raises(InferenceServerException) as info:
        call()
    expected = http_status if _module(client) is httpclient else grpc_status
    assert (_status(info.value), info.value.message()) == (expected, message)


def test_registration_errors(client: Any, regions: Regions) -> None:
    key, _ = regions.make(8192)
    client.register_system_shared_memory("a", key, 64)
    _raises(
        lambda: client.register_system_shared_memory("a", key, 64),
        "400",
        "ALREADY_EXISTS",
        "shared memory region 'a' already in manager",
        client,
    )
    _raises(
        lambda: client.register_system_shared_memory("b", key, 64),
        "500",
        "INTERNAL",
        f"Invalid shared memory region: '{key}'",
        client,
    )
    client.unregister_system_shared_memory()
    _raises(
        lambda: client.register_system_shared_memory("x", "/tritonpy-no-such-key", 64),
        "500",
        "INTERNAL",
        "Unable to open shared memory region: '/tritonpy-no-such-key'",
        client,
    )
    _raises(
        lambda: client.register_system_shared_memory("x", key, 8192, 4096),
        "400",
        "INVALID_ARGUMENT",
        "failed to register shared memory region 'x': invalid args",
        client,
    )
    _raises(
        lambda: client.register_system_shared_memory("x", key, 16, 16),
        "400",
        "INVALID_ARGUMENT",
        "failed to register shared memory region 'x': unable to process address spaceInvalid argument",
        client,
    )
    _raises(
        lambda: client.get_system_shared_memory_status("x"),
        "404",
        "NOT_FOUND",
        "Unable to find system shared memory region: 'x'",
        client,
    )
    _raises(
        lambda: client.get_cuda_shared_memory_status("c"),
        "404",
        "NOT_FOUND",
        "Unable to find cuda shared memory region: 'c'",
        client,
    )


def test_register_bodies_over_http(server, regions: Regions) -> None:  # type: ignore[no-untyped-def]
    import urllib.error
    import urllib.request

    key, _ = regions.make(4096)

    def post(body: bytes) -> tuple[int, str]:
        request = urllib.request.Request(
            f"http://{server.url}/v2/systemsharedmemory/region/r/register", data=body, method="POST"
        )
        try:
            with urllib.request.urlopen(request) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    # Triton's words; Triton answers 500 for a field of the wrong type, a client's mistake is a 400.
    assert post(b'{"byte_size": 16}') == (
        400,
        '{"error":"Shared memory register request has no \'key\' field"}',
    )
    assert post(b"[1]") == (400, '{"error":"Shared memory register request has no \'key\' field"}')
    assert post(f'{{"key": "{key}"}}'.encode()) == (
        400,
        '{"error":"Shared memory register request has no \'byte_size\' field"}',
    )
    assert post(b'{"key": 1, "byte_size": 16}') == (
        400,
        '{"error":"attempt to access JSON non-string as string"}',
    )
    # In Triton 2.51's order (observed): the key's type and the offset before the byte size
    assert post(b'{"key": 1}') == (400, '{"error":"attempt to access JSON non-string as string"}')
    assert post(f'{{"key": "{key}", "offset": -1}}'.encode()) == (
        400,
        '{"error":"attempt to access JSON non-unsigned-integer as unsigned-integer"}',
    )
    for bad in (b'"16"', b"-1", b"true", b"1.5"):
        assert post(b'{"key": "%s", "byte_size": %s}' % (key.encode(), bad)) == (
            400,
            '{"error":"attempt to access JSON non-unsigned-integer as unsigned-integer"}',
        )
    assert post(f'{{"key": "{key}", "offset": 0, "byte_size": 16}}'.encode()) == (200, "")
    urllib.request.urlopen(
        urllib.request.Request(
            f"http://{server.url}/v2/systemsharedmemory/unregister", data=b"", method="POST"
        )
    ).close()


# -- inference through regions ---------------------------------------------------------------


def _infer(
    client: Any,
    model: str,
    datatype: str,
    ins: list[tuple[str, int, int]],
    outs: list[tuple[str, int, int] | None],
    shape: tuple[int, ...] = (1, 16),
) -> Any:
    module = _module(client)
    inputs = []
    for name, (region, size, offset) in zip(("INPUT0", "INPUT1"), ins):
        inputs.append(module.InferInput(name, list(shape), datatype))
        inputs[-1].set_shared_memory(region, size, offset)
    outputs = []
    for name, slot in zip(("OUTPUT0", "OUTPUT1"), outs):
        outputs.append(module.InferRequestedOutput(name))
        if slot is not None:
            outputs[-1].set_shared_memory(*slot)
    return client.infer(model, inputs, outputs=outputs)


def test_numeric_inputs_and_outputs_at_offsets(client: Any, regions: Regions) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, np.int32)
    in_key, _ = regions.make(4096 + 512, a, b, offset=4096 + 100)
    out_key, out = regions.make(1024)
    client.register_system_shared_memory("in", in_key, 512, 4096)  # the region starts a page in
    client.register_system_shared_memory("out", out_key, 1024)
    result = _infer(
        client,
        "simple",
        "INT32",
        [("in", 128, 100), ("in", 128, 228)],
        [("out", 128, 64), None],
        shape=(2, 16),
    )
    assert shm.get_contents_as_numpy(out, np.int32, [2, 16], offset=64).tolist() == (a + b).tolist()
    assert result.as_numpy("OUTPUT1").tolist() == (a - b).tolist()  # the other output as usual
    meta = result.get_output("OUTPUT0")
    if _module(client) is httpclient:
        assert meta == {"name": "OUTPUT0", "datatype": "INT32", "shape": [2, 16]}
    else:
        assert (meta.datatype, list(meta.shape)) == ("INT32", [2, 16])
        assert result.get_response().raw_output_contents[0] == b""


def test_bytes_inputs_and_outputs(client: Any, regions: Regions) -> None:
    a = np.array([str(x).encode() for x in range(16)], dtype=np.object_).reshape(1, 16)
    b = np.array([b"1"] * 16, dtype=np.object_).reshape(1, 16)
    sa, sb = utils.serialize_byte_tensor(a), utils.serialize_byte_tensor(b)
    in_key, _ = regions.make(4096, sa, sb, offset=8)
    out_key, out = regions.make(4096)
    client.register_system_shared_memory("in", in_key, 4096)
    client.register_system_shared_memory("out", out_key, 4096)
    sizes = (utils.serialized_byte_size(sa), utils.serialized_byte_size(sb))
    _infer(
        client,
        "simple_string",
        "BYTES",
        [("in", sizes[0], 8), ("in", sizes[1], 8 + sizes[0])],
        [("out", 1024, 0), ("out", 1024, 2048)],
    )
    got = shm.get_contents_as_numpy(out, np.object_, [1, 16])
    assert got.tolist() == [[str(x + 1).encode() for x in range(16)]]
    got = shm.get_contents_as_numpy(out, np.object_, [1, 16], offset=2048)
    assert got.tolist() == [[str(x - 1).encode() for x in range(16)]]


def test_inference_errors(client: Any, regions: Regions) -> None:
    a = np.ones(16, np.int32)
    key, _ = regions.make(4096, a, a)
    small_key, _ = regions.make(4096)
    client.register_system_shared_memory("in", key, 4096)
    client.register_system_shared_memory("small", small_key, 32)
    ok = ("in", 64, 0)

    def check(ins: list[Any], outs: list[Any], http_status: str, grpc_status: str, message: str) -> None:
        _raises(
            lambda: _infer(client, "simple", "INT32", ins, outs), http_status, grpc_status, message, client
        )

    check([("zz", 64, 0), ok], [None, None], "404", "NOT_FOUND", "Unable to find shared memory region: 'zz'")
    check([ok, ok], [("zz", 64, 0), None], "404", "NOT_FOUND", "Unable to find shared memory region: 'zz'")
    oob = "Invalid offset + byte size for shared memory region: '%s'"
    check([("in", 64, 4090), ok], [None, None], "400", "INVALID_ARGUMENT", oob % "in")
    check([("in", 8192, 0), ok], [None, None], "400", "INVALID_ARGUMENT", oob % "in")
    check([("small", 64, 0), ok], [None, None], "400", "INVALID_ARGUMENT", oob % "small")
    check([ok, ok], [("small", 64, 0), None], "400", "INVALID_ARGUMENT", oob % "small")
    check([ok, ok], [("in", 64, 4090), None], "400", "INVALID_ARGUMENT", oob % "in")
    check(
        [("in", 60, 0), ok],
        [None, None],
        "400",
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. "
        "Expected 64, got 60",
    )
    check(
        [ok, ok],
        [("in", 32, 0), None],
        "500",
        "INTERNAL",
        "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at "
        "least 64 bytes to hold the results",
    )


def test_unregister_all_while_used_by_later_requests(client: Any, regions: Regions) -> None:
    a = np.arange(16, dtype=np.int32)
    key, _ = regions.make(4096, a, a)
    client.register_system_shared_memory("in", key, 4096)
    _infer(client, "simple", "INT32", [("in", 64, 0), ("in", 64, 64)], [None, None])
    client.unregister_system_shared_memory()
    _raises(
        lambda: _infer(client, "simple", "INT32", [("in", 64, 0), ("in", 64, 64)], [None, None]),
        "404",
        "NOT_FOUND",
        "Unable to find shared memory region: 'in'",
        client,
    )
    client.register_system_shared_memory("in", key, 4096)  # the name is free again
    result = _infer(client, "simple", "INT32", [("in", 64, 0), ("in", 64, 64)], [None, None])
    assert result.as_numpy("OUTPUT0").tolist() == [(2 * a).tolist()]


DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."


def test_client_shared_memory_is_off_by_default(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without ``--allow-client-shm=true`` (Triton since 26.05): register and unregister,
    system and CUDA, answer UNSUPPORTED (HTTP 501, gRPC UNIMPLEMENTED) in Triton's words;
    status answers, empty; a request naming a region finds none; the server serves on."""
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", tmp_path / "simple")
    plain = server_factory([tmp_path])
    key = f"/tritonpy-off-{os.getpid()}"
    handle = shm.create_shared_memory_region("off", key, 64)
    try:
        http = httpclient.InferenceServerClient(plain.url)
        grpc = grpcclient.InferenceServerClient(plain.grpc_url)
        refused = [
            (lambda: http.register_system_shared_memory("off", key, 64), "[501] "),
            (lambda: http.unregister_system_shared_memory("off"), "[501] "),
            (lambda: http.unregister_system_shared_memory(), "[501] "),
            (lambda: http.register_cuda_shared_memory("c", b"\0" * 64, 0, 64), "[501] "),
            (lambda: http.unregister_cuda_shared_memory(), "[501] "),
            (lambda: grpc.register_system_shared_memory("off", key, 64), "[StatusCode.UNIMPLEMENTED] "),
            (lambda: grpc.unregister_system_shared_memory(), "[StatusCode.UNIMPLEMENTED] "),
            (lambda: grpc.register_cuda_shared_memory("c", b"\0" * 64, 0, 64), "[StatusCode.UNIMPLEMENTED] "),
            (lambda: grpc.unregister_cuda_shared_memory("c"), "[StatusCode.UNIMPLEMENTED] "),
        ]
        for call, status in refused:
            with pytest.raises(InferenceServerException) as info:
                call()
            assert str(info.value) == status + DISABLED
        assert http.get_system_shared_memory_status() == []
        assert http.get_cuda_shared_memory_status() == []
        assert len(grpc.get_system_shared_memory_status().regions) == 0
        assert len(grpc.get_cuda_shared_memory_status().regions) == 0
        inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory("off", 64)
        inputs[1].set_data_from_numpy(np.ones((1, 16), np.int32))
        with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'off'"):
            http.infer("simple", inputs)
        inputs[0].set_data_from_numpy(np.ones((1, 16), np.int32))
        assert http.infer("simple", inputs).as_numpy("OUTPUT0").tolist() == [[2] * 16]
        http.close()
        grpc.close()
    finally:
        shm.destroy_shared_memory_region(handle)


def test_shared_memory_is_a_restricted_group(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", tmp_path / "simple")
    restricted = server_factory(
        [tmp_path],
        "--http-restricted-api=shared-memory:admin-key=s3cret",
        "--grpc-restricted-protocol=shared-memory:admin-key=s3cret",
    )
    for module, url, headers in (
        (httpclient, restricted.url, {"admin-key": "s3cret"}),
        (grpcclient, restricted.grpc_url, {"triton-grpc-protocol-admin-key": "s3cret"}),
    ):
        c = module.InferenceServerClient(url)
        with pytest.raises(InferenceServerException):
            c.get_system_shared_memory_status()
        assert _names(c.get_system_shared_memory_status(headers=headers)) == []
        c.close()


def test_tensor_parameters_over_http(server, regions: Regions) -> None:  # type: ignore[no-untyped-def]
    """Triton's answers to malformed ``shared_memory_*`` parameters (its words; it
    answers 500 for a parameter of the wrong type, a client's mistake is a 400)."""
    import json
    import urllib.error
    import urllib.request

    key, _ = regions.make(4096, np.arange(16, dtype=np.int32))
    http = httpclient.InferenceServerClient(server.url)
    http.register_system_shared_memory("r", key, 4096)
    http.close()
    one = {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))}

    def infer(
        params: dict[str, Any], extra: dict[str, Any] | None = None, out: Any = None
    ) -> tuple[int, str]:
        body: dict[str, Any] = {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 16],
                    "datatype": "INT32",
                    "parameters": params,
                    **(extra or {}),
                },
                one,
            ]
        }
        if out is not None:
            body["outputs"] = [{"name": "OUTPUT0", "parameters": out}]
        request = urllib.request.Request(
            f"http://{server.url}/v2/models/simple/infer", data=json.dumps(body).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["error"]

    region = {"shared_memory_region": "r", "shared_memory_byte_size": 64}
    one_of = (
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But set "
    )
    unsigned = "attempt to access JSON non-unsigned-integer as unsigned-integer"
    cases = [
        (
            {"shared_memory_region": "r"},
            None,
            None,
            "Invalid offset + byte size for shared memory region: 'r'",
        ),
        (
            {"shared_memory_region": 1},
            None,
            None,
            "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string",
        ),
        (
            {**region, "shared_memory_byte_size": "64"},
            None,
            None,
            f"Unable to parse 'shared_memory_byte_size': {unsigned}",
        ),
        (
            {**region, "shared_memory_offset": -1},
            None,
            None,
            f"Unable to parse 'shared_memory_offset': {unsigned}",
        ),
        (region, {"data": list(range(16))}, None, one_of + "'data' 'shared_memory_region'"),
        (
            {**region, "binary_data_size": 64},
            None,
            None,
            one_of + "'binary_data_size' 'shared_memory_region'",
        ),
        (
            region,
            None,
            {**region, "binary_data": True},
            "Output can't set both 'shared_memory_region' and 'binary_data'",
        ),
        (
            region,
            None,
            {**region, "classification": 2},
            "Output can't set both 'shared_memory_region' and 'classification'",
        ),
        (
            region,
            None,
            {"shared_memory_region": "r"},
            "Invalid offset + byte size for shared memory region: 'r'",
        ),
    ]
    for params, extra, out, message in cases:
        assert infer(params, extra, out) == (400, message)
    # Offset or size without a region: ignored, as Triton ignores them.
    assert infer({"shared_memory_offset": 0}, {"data": list(range(16))})[0] == 200
    status, text = infer(region, None, {**region, "binary_data": False})  # what tritonclient sends
    assert status == 200 and json.loads(text)["outputs"][0] == {
        "name": "OUTPUT0",
        "datatype": "INT32",
        "shape": [1, 16],
    }
    urllib.request.urlopen(
        urllib.request.Request(
            f"http://{server.url}/v2/systemsharedmemory/unregister", data=b"", method="POST"
        )
    ).close()


def test_unregister_while_a_request_runs(server, client: Any, regions: Regions) -> None:  # type: ignore[no-untyped-def]
    """The request that named the regions still reads its inputs and writes its
    output after they are unregistered (the server keeps its mapping until then)."""
    from concurrent.futures import ThreadPoolExecutor

    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    in_key, _ = regions.make(4096, a, a)
    out_key, out = regions.make(4096)
    client.register_system_shared_memory("in", in_key, 4096)
    client.register_system_shared_memory("out", out_key, 4096)
    module = _module(client)
    with ThreadPoolExecutor(1) as pool:

        def run() -> None:  # a client of its own: HTTP clients stay on their thread
            own = (
                httpclient.InferenceServerClient(server.url)
                if module is httpclient
                else grpcclient.InferenceServerClient(server.grpc_url)
            )
            try:
                _infer(own, "slow", "INT32", [("in", 64, 0), ("in", 64, 64)], [("out", 64, 128), None])
            finally:
                own.close()

        future = pool.submit(run)
        time.sleep(0.5)  # the request is in the model (it sleeps 1 s)
        client.unregister_system_shared_memory()
        assert _names(client.get_system_shared_memory_status()) == []
        future.result(timeout=30)
    assert shm.get_contents_as_numpy(out, np.int32, [1, 16], offset=128).tolist() == (2 * a).tolist()


def test_grpc_stream_through_regions(server, regions: Regions) -> None:  # type: ignore[no-untyped-def]
    import queue

    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    in_key, _ = regions.make(4096, a, 3 * a)
    out_key, out = regions.make(4096)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.register_system_shared_memory("in", in_key, 4096)
    client.register_system_shared_memory("out", out_key, 4096)
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory("in", 64)
        inputs[1].set_shared_memory("in", 64, 64)
        outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
        outputs[1].set_shared_memory("out", 64, 512)
        client.async_stream_infer("simple", inputs, outputs=outputs)
        result, error = results.get(timeout=30)
        assert error is None
        assert result.as_numpy("OUTPUT0").tolist() == (4 * a).tolist()
        assert shm.get_contents_as_numpy(out, np.int32, [1, 16], offset=512).tolist() == (-2 * a).tolist()
        outputs[1].set_shared_memory("out", 32, 512)  # too small: the error comes in the stream
        client.async_stream_infer("simple", inputs, outputs=outputs)
        result, error = results.get(timeout=30)
        assert result is None and "should be at least 64 bytes to hold the results" in str(error)
    finally:
        client.stop_stream()
        client.unregister_system_shared_memory()
        client.close()
