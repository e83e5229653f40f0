"""``tritonpy serve --model-namespacing=true`` to the unmodified tritonclient (HTTP and
gRPC), on repositories laid out as Triton's QA test L0_model_namespacing lays
them out: each repository has an ensemble and a Python model ``composing_model``
whose ``model.py`` only imports its class (with ``auto_complete_config``) from a
shared module. Status codes and messages are those the real Triton 2.51 gave."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

#: The shared module: OUTPUT0 = INPUT0 + SIGN * INPUT1, OUTPUT1 = INPUT0 - SIGN * INPUT1,
#: its config completed by the model itself (the folders have no config.pbtxt).
SHARED = """
import numpy as np
import triton_python_backend_utils as pb_utils

SIGN = {sign}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for name in ("INPUT0", "INPUT1"):
            config.add_input({{"name": name, "data_type": "TYPE_INT32", "dims": [4]}})
        for name in ("OUTPUT0", "OUTPUT1"):
            config.add_output({{"name": name, "data_type": "TYPE_INT32", "dims": [4]}})
        return config

    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            tensors = [pb_utils.Tensor("OUTPUT0", a + SIGN * b), pb_utils.Tensor("OUTPUT1", a - SIGN * b)]
            out.append(pb_utils.InferenceResponse(tensors))
        return out
"""

ENSEMBLE = """
platform: "ensemble"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "composing_model" model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" } input_map { key: "INPUT1" value: "INPUT1" }
  output_map { key: "OUTPUT0" value: "OUTPUT0" } output_map { key: "OUTPUT1" value: "OUTPUT1" } } ] }
"""

AMBIGUOUS = (
    "There are 2 identifiers of model 'composing_model' in global map, "
    "model namespace must be provided to resolve ambiguity."
)

A = np.array([5, 6, 7, 8], np.int32)
B = np.array([1, 1, 1, 1], np.int32)


def _write(tmp: Path) -> list[Path]:
    shared = tmp / "shared"
    shared.mkdir()
    repos = []
    for kind, sign in (("addsub", 1), ("subadd", -1)):
        (shared / f"ns_{kind}.py").write_text(SHARED.format(sign=sign))
        repo = tmp / f"{kind}_repo"
        (repo / "composing_model" / "1").mkdir(parents=True)
        (repo / "composing_model" / "1" / "model.py").write_text(f"from ns_{kind} import *\n")
        (repo / f"simple_{kind}" / "1").mkdir(parents=True)
        (repo / f"simple_{kind}" / "config.pbtxt").write_text(textwrap.dedent(ENSEMBLE))
        repos.append(repo)
    return repos


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, list[Path]]]:
    tmp = tmp_path_factory.mktemp("namespacing")
    repos = _write(tmp)
    server = ServerProcess(
        repos,
        "--model-namespacing=true",
        log=tmp / "server.log",
        env={"PYTHONPATH": str(tmp / "shared"), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        with httpclient.InferenceServerClient(server.url) as client:
            assert client.is_server_ready(), server.output()
        yield server, repos
    finally:
        server.stop()


def _inputs(module):  # type: ignore[no-untyped-def]
    inputs = [module.InferInput("INPUT0", [4], "INT32"), module.InferInput("INPUT1", [4], "INT32")]
    inputs[0].set_data_from_numpy(A)
    inputs[1].set_data_from_numpy(B)
    return inputs


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_ensemble_runs_its_own_repository_s_model(
    served: tuple[ServerProcess, list[Path]], protocol: str
) -> None:
    server, _ = served
    module = httpclient if protocol == "http" else grpcclient
    url = server.url if protocol == "http" else server.grpc_url
    client = module.InferenceServerClient(url)
    try:
        add = client.infer("simple_addsub", _inputs(module))
        np.testing.assert_array_equal(add.as_numpy("OUTPUT0"), A + B)
        sub = client.infer("simple_subadd", _inputs(module))
        np.testing.assert_array_equal(sub.as_numpy("OUTPUT0"), A - B)
        with pytest.raises(InferenceServerException) as err:
            client.infer("composing_model", _inputs(module))
        assert err.value.message() == AMBIGUOUS
        if protocol == "grpc":
            assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="ambiguity"):
            client.get_model_metadata("composing_model")
        assert not client.is_model_ready("composing_model")
        assert client.is_model_ready("simple_addsub")
    finally:
        client.close()


def test_http_status_index_metrics_and_log(served: tuple[ServerProcess, list[Path]]) -> None:
    server, repos = served
    base = f"http://{server.url}"
    answer = httpx.post(f"{base}/v2/models/composing_model/infer", json={"inputs": []})
    assert (answer.status_code, answer.json()) == (400, {"error": AMBIGUOUS})
    answer = httpx.get(f"{base}/v2/models/nosuch")
    assert answer.status_code == 400
    assert answer.json() == {"error": "Request for unknown model: 'nosuch' is not found"}
    answer = httpx.get(f"{base}/v2/models/composing_model/stats")
    assert answer.status_code == 400
    assert answer.json() == {"error": "requested model 'composing_model' is not available"}
    index = httpx.post(f"{base}/v2/repository/index", json={}).json()
    assert [(e["name"], e["state"]) for e in index] == [
        ("composing_model", "READY"),
        ("simple_addsub", "READY"),
        ("composing_model", "READY"),
        ("simple_subadd", "READY"),
    ]
    stats = httpx.get(f"{base}/v2/models/stats").json()["model_stats"]
    names = sorted(s["name"] for s in stats)
    assert names == ["composing_model", "composing_model", "simple_addsub", "simple_subadd"]
    metrics = httpx.get(server.metrics_url).text
    log = server.output()
    for repo in repos:
        assert f'nv_inference_count{{model="composing_model",namespace="{repo}",version="1"}}' in metrics
        # the table at start and the load lines name each model as Triton's do
        assert f"| {repo}::composing_model " in log
        assert f"successfully loaded '{repo}::composing_model' version 1" in log
