"""A KIND_GPU TorchScript model served by ``tritonpy serve`` writes an output into a client's
CUDA shared-memory region without a trip through host memory (``gpu``): over HTTP and gRPC
(tritonclient's ``cuda_shared_memory``), alone and in a batch mixing requests with and without
such a region. The values are checked in the region; that the output stayed on the GPU is the
backend's own line in the server's log (said once per output, the first time one is handed out
on the device). The in-process checks of the same path: test_device_outputs.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from torch_testmodels import OUT, double_and_halve
from tritonpy.memory import load_runtime
from tritonpy_cudaregions import Region, said_on_gpu, stays_on_gpu_line
from tritonpy_serverprocess import ServerProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.gpu,
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]

#: Four requests wait for each other (up to half a second) so that one batch mixes them.
BATCHING = "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 500000 }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    if load_runtime() is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    repo = tmp_path_factory.mktemp("device_outputs_repo")
    double_and_halve(repo / "gpu_http", "KIND_GPU")
    double_and_halve(repo / "gpu_grpc", "KIND_GPU")
    double_and_halve(repo / "gpu_batched", "KIND_GPU", extra=BATCHING)
    log = tmp_path_factory.mktemp("logs") / "server.log"
    proc = ServerProcess([repo], "--allow-client-shm=true", log=log)
    yield proc
    proc.stop()


def _request(module: Any, x: np.ndarray[Any, Any], region: Region | None) -> tuple[list[Any], list[Any]]:
    inputs = [module.InferInput("INPUT__0", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    out = module.InferRequestedOutput(OUT)
    if region is not None:
        out.set_shared_memory(region.name, x.nbytes)
    return inputs, [out, module.InferRequestedOutput("OUTPUT__1")]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_output_goes_into_a_cuda_region_without_the_host(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    x = np.random.default_rng(3).normal(size=(2, 4)).astype(np.float32)
    region = Region(client, f"out_{protocol}", x.nbytes)
    try:
        inputs, outputs = _request(module, x, region)
        result = client.infer(f"gpu_{protocol}", inputs, outputs=outputs)
        got = region.contents([2, 4])
        np.testing.assert_array_equal(got, x * 2, err_msg=f"the region holds {got}")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), x * 0.5)
    finally:
        region.close()
        client.close()
    assert said_on_gpu(server, f"gpu_{protocol}", OUT), (
        f"the server's log ({server.log}) never says {stays_on_gpu_line(f'gpu_{protocol}', OUT)!r}: "
        "the output went through the host"
    )


def test_a_batch_mixing_cuda_regions_and_plain_outputs(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url, concurrency=4)
    feeds = [np.full((1, 4), float(i + 1), np.float32) for i in range(4)]
    regions = [Region(client, f"mixed_{i}", 16) if i % 2 == 0 else None for i in range(4)]
    try:
        before = _executions(client)
        pending = []
        for x, region in zip(feeds, regions):
            inputs, outputs = _request(httpclient, x, region)
            pending.append(client.async_infer("gpu_batched", inputs, outputs=outputs))
        results = [p.get_result() for p in pending]
        executions = _executions(client) - before
        for i, (x, region, result) in enumerate(zip(feeds, regions, results)):
            if region is not None:
                np.testing.assert_array_equal(region.contents([1, 4]), x * 2, err_msg=f"request {i} (region)")
            else:
                np.testing.assert_array_equal(result.as_numpy(OUT), x * 2, err_msg=f"request {i} (plain)")
            np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), x * 0.5, err_msg=f"request {i}")
        assert executions < 4, f"the 4 requests ran in {executions} executions: no batch mixed them"
    finally:
        for region in regions:
            if region is not None:
                region.close()
        client.close()


def _executions(client: httpclient.InferenceServerClient) -> int:
    stats = client.get_inference_statistics("gpu_batched")["model_stats"][0]
    return int(stats["execution_count"])
