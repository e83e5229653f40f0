"""A model update of a Python model (Triton's: only ``instance_group`` changed): the
stubs of kept instances go on serving, with the state their ``initialize`` made, new
ones start, removed ones end; requests sent meanwhile are all answered."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from tritonpy_serverprocess import ServerProcess  # noqa: E402

pytestmark = pytest.mark.integration

MODEL = """
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.born = os.getpid()  # made once per instance: a kept instance keeps it

    def execute(self, requests):
        time.sleep(0.2)  # long enough for concurrent requests to spread over the instances
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([self.born], np.int64))])
            for _ in requests
        ]
"""

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("repo")
    (repo / "pids" / "1").mkdir(parents=True)
    (repo / "pids" / "1" / "model.py").write_text(textwrap.dedent(MODEL))
    (repo / "pids" / "config.pbtxt").write_text(CONFIG)
    process = ServerProcess(
        [repo],
        "--model-control-mode=explicit",
        "--load-model=pids",
        log=tmp_path_factory.mktemp("logs") / "s.log",
    )
    try:
        yield process
    finally:
        process.stop()


def _pids(client: grpcclient.InferenceServerClient, n: int) -> set[int]:
    """The stubs that answered ``n`` requests sent at once."""
    x = grpcclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.zeros(1, np.float32))
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda _: client.infer("pids", [x]).as_numpy("PID")[0], range(n)))
    return {int(p) for p in results}


def _load_with_count(client: grpcclient.InferenceServerClient, count: int) -> None:
    config = client.get_model_config("pids", as_json=True)["config"]
    config["instance_group"][0]["count"] = count
    client.load_model("pids", config=json.dumps(config))


def test_kept_stubs_serve_on_and_new_ones_start(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        before = _pids(client, 8)
        assert len(before) == 2
        stop = threading.Event()
        failures: list[BaseException] = []

        def traffic() -> None:
            while not stop.is_set():
                try:
                    _pids(client, 2)
                except BaseException as exc:  # noqa: BLE001 - every failure is the test's
                    failures.append(exc)

        background = threading.Thread(target=traffic)
        background.start()
        try:
            _load_with_count(client, 3)
            grown = _pids(client, 8)
            _load_with_count(client, 1)
            shrunk = _pids(client, 4)
        finally:
            stop.set()
            background.join(60)
        assert not failures, failures[:3]
        assert before < grown and len(grown) == 3  # both stubs kept, one new
        assert len(shrunk) == 1 and shrunk < grown  # one of them kept
    finally:
        client.close()
