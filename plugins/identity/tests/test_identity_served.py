"""The identity backend served by ``tritonpy serve`` (in one process, and with two front-end
worker processes): a Triton-style repository of identity models and an ensemble of two identity
steps, with tritonclient over HTTP and gRPC; inputs and outputs in system shared memory; the
response parameters on the wire; ``input_byte_size_counter`` on the metrics port."""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonpy_serverprocess import ServerProcess

pytestmark = [pytest.mark.integration]


def _pair(data_type: str, max_batch_size: int, extra: str = "") -> str:
    return (
        f'backend: "identity"\nmax_batch_size: {max_batch_size}\n'
        f'input [ {{ name: "INPUT0" data_type: {data_type} dims: [ -1 ] }} ]\n'
        f'output [ {{ name: "OUTPUT0" data_type: {data_type} dims: [ -1 ] }} ]\n' + extra
    )


ENSEMBLE = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "step"
      model_version: -1
      input_map { key: "INPUT0" value: "IN" }
      output_map { key: "OUTPUT0" value: "middle" }
    },
    {
      model_name: "step"
      model_version: -1
      input_map { key: "INPUT0" value: "middle" }
      output_map { key: "OUTPUT0" value: "OUT" }
    }
  ]
}
"""

REPOSITORY = {
    "identity_fp32": _pair(
        "TYPE_FP32",
        8,
        "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
        "dynamic_batching { max_queue_delay_microseconds: 1000 }\n",
    ),
    "identity_bytes": _pair("TYPE_STRING", 0),
    "counted": _pair("TYPE_INT32", 0),
    "step": _pair("TYPE_FP32", 8, "dynamic_batching {}\n"),
    "ens": ENSEMBLE,
    "traced": _pair(
        "TYPE_FP32", 0, 'parameters { key: "enable_custom_tracing" value { string_value: "true" } }\n'
    ),
}

PARAMETERS = {"param0": "an example string parameter", "param1": 42, "param2": False, "param3": 123.123}


@pytest.fixture(scope="module", params=[1, 2], ids=["one_process", "frontend_workers_2"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The repository served by one process, then with two front-end worker processes (inputs
    then arrive in the workers' shared-memory arenas, and the outputs are those very blocks)."""
    repo = tmp_path_factory.mktemp("identity_repo")
    for name, config in REPOSITORY.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    log = tmp_path_factory.mktemp("logs") / "server.log"
    proc = ServerProcess([repo], "--allow-client-shm=true", log=log, frontend_workers=request.param)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, http: Any, grpc: Any) -> tuple[Any, Any]:
    return (http, httpclient) if request.param == "http" else (grpc, grpcclient)


def _infer(client: Any, module: Any, model: str, name: str, x: np.ndarray[Any, Any], dt: str) -> Any:
    tensor = module.InferInput(name, list(x.shape), dt)
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor])


def _parameters(module: Any, result: Any) -> dict[str, Any]:
    response = result.get_response()
    if module is httpclient:
        return dict(response.get("parameters", {}))
    out: dict[str, Any] = {}
    for key, value in response.parameters.items():
        out[key] = getattr(value, value.WhichOneof("parameter_choice"))
    return out


def _counter(server: ServerProcess, model: str) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as r:
        text = r.read().decode()
    found = re.search(rf'^input_byte_size_counter{{model="{model}",version="1"}} (\S+)$', text, re.M)
    assert found is not None, text
    return float(found.group(1))


def test_every_model_is_ready(http: httpclient.InferenceServerClient) -> None:
    index = {m["name"]: m.get("state") for m in http.get_model_repository_index()}
    assert index == {name: "READY" for name in REPOSITORY}


def test_outputs_are_the_inputs(client: tuple[Any, Any]) -> None:
    c, module = client
    x = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    result = _infer(c, module, "identity_fp32", "INPUT0", x, "FP32")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
    assert _parameters(module, result) == PARAMETERS
    words = np.array([b"", b"\x00\x01\xfe", "grüß".encode()], np.object_)
    result = _infer(c, module, "identity_bytes", "INPUT0", words, "BYTES")
    assert result.as_numpy("OUTPUT0").tolist() == words.tolist()


def test_an_ensemble_of_identities_returns_the_input(client: tuple[Any, Any], server: ServerProcess) -> None:
    c, module = client
    before = _counter(server, "step")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    result = _infer(c, module, "ens", "IN", x, "FP32")
    np.testing.assert_array_equal(result.as_numpy("OUT"), x)
    assert _counter(server, "step") - before == 2 * x.nbytes  # each step answered the input


def test_the_metric_counts_the_bytes_sent(server: ServerProcess, http: Any, grpc: Any) -> None:
    before = _counter(server, "counted")
    x = np.arange(5, dtype=np.int32)
    _infer(http, httpclient, "counted", "INPUT0", x, "INT32")
    assert _counter(server, "counted") - before == 20
    _infer(grpc, grpcclient, "counted", "INPUT0", x, "INT32")
    assert _counter(server, "counted") - before == 40


def test_shared_memory_in_and_out(client: tuple[Any, Any]) -> None:
    """The input read from a client's region, the output written to another, and to the
    input's own bytes (the same region and offset)."""
    c, module = client
    x = np.arange(8, dtype=np.float32).reshape(1, 8) * 1.5
    size = x.nbytes
    tag = f"{os.getpid()}_{module.__name__.split('.')[-1]}"
    regions = {"in": f"identity_in_{tag}", "out": f"identity_out_{tag}"}
    handles = {k: shm.create_shared_memory_region(name, "/" + name, size) for k, name in regions.items()}
    try:
        shm.set_shared_memory_region(handles["in"], [x])
        for name in regions.values():
            c.register_system_shared_memory(name, "/" + name, size)
        for target in ("out", "in"):
            tensor = module.InferInput("INPUT0", list(x.shape), "FP32")
            tensor.set_shared_memory(regions["in"], size)
            out = module.InferRequestedOutput("OUTPUT0")
            out.set_shared_memory(regions[target], size)
            result = c.infer("identity_fp32", [tensor], outputs=[out])
            assert result.get_output("OUTPUT0") is not None
            got = shm.get_contents_as_numpy(handles[target], np.float32, list(x.shape))
            np.testing.assert_array_equal(got, x)
    finally:
        c.unregister_system_shared_memory()
        for handle in handles.values():
            shm.destroy_shared_memory_region(handle)


def test_concurrent_requests_each_get_their_own_data(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url, concurrency=8)
    try:
        rows = [np.full((1, 4), float(i), np.float32) for i in range(16)]
        pending = []
        for row in rows:
            tensor = httpclient.InferInput("INPUT0", list(row.shape), "FP32")
            tensor.set_data_from_numpy(row)
            pending.append(client.async_infer("identity_fp32", [tensor]))
        for row, request in zip(rows, pending):
            np.testing.assert_array_equal(request.get_result().as_numpy("OUTPUT0"), row)
    finally:
        client.close()


def test_a_custom_tracing_model_answers_untraced_requests_as_any(client: tuple[Any, Any]) -> None:
    """Tracing is off here: its custom activities (test_identity_tracing.py) are not reported."""
    c, module = client
    x = np.arange(4, dtype=np.float32)
    result = _infer(c, module, "traced", "INPUT0", x, "FP32")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)


def test_the_model_config_is_served_as_written(http: httpclient.InferenceServerClient) -> None:
    config = http.get_model_config("identity_fp32")
    assert config["backend"] == "identity"
    assert [i["name"] for i in config["input"]] == ["INPUT0"]
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
