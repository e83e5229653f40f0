"""Model control against a real server with tritonclient, HTTP and gRPC.

One server in explicit mode serves a repository of the example ONNX model
``simple``, a Python model ``scaled`` (Y = X * k) and a few copies; the tests
load, reload, override and unload them as NVIDIA's model control examples do,
and reload ``scaled`` over and over under 8 concurrent clients.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SCALED = """
import numpy as np
import triton_python_backend_utils as pb_utils

K = {k}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * K)]))
        return responses
"""

SCALED_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 1}],
}


def _pbtxt(config: dict[str, Any]) -> str:
    from google.protobuf import json_format, text_format
    from tritonpy.config import ModelConfig

    return text_format.MessageToString(json_format.ParseDict(config, ModelConfig()))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``simple`` (ONNX), ``scaled`` (Python, k=2) and five more: seven models."""
    repo = tmp_path_factory.mktemp("control")
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    for name, k in (("scaled", 2), ("p1", 1), ("p2", 1), ("p3", 1), ("p4", 1), ("p5", 1)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(SCALED.format(k=k))
        (repo / name / "config.pbtxt").write_text(_pbtxt(SCALED_CONFIG))
    return repo


@pytest.fixture(scope="module")
def server(server_factory, repo: Path):  # type: ignore[no-untyped-def]
    return server_factory([repo], "--model-control-mode=explicit", "--load-model=scaled")


@pytest.fixture
def client_of(server) -> Iterator[Callable[[Any], Any]]:  # type: ignore[no-untyped-def]
    """``client_of(httpclient or grpcclient)``: a client of ``server``, closed after the test
    on this thread. An HTTP client left to the garbage collector may be collected on another
    test's client thread, where its gevent hub is missing, and fail that test."""
    made: list[Any] = []

    def make(module: Any, **kwargs: Any) -> Any:
        client = module.InferenceServerClient(
            server.url if module is httpclient else server.grpc_url, **kwargs
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def _x(module: Any) -> list[Any]:
    x = module.InferInput("X", [4], "FP32")
    x.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return [x]


def _scale(client: Any, module: Any) -> float:
    return float(client.infer("scaled", _x(module)).as_numpy("Y")[1])


def _simple_inputs(module: Any) -> list[Any]:
    inputs = [module.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(np.ones((1, 16), np.int32))
    return inputs


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_nvidia_model_control_sequence(client_of, module: Any) -> None:  # type: ignore[no-untyped-def]
    """The steps of NVIDIA's simple_{http,grpc}_model_control.py examples."""
    client = client_of(module)
    index = client.get_model_repository_index()
    names = [m["name"] for m in index] if module is httpclient else [m.name for m in index.models]
    assert sorted(set(names)) == ["p1", "p2", "p3", "p4", "p5", "scaled", "simple"]
    client.load_model("simple")
    assert client.is_model_ready("simple")
    with pytest.raises(InferenceServerException, match="failed to load"):
        client.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert client.is_model_ready("simple")  # the bad override changed nothing
    client.load_model("simple", config='{"max_batch_size":"16"}')  # the rest from the ONNX file
    config = client.get_model_config("simple")
    assert (config["max_batch_size"] if module is httpclient else config.config.max_batch_size) == 16
    out = client.infer("simple", _simple_inputs(module)).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, np.full((1, 16), 2, np.int32))
    client.unload_model("simple")
    assert not client.is_model_ready("simple")
    if module is grpcclient:  # the gRPC example's oversized path component
        with pytest.raises(InferenceServerException) as raised:
            client.load_model("simple", config="{}", files={"file:" + "A" * 256: b"a"})
        assert raised.value.status() == "StatusCode.INTERNAL"
        assert "failed to poll from model repository" in raised.value.message()
        assert client.is_server_live()
    with pytest.raises(InferenceServerException, match="failed to load"):
        client.load_model("wrong_model_name")


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_file_overrides_change_behaviour_and_stay_inside(
    client_of, module: Any, repo: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    client = client_of(module)
    config = json.dumps(SCALED_CONFIG)
    client.load_model("p1", config=config, files={"file:1/model.py": SCALED.format(k=7).encode()})
    assert float(client.infer("p1", _x(module)).as_numpy("Y")[1]) == 7.0
    assert "K = 1" in (repo / "p1" / "1" / "model.py").read_text()  # the repository is untouched
    for name in ("../../escape.py", "1/../../escape.py"):
        with pytest.raises(InferenceServerException) as raised:
            client.load_model("p1", config=config, files={f"file:{name}": b"x = 1"})
        assert f"file parameter 'file:{name}'" in raised.value.message()
        status = raised.value.status()
        assert status in ("400", "StatusCode.INVALID_ARGUMENT"), status
    # A leading "/" starts at the model folder, as Triton joins it: tmp/escape.py there,
    # and no version folder, so the load fails for want of a version.
    with pytest.raises(InferenceServerException, match="no version directory found for model 'p1'"):
        client.load_model("p1", config=config, files={"file:/tmp/escape.py": b"x = 1"})
    assert not (repo.parent / "escape.py").exists() and not Path("/tmp/escape.py").exists()
    assert float(client.infer("p1", _x(module)).as_numpy("Y")[1]) == 7.0  # still the override
    client.load_model("p1")  # the repository's own files again
    assert float(client.infer("p1", _x(module)).as_numpy("Y")[1]) == 1.0
    client.unload_model("p1")


def test_index_states_and_unload_over_http(client_of) -> None:  # type: ignore[no-untyped-def]
    client = client_of(httpclient)
    client.load_model("p2")
    assert {"name": "p2", "version": "1", "state": "READY"} in client.get_model_repository_index()
    client.unload_model("p2", unload_dependents=True)
    with pytest.raises(InferenceServerException, match="'p2' has no available versions"):
        client.infer("p2", _x(httpclient))
    grpc = client_of(grpcclient)
    for _ in range(500):
        rows = [m for m in grpc.get_model_repository_index().models if m.name == "p2"]
        if rows and rows[0].state == "UNAVAILABLE":
            break
        threading.Event().wait(0.02)
    assert (rows[0].version, rows[0].state, rows[0].reason) == ("1", "UNAVAILABLE", "unloaded")


def test_reloads_under_8_clients_fail_no_request(server) -> None:  # type: ignore[no-untyped-def]
    """Four HTTP and four gRPC clients infer while ``scaled`` is reloaded again and again:
    with a config override changing its instance count, with a file override changing
    what it computes, and plainly (back to the repository's own). No request fails, and
    once a load returned every request sees what it loaded."""
    stop = threading.Event()
    failures: list[str] = []
    counts = [0] * 8

    def client_loop(index: int) -> None:
        module = httpclient if index < 4 else grpcclient
        client = module.InferenceServerClient(server.url if module is httpclient else server.grpc_url)
        try:
            while not stop.is_set():
                try:
                    value = _scale(client, module)
                    assert value in (2.0, 3.0, 5.0, 8.0), value
                    counts[index] += 1
                except Exception as exc:  # every failure is a finding
                    failures.append(f"{module.__name__}: {exc!r}")
        finally:
            client.close()  # on its own thread: an HTTP client's gevent hub is per thread

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    control = httpclient.InferenceServerClient(server.url, network_timeout=120)
    check = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for round_, k in enumerate((3, 5, 8)):
            two = {**SCALED_CONFIG, "instance_group": [{"kind": "KIND_CPU", "count": 2 - round_ % 2}]}
            control.load_model("scaled", config=json.dumps(two))
            assert _scale(check, grpcclient) == 2.0
            control.load_model(
                "scaled", config=json.dumps(two), files={"file:1/model.py": SCALED.format(k=k).encode()}
            )
            assert _scale(check, grpcclient) == float(k)  # the new model, at once
            control.load_model("scaled")
            assert _scale(check, grpcclient) == 2.0
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        control.close()
        check.close()
    assert failures == []
    assert all(counts), counts
    assert "Traceback" not in server.output()


def test_a_config_that_does_not_parse_is_a_repository_failure(server, client_of, repo: Path) -> None:  # type: ignore[no-untyped-def]
    """As Triton 2.51 answers (observed): a repository ``config.pbtxt`` that does not
    parse fails the load with 500 / INTERNAL "failed to load 'm', failed to poll from
    model repository" (the client made no mistake), over HTTP and gRPC."""
    import httpx

    broken = repo / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.py").write_text(SCALED.format(k=1))
    (broken / "config.pbtxt").write_text('backend: "python"\ninput [ { name: "X"\n')
    try:
        answer = httpx.post(f"http://{server.url}/v2/repository/models/broken/load")
        assert answer.status_code == 500
        assert answer.headers["content-type"] == "application/json"
        message = answer.json()["error"]
        assert message.startswith("failed to load 'broken', failed to poll from model repository: ")
        assert "failed to read text proto from" in message
        with pytest.raises(InferenceServerException) as raised:
            client_of(grpcclient).load_model("broken")
        assert raised.value.status() == "StatusCode.INTERNAL"
        assert raised.value.message().startswith(
            "failed to load 'broken', failed to poll from model repository"
        )
        with pytest.raises(InferenceServerException) as raised:  # a client's mistake stays 400
            client_of(httpclient).load_model("broken", config="{not json")
        assert raised.value.status() == "400"
    finally:
        shutil.rmtree(broken)


def test_the_index_lists_the_repository_folders_only(server, client_of) -> None:  # type: ignore[no-untyped-def]
    """As Triton 2.51 lists them (observed): a model loaded from a load request's
    files under a name no repository folder has serves, but is not in the index."""
    import httpx

    client = client_of(httpclient)
    config = json.dumps(SCALED_CONFIG)
    client.load_model("outside", config=config, files={"file:1/model.py": SCALED.format(k=3).encode()})
    try:
        assert float(client.infer("outside", _x(httpclient)).as_numpy("Y")[1]) == 3.0
        assert "outside" not in [m["name"] for m in client.get_model_repository_index()]
        ready = client_of(grpcclient).get_model_repository_index(as_json=True)
        assert "outside" not in [m["name"] for m in ready["models"]]
        answer = httpx.post(f"http://{server.url}/v2/repository/index", json={"ready": True})
        assert "outside" not in [m["name"] for m in answer.json()]
    finally:
        client.unload_model("outside")
