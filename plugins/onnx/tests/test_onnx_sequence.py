"""A sequence model with implicit state and control inputs, served: the core feeds START,
CORRID and the state to the graph, and keeps the state output for the sequence's next request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx_testmodels import accumulator, add
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("onnx_sequence_repo")
    accumulator(root / "acc", "instance_group [{ kind: KIND_CPU count: 1 }]\n")
    proc = ServerProcess([root], log=tmp_path_factory.mktemp("logs") / "server.log")
    yield proc
    proc.stop()


def step(
    client: Any, module: Any, sequence: int, value: float, start: bool, end: bool
) -> tuple[float, float, int]:
    """One request of a sequence: (OUTPUT, STARTED, ID); the state never reaches the client."""
    tensor = module.InferInput("INPUT", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], np.float32))
    result = client.infer("acc", [tensor], sequence_id=sequence, sequence_start=start, sequence_end=end)
    response = result.get_response()
    outputs = response["outputs"] if isinstance(response, dict) else response.outputs
    names = sorted(o["name"] if isinstance(o, dict) else o.name for o in outputs)
    assert names == ["ID", "OUTPUT", "STARTED"]
    return (
        float(result.as_numpy("OUTPUT")[0, 0]),
        float(result.as_numpy("STARTED")[0, 0]),
        int(result.as_numpy("ID")[0, 0]),
    )


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequences_keep_their_own_state(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    base = 100 if protocol == "http" else 200
    try:
        assert step(client, module, base + 1, 1, True, False) == (1, 1, base + 1)
        assert step(client, module, base + 2, 10, True, False) == (10, 1, base + 2)
        assert step(client, module, base + 1, 2, False, False) == (3, 0, base + 1)
        assert step(client, module, base + 2, 20, False, True) == (30, 0, base + 2)
        assert step(client, module, base + 1, 3, False, True) == (6, 0, base + 1)
        # An id used again after its end starts from the initial state (zeros).
        assert step(client, module, base + 2, 5, True, True) == (5, 1, base + 2)
    finally:
        client.close()


def test_concurrent_sequences_batched_together_keep_their_sums(server: ServerProcess) -> None:
    """Six sequences at once on one instance (four batch slots): batches, waiting sequences."""
    sums: dict[int, list[float]] = {}

    def run(sequence: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            values = [float(sequence), 1.0, 2.0, 3.0]
            got = [
                step(client, grpcclient, sequence, v, i == 0, i == len(values) - 1)[0]
                for i, v in enumerate(values)
            ]
            sums[sequence] = got
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(300 + i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(sums) == [300 + i for i in range(6)]
    for sequence, got in sums.items():
        assert got == [sequence, sequence + 1, sequence + 3, sequence + 6]


def test_global_thread_pools_shared_by_every_session(tmp_path: Path) -> None:
    """``--backend-config=onnxruntime,enable-global-threadpool=1``: the process's pools, sized
    by the backend settings, serve every session (a process of its own: they outlive a server)."""
    accumulator(tmp_path / "acc", "instance_group [{ kind: KIND_CPU count: 2 }]\n")
    add(tmp_path / "add")
    flags = [
        "--backend-config=onnxruntime,enable-global-threadpool=1",
        "--backend-config=onnxruntime,intra_op_thread_count=1",
    ]
    proc = ServerProcess([tmp_path], *flags, log=tmp_path / "server.log")
    try:
        proc.wait_for_output("onnxruntime global thread pools: 1 intra-op, 0 inter-op threads")
        client = grpcclient.InferenceServerClient(proc.grpc_url)
        try:
            assert step(client, grpcclient, 1, 2, True, False) == (2, 1, 1)
            assert step(client, grpcclient, 1, 3, False, True) == (5, 0, 1)
            a = grpcclient.InferInput("A", [1, 3], "FP32")
            a.set_data_from_numpy(np.ones((1, 3), np.float32))
            b = grpcclient.InferInput("B", [1, 3], "FP32")
            b.set_data_from_numpy(np.full((1, 3), 2, np.float32))
            assert client.infer("add", [a, b]).as_numpy("SUM").tolist() == [[3, 3, 3]]
        finally:
            client.close()
    finally:
        proc.stop()
