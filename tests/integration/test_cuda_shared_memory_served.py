"""The CUDA shared-memory extension and the memory pools, served by ``tritonpy serve``.

Everywhere: the register bodies are checked in Triton 2.51's order with its words,
a handle that cannot be opened (any handle, on a host without a GPU) answers
Triton's 400 / INVALID_ARGUMENT, the status lists no region, and the pinned pool's
gauges are on the metrics port (all recorded from the real server on a host
without a GPU). Where a GPU and cuda-python are (``gpu``): NVIDIA's CUDA
shared-memory example clients run unchanged, and ``tritonclient.utils.
cuda_shared_memory`` regions carry numeric and BYTES tensors over HTTP and gRPC.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy.memory import load_runtime

from .test_shared_memory_served import simple_string

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "nvidia_examples"
HANDLE = base64.b64encode(bytes(64)).decode()  # well formed; no process exported it


@pytest.fixture(scope="module")
def server(server_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    repo = tmp_path_factory.mktemp("cudashm_repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    simple_string(repo)
    return server_factory([repo], "--pinned-memory-pool-byte-size=1048576", "--allow-client-shm=true")


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    if request.param == "http":
        c: Any = httpclient.InferenceServerClient(server.url)
    else:
        c = grpcclient.InferenceServerClient(server.grpc_url)
    c.unregister_cuda_shared_memory()
    yield c
    c.unregister_cuda_shared_memory()
    c.close()


def _names(status: Any) -> list[str]:
    """Region names in a status answer: a list over HTTP, a message over gRPC."""
    return [r["name"] for r in status] if isinstance(status, list) else list(status.regions)


def _post(server: Any, path: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{server.url}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# -- everywhere --------------------------------------------------------------------------------


def test_register_bodies_over_http(server) -> None:  # type: ignore[no-untyped-def]
    def register(body: Any) -> tuple[int, Any]:
        status, text = _post(server, "/v2/cudasharedmemory/region/c/register", json.dumps(body).encode())
        return status, json.loads(text)

    def error(message: str) -> tuple[int, Any]:
        return 400, {"error": message}

    def body(b64: Any = HANDLE, **fields: Any) -> dict[str, Any]:
        return {"raw_handle": {"b64": b64}, **fields}

    # Triton's words in Triton's order; Triton answers 500 for a missing or mistyped
    # member, a client's mistake is a 400 here (as for system shared memory).
    no_handle = error("Shared memory register request has no 'raw_handle' field")
    assert register([]) == no_handle
    assert register({"device_id": 0, "byte_size": 16}) == no_handle
    assert register({"raw_handle": "abc", "device_id": 0, "byte_size": 16}) == error(
        "attempt to access non-existing object member 'b64'"
    )
    assert register(body(5, device_id=0, byte_size=16)) == error(
        "attempt to access JSON non-string as string"
    )
    assert register(body("AA")) == error("attempt to access non-existing object member 'byte_size'")
    assert register(body(byte_size=16)) == error("attempt to access non-existing object member 'device_id'")
    for bad in ("a", -1, 1.5, True):
        assert register(body(device_id=bad, byte_size=16)) == error(
            "attempt to access JSON non-unsigned-integer as unsigned-integer"
        )
    for b64 in ("AAAA", "!!!!"):
        assert register(body(b64, device_id=0, byte_size=16)) == error(
            "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"
        )
    assert register(body(device_id=0, byte_size=16)) == error(
        "failed to register shared memory region: invalid args"
    )


def test_a_handle_that_cannot_be_opened_is_refused(client: Any) -> None:
    for device in (0, 3):
        with pytest.raises(InferenceServerException) as info:
            # Both clients take the handle in base64, as cuda_shared_memory.get_raw_handle gives it.
            client.register_cuda_shared_memory("c", base64.b64encode(bytes(64)), device, 16)
        assert str(info.value.status()).removeprefix("StatusCode.") in ("400", "INVALID_ARGUMENT")
        assert info.value.message() == "failed to register shared memory region: invalid args"
    assert _names(client.get_cuda_shared_memory_status()) == []
    with pytest.raises(InferenceServerException, match="Unable to find cuda shared memory region: 'c'"):
        client.get_cuda_shared_memory_status("c")
    client.unregister_cuda_shared_memory("c")  # unknown names are no error, as in Triton


def test_metadata_lists_cuda_shared_memory_only_with_a_gpu(server) -> None:  # type: ignore[no-untyped-def]
    http = httpclient.InferenceServerClient(server.url)
    extensions = http.get_server_metadata()["extensions"]
    http.close()
    assert ("cuda_shared_memory" in extensions) == (load_runtime() is not None)


def test_pinned_pool_gauges_are_exported(server) -> None:  # type: ignore[no-untyped-def]
    with urllib.request.urlopen(server.metrics_url, timeout=30) as resp:
        text = resp.read().decode()
    assert "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes" in text
    assert "\nnv_pinned_memory_pool_total_bytes 1048576\n" in text
    assert "# TYPE nv_pinned_memory_pool_used_bytes gauge" in text
    assert "\nnv_pinned_memory_pool_used_bytes 0\n" in text


# -- with a GPU --------------------------------------------------------------------------------


@pytest.fixture
def cudashm(client: Any) -> Iterator[Any]:
    """tritonclient's CUDA shared-memory module. At the end the server lets go of
    the regions first (a region freed while another process has its handle open
    is undefined behaviour), then they are destroyed."""
    if load_runtime() is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    import tritonclient.utils.cuda_shared_memory as module

    yield module
    client.unregister_cuda_shared_memory()
    for handle in list(module.allocated_shared_memory_regions()):
        module.destroy_shared_memory_region(handle)


#: NVIDIA's CUDA shared-memory clients and the line each prints when every sum and
#: difference was right (they differ: the gRPC one says "cudashm").
CUDASHM_CLIENTS = [
    ("simple_http_cudashm_client.py", "http", "PASS: cuda shared memory"),
    ("simple_grpc_cudashm_client.py", "grpc", "PASS: cudashm"),
]


@pytest.mark.parametrize("script, protocol, passed", CUDASHM_CLIENTS)
def test_each_cudashm_client_prints_the_pass_line_expected_of_it(
    script: str, protocol: str, passed: str
) -> None:
    """The GPU test below waits for these lines; they are NVIDIA's, checked here on any host."""
    assert f'print("{passed}")' in (EXAMPLES / script).read_text()


@pytest.mark.gpu
@pytest.mark.parametrize("script, protocol, passed", CUDASHM_CLIENTS)
def test_nvidia_cudashm_clients(server, script: str, protocol: str, passed: str) -> None:  # type: ignore[no-untyped-def]
    if load_runtime() is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    url = server.url if protocol == "http" else server.grpc_url
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "-u", url], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert passed in run.stdout.splitlines(), run.stdout


def _module(client: Any) -> Any:
    return httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient


@pytest.mark.gpu
def test_register_status_unregister(client: Any, cudashm: Any) -> None:
    handle = cudashm.create_shared_memory_region("a", 4096, 0)
    client.register_cuda_shared_memory("a", cudashm.get_raw_handle(handle), 0, 4096)
    status = client.get_cuda_shared_memory_status()
    if isinstance(status, list):
        assert status == [{"name": "a", "device_id": 0, "byte_size": 4096}]
    else:
        assert (status.regions["a"].device_id, status.regions["a"].byte_size) == (0, 4096)
    with pytest.raises(InferenceServerException, match="already in manager"):
        client.register_cuda_shared_memory("a", cudashm.get_raw_handle(handle), 0, 4096)
    client.unregister_cuda_shared_memory("a")
    assert _names(client.get_cuda_shared_memory_status()) == []


@pytest.mark.gpu
def test_numeric_tensors_at_offsets(client: Any, cudashm: Any) -> None:
    module = _module(client)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    ins = cudashm.create_shared_memory_region("ins", 128, 0)
    outs = cudashm.create_shared_memory_region("outs", 128, 0)
    cudashm.set_shared_memory_region(ins, [a, b])  # a at 0, b at 64
    client.register_cuda_shared_memory("ins", cudashm.get_raw_handle(ins), 0, 128)
    client.register_cuda_shared_memory("outs", cudashm.get_raw_handle(outs), 0, 128)
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("ins", 64, offset=0)
    inputs[1].set_shared_memory("ins", 64, offset=64)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("outs", 64, offset=64)  # the sum second
    outputs[1].set_shared_memory("outs", 64, offset=0)
    result = client.infer("simple", inputs, outputs=outputs)
    meta = result.get_output("OUTPUT0")
    if module is httpclient:
        assert meta == {
            "name": "OUTPUT0",
            "datatype": "INT32",
            "shape": [1, 16],
        }  # no data: it is in the region
    else:
        assert (meta.datatype, list(meta.shape)) == ("INT32", [1, 16])
    both = cudashm.get_contents_as_numpy(outs, np.int32, [2, 16])
    np.testing.assert_array_equal(both[0], (a - b)[0])
    np.testing.assert_array_equal(both[1], (a + b)[0])


@pytest.mark.gpu
def test_bytes_tensors(client: Any, cudashm: Any) -> None:
    from tritonclient import utils

    module = _module(client)
    a = np.array([[str(i).encode() for i in range(16)]], dtype=object)
    b = np.array([[b"1"] * 16], dtype=object)
    wire_a, wire_b = utils.serialize_byte_tensor(a), utils.serialize_byte_tensor(b)
    size_a, size_b = utils.serialized_byte_size(wire_a), utils.serialized_byte_size(wire_b)
    ins = cudashm.create_shared_memory_region("sins", size_a + size_b, 0)
    cudashm.set_shared_memory_region(ins, [wire_a, wire_b])
    outs = cudashm.create_shared_memory_region("souts", 1024, 0)
    client.register_cuda_shared_memory("sins", cudashm.get_raw_handle(ins), 0, size_a + size_b)
    client.register_cuda_shared_memory("souts", cudashm.get_raw_handle(outs), 0, 1024)
    inputs = [module.InferInput("INPUT0", [1, 16], "BYTES"), module.InferInput("INPUT1", [1, 16], "BYTES")]
    inputs[0].set_shared_memory("sins", size_a, offset=0)
    inputs[1].set_shared_memory("sins", size_b, offset=size_a)
    outputs = [module.InferRequestedOutput("OUTPUT0")]
    outputs[0].set_shared_memory("souts", 1024)
    client.infer("simple_string", inputs, outputs=outputs)
    total = cudashm.get_contents_as_numpy(outs, np.object_, [1, 16])
    assert total.tolist() == [[str(i + 1).encode() for i in range(16)]]


@pytest.mark.gpu
def test_unregister_while_requests_use_the_region(client: Any, cudashm: Any) -> None:
    """A region unregistered between two requests is gone for the second; the first
    already finished with it, and a new registration of the same handle works."""
    module = _module(client)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    ins = cudashm.create_shared_memory_region("uins", 128, 0)
    cudashm.set_shared_memory_region(ins, [a, a])
    client.register_cuda_shared_memory("uins", cudashm.get_raw_handle(ins), 0, 128)
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("uins", 64)
    inputs[1].set_shared_memory("uins", 64, offset=64)
    result = client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
    client.unregister_cuda_shared_memory("uins")
    with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'uins'"):
        client.infer("simple", inputs)
    client.register_cuda_shared_memory("uins", cudashm.get_raw_handle(ins), 0, 128)
    np.testing.assert_array_equal(client.infer("simple", inputs).as_numpy("OUTPUT1"), a - a)
