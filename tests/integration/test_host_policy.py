"""``--host-policy`` served for real: Python models report the CPU cores of the thread
that executes them (in a stub process, in process on a worker thread, under the
dynamic batcher), and the server's own threads stay unbound."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
        reason="needs two CPU cores this process may run on",
    ),
]

CORES = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        cores = np.array(sorted(os.sched_getaffinity(0)), dtype=np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("CORES", cores)]) for _ in requests]
"""


#: Starts a thread on its first execution, as a framework starts its thread pool, and
#: answers with the cores that thread may run on.
POOL = """
import os
import threading
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    pool = None

    def execute(self, requests):
        if self.pool is None:
            seen = []
            worker = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
            worker.start()
            worker.join()
            self.pool = np.array(seen[0], dtype=np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("CORES", self.pool)]) for _ in requests]
"""

WARMUP = (
    'model_warmup [{ name: "w" batch_size: 1 inputs { key: "IN" '
    "value: { data_type: TYPE_INT32 dims: [1] zero_data: true } } }]\n"
)


def _model(repo: Path, name: str, group: str = "", extra: str = "", code: str = CORES) -> None:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(code)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]\n'
        'output [{ name: "CORES" data_type: TYPE_INT32 dims: [-1] }]\n'
        f"instance_group [{{ kind: KIND_CPU {group} }}]\n{extra}"
    )


IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'


@pytest.fixture(scope="module")
def cores() -> tuple[int, int]:
    """Two cores this process may run on: the first for policy ``cpu``, the second
    for policy ``second``."""
    first, second, *_ = sorted(os.sched_getaffinity(0))
    return first, second


@pytest.fixture(scope="module")
def server(
    server_factory: Any, tmp_path_factory: pytest.TempPathFactory, cores: tuple[int, int]
) -> ServerProcess:
    repo = tmp_path_factory.mktemp("hostpolicy")
    _model(repo, "stub")  # KIND_CPU: policy "cpu"
    _model(repo, "in_process", 'host_policy: "second"', IN_PROCESS)
    _model(repo, "batched", 'host_policy: "second"', IN_PROCESS + "dynamic_batching { }\n")
    _model(repo, "unbound", 'host_policy: "nowhere"', IN_PROCESS)  # a name no flag defines
    _model(repo, "warmed", 'host_policy: "second"', IN_PROCESS + WARMUP, POOL)
    first, second = cores
    return server_factory(  # type: ignore[no-any-return]
        [repo],
        f"--host-policy=cpu,cpu-cores={first}-{first}",
        f"--host-policy=second,cpu-cores={second}-{second}",
        "--host-policy=second,numa-node=0",
    )


def _cores(client: Any, module: Any, model: str) -> list[int]:
    inp = module.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([1], dtype=np.int32))
    return client.infer(model, [inp]).as_numpy("CORES").tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_instances_run_on_their_policys_cores(
    server: ServerProcess, cores: tuple[int, int], module: Any
) -> None:
    first, second = cores
    client = module.InferenceServerClient(server.url if module is httpclient else server.grpc_url)
    everywhere = sorted(os.sched_getaffinity(0))
    for _ in range(3):  # the first request and the later ones alike
        assert _cores(client, module, "stub") == [first]  # the stub process, started bound
        assert _cores(client, module, "in_process") == [second]  # its worker, never the caller
        assert _cores(client, module, "batched") == [second]  # the batcher's worker
        assert _cores(client, module, "unbound") == everywhere
        # its "pool" was started by the warmup, on the loading thread bound for it
        assert _cores(client, module, "warmed") == [second]


def test_the_servers_own_threads_stay_unbound(server: ServerProcess, cores: tuple[int, int]) -> None:
    """Instances initialize (and warm up) on bound threads and put them back as they
    were: only the bound in-process instances' threads are bound; the main thread (the
    event loop) and every other thread keep every core."""
    _cores(httpclient.InferenceServerClient(server.url), httpclient, "in_process")
    everywhere = set(os.sched_getaffinity(0))
    allowed = {}
    for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
        status = (task / "status").read_text()
        allowed[int(task.name)] = _cpu_list(status.split("Cpus_allowed_list:")[1].split()[0])
    assert allowed[server.proc.pid] == everywhere
    bound = sorted(tid for tid, cpus in allowed.items() if cpus != everywhere)
    # the workers of in_process, batched and warmed (warmed's "pool" thread has ended)
    assert len(bound) == 3 and all(allowed[tid] == {cores[1]} for tid in bound), allowed


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def test_a_policy_this_host_cannot_meet_fails_the_load(
    server_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    repo = tmp_path_factory.mktemp("badpolicy")
    _model(repo, "stub")
    _model(repo, "fine", 'host_policy: "fine"')
    bad = server_factory(
        [repo], "--host-policy=cpu,cpu-cores=4000-4000", "--exit-on-error=false", "--strict-readiness=false"
    )
    client = httpclient.InferenceServerClient(bad.url)
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["stub"]["state"] == "UNAVAILABLE"
    assert "Unable to set NUMA thread affinity: Invalid argument" in index["stub"]["reason"]
    assert _cores(client, httpclient, "fine") == sorted(os.sched_getaffinity(0))
    with pytest.raises(InferenceServerException, match="'stub'"):
        _cores(client, httpclient, "stub")
