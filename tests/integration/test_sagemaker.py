"""Triton's SageMaker front end served for real (``--allow-sagemaker``): the routes
SageMaker calls, with the answers Triton 2.51 gives them (asked of the reference server)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from tritonpy_addsub import addsub_inputs, addsub_repo
from tritonpy_serverprocess import ServerProcess, free_port

pytestmark = pytest.mark.integration

MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="


def _start(tmp_path: Path, env: dict[str, str], *flags: str) -> tuple[ServerProcess, str]:
    port = free_port()
    flags = ("--allow-sagemaker=true", f"--sagemaker-port={port}", *flags)
    proc = ServerProcess([addsub_repo(tmp_path / "repo")], *flags, log=tmp_path / "server.log", env=env)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sagemaker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("sagemaker")
    proc, url = _start(tmp, {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "addsub"})
    yield proc, url
    proc.stop()


def test_ping_and_json_invocations(sagemaker: Any) -> None:
    proc, url = sagemaker
    proc.wait_for_output("Started Sagemaker HTTPService at 127.0.0.1")
    ping = httpx.get(f"{url}/ping", timeout=10)
    assert (ping.status_code, ping.content, ping.headers["content-type"]) == (200, b"", "text/plain")
    answer = httpx.post(f"{url}/invocations", json=addsub_inputs(False), timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    outputs = {o["name"]: o["data"] for o in answer.json()["outputs"]}
    assert outputs == {"SUM": [11.0, 22.0], "DIFF": [-9.0, -18.0]}


def test_binary_invocations_announce_the_header_size_in_the_content_type(sagemaker: Any) -> None:
    _, url = sagemaker
    header = json.dumps(addsub_inputs(True)).encode()
    body = header + struct.pack("<2f", 1, 2) + struct.pack("<2f", 10, 20)
    answer = httpx.post(
        f"{url}/invocations", content=body, headers={"content-type": f"{MIME}{len(header)}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    content_type = answer.headers["content-type"]
    assert content_type.startswith(MIME)
    size = int(content_type[len(MIME) :])
    assert json.loads(answer.content[:size])["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert struct.unpack("<2f", answer.content[size:]) == (11.0, 22.0)
    assert "inference-header-content-length" not in answer.headers


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "body"),
    [
        ("POST", "/ping", {}, 405, b'{"error":"Method Not Allowed"}'),
        ("GET", "/invocations", {}, 405, b'{"error":"Method Not Allowed"}'),
        (
            "POST",
            "/invocations",
            {"content": b"{}", "headers": {"content-type": f"x/y;{MIME}2"}},
            400,
            json.dumps(
                {"error": f"expect MIME type for binary data starts with '{MIME}', got: x/y;{MIME}2"},
                separators=(",", ":"),
            ).encode(),
        ),
        (
            "POST",
            "/invocations",
            {"content": b"{}", "headers": {"content-type": f"{MIME}99"}},
            400,
            b'{"error":"inference header size should be in range (0, 2), got: 99"}',
        ),
        ("GET", "/models", {}, 200, b'{"models":[]}'),
        (
            "POST",
            "/models",
            {"json": {"model_name": "h", "url": "/opt/ml/models/h/model"}},
            400,
            b'{"error":"repository registration is not allowed if model control mode is not EXPLICIT"}',
        ),
        ("GET", "/v2/health/ready", {}, 400, b""),
        ("GET", "/nope", {}, 400, b""),
    ],
)
def test_answers_as_triton_gives_them(
    sagemaker: Any, method: str, path: str, kwargs: dict[str, Any], status: int, body: bytes
) -> None:
    _, url = sagemaker
    answer = httpx.request(method, f"{url}{path}", timeout=10, **kwargs)
    assert (answer.status_code, answer.content) == (status, body)
    assert answer.headers["content-type"] == "text/plain"


def test_a_bad_request_and_a_wrong_model(sagemaker: Any) -> None:
    _, url = sagemaker
    z = {"name": "Z", "datatype": "FP32", "shape": [1], "data": [1]}
    wrong = httpx.post(f"{url}/invocations", json={"inputs": [z]}, timeout=30)
    assert wrong.status_code == 400
    assert "expected 2 inputs but got 1 inputs for model 'addsub'" in wrong.json()["error"]


def test_generate_and_an_unset_model(tmp_path: Path) -> None:
    env = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "addsub", "SAGEMAKER_TRITON_INFERENCE_TYPE": "generate"}
    proc, url = _start(tmp_path / "generate", env)
    try:
        answer = httpx.post(f"{url}/invocations", json={"A": [1, 2], "B": [3, 4]}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["SUM"] == [4.0, 6.0]
    finally:
        proc.stop()
    proc, url = _start(tmp_path / "unset", {})
    try:
        answer = httpx.post(f"{url}/invocations", json=addsub_inputs(False), timeout=30)
        assert answer.status_code == 404
        assert "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in answer.json()["error"]
    finally:
        proc.stop()


# -- the multi-model endpoint (SageMaker MME) ---------------------------------------------------

KEY = {"mme-key": "secret"}  # the model-repository group is restricted on this server

ENSEMBLE = """name: "ens"
platform: "ensemble"
max_batch_size: 8
input [{ name: "A" data_type: TYPE_FP32 dims: [2] }, { name: "B" data_type: TYPE_FP32 dims: [2] }]
output [{ name: "TOTAL" data_type: TYPE_FP32 dims: [2] }]
ensemble_scheduling { step [{ model_name: "addsub" model_version: -1
  input_map { key: "A" value: "A" } input_map { key: "B" value: "B" }
  output_map { key: "SUM" value: "TOTAL" } }] }
"""

FAILING = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if "{when}" == "load":
            raise MemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def execute(self, requests):
        raise MemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
"""


def _failing_model(folder: Path, when: str) -> None:
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(FAILING.replace("{when}", when))
    (folder / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "A" data_type: TYPE_FP32 dims: [2] }, { name: "B" data_type: TYPE_FP32 dims: [2] }]\n'
        'output [{ name: "SUM" data_type: TYPE_FP32 dims: [2] }]\n'
    )


@pytest.fixture(scope="module")
def mme(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An explicit-mode server with an empty repository and SageMaker's models folder
    holding: ``one`` (a folder with one model), ``flat`` (the model itself), ``ens`` (an
    ensemble and its member), ``oom`` and ``oomload`` (models that run out of memory)."""
    tmp = tmp_path_factory.mktemp("mme")
    root = tmp / "models"
    addsub_repo(root / "one" / "model")
    addsub_repo(root / "flat")
    (root / "flat" / "addsub").rename(root / "flat" / "model")
    addsub_repo(root / "ens" / "model")
    (root / "ens" / "model" / "ens" / "1").mkdir(parents=True)
    (root / "ens" / "model" / "ens" / "config.pbtxt").write_text(ENSEMBLE)
    _failing_model(root / "oom" / "model", "execute")
    _failing_model(root / "oomload" / "model", "load")
    (tmp / "empty").mkdir()
    port = free_port()
    proc = ServerProcess(
        [tmp / "empty"],
        "--model-control-mode=explicit",
        "--allow-sagemaker=true",
        f"--sagemaker-port={port}",
        f"--sagemaker-models-root={root}",
        "--http-restricted-api=model-repository:mme-key=secret",
        log=tmp / "server.log",
    )
    yield proc, f"http://127.0.0.1:{port}", root
    proc.stop()


def _load(url: str, name: str, archive: Path, target: str | None = None) -> httpx.Response:
    headers = {**KEY, **({"X-Amzn-SageMaker-Target-Model": target} if target else {})}
    body = {"model_name": name, "url": str(archive)}
    return httpx.post(f"{url}/models", json=body, headers=headers, timeout=60)


def _index(proc: ServerProcess, ready: bool = False) -> list[dict[str, str]]:
    """The repository index, asked of the server's HTTP front end."""
    answer = httpx.post(
        f"http://{proc.url}/v2/repository/index", json={"ready": ready}, headers=KEY, timeout=10
    )
    return answer.json()  # type: ignore[no-any-return]


def _invoke(url: str, name: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/models/{name}/invoke", json=addsub_inputs(False), headers=headers, timeout=30)


def test_mme_loads_lists_invokes_and_unloads_archives(mme: Any) -> None:
    proc, url, root = mme
    one, flat = root / "one" / "model", root / "flat" / "model"
    answer = _load(url, "hash1", one)
    assert (answer.status_code, answer.content) == (200, b""), answer.text
    answer = _load(url, "hash2", flat, target="flat.tar.gz")
    assert (answer.status_code, answer.content) == (200, b""), answer.text
    listed = httpx.get(f"{url}/models", headers=KEY, timeout=10)
    assert listed.headers["content-type"] == "text/plain"
    assert listed.json() == {
        "models": [
            {"modelName": "hash1", "modelUrl": str(one)},
            {"modelName": "hash2", "modelUrl": str(root / "flat")},
        ]
    }
    got = httpx.get(f"{url}/models/hash2", headers=KEY, timeout=10)
    assert got.json() == {"modelName": "hash2", "modelUrl": str(root / "flat")}
    # The archive's model serves under the target model's name (else the hash).
    index = _index(proc)
    assert {"name": "hash1", "version": "1", "state": "READY"} in index
    assert {"name": "flat.tar.gz", "version": "1", "state": "READY"} in index

    answer = _invoke(url, "hash1")
    assert answer.status_code == 200, answer.text
    assert answer.json()["model_name"] == "hash1"
    assert {o["name"]: o["data"] for o in answer.json()["outputs"]}["SUM"] == [11.0, 22.0]
    answer = _invoke(url, "hash2", **{"X-Amzn-SageMaker-Target-Model": "flat.tar.gz"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["model_name"] == "flat.tar.gz"
    header = json.dumps(addsub_inputs(True)).encode()
    binary = httpx.post(
        f"{url}/models/hash2/invoke",
        content=header + struct.pack("<4f", 1, 2, 10, 20),
        headers={"content-type": f"{MIME}{len(header)}"},
        timeout=30,
    )
    size = int(binary.headers["content-type"][len(MIME) :])
    assert struct.unpack("<2f", binary.content[size:]) == (11.0, 22.0)

    again = _load(url, "hash1", one)
    assert (again.status_code, again.headers["content-type"]) == (409, "text/plain")
    assert again.json() == {"error": f"model repository '{one}' has already been registered"}

    gone = httpx.delete(f"{url}/models/hash1", headers=KEY, timeout=60)
    assert (gone.status_code, gone.content) == (200, b"")
    assert _invoke(url, "hash1").status_code == 404
    assert httpx.get(f"{url}/models/hash1", headers=KEY, timeout=10).status_code == 404
    assert httpx.delete(f"{url}/models/hash1", headers=KEY, timeout=10).status_code == 404
    names = {row["name"] for row in _index(proc)}
    assert "hash1" not in names
    assert _load(url, "hash1", one).status_code == 200  # unloaded and unregistered: it loads again
    for name in ("hash1", "hash2"):
        assert httpx.delete(f"{url}/models/{name}", headers=KEY, timeout=60).status_code == 200
    assert httpx.get(f"{url}/models", headers=KEY, timeout=10).json() == {"models": []}


def test_mme_an_ensemble_archive_loads_and_unloads_with_its_members(mme: Any) -> None:
    proc, url, root = mme
    answer = _load(url, "hash3", root / "ens" / "model", target="ens.tar.gz")
    assert answer.status_code == 200, answer.text
    assert {row["name"] for row in _index(proc, ready=True)} == {"ens.tar.gz", "addsub"}
    answer = _invoke(url, "hash3", **{"X-Amzn-SageMaker-Target-Model": "ens.tar.gz"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["data"] == [11.0, 22.0]
    assert httpx.delete(f"{url}/models/hash3", headers=KEY, timeout=60).status_code == 200
    assert _index(proc, ready=True) == []


def test_mme_out_of_memory_answers_507(mme: Any) -> None:
    _, url, root = mme
    assert _load(url, "hash4", root / "oom" / "model").status_code == 200
    answer = _invoke(url, "hash4")
    assert (answer.status_code, answer.headers["content-type"]) == (507, "application/json")
    assert "CUDA out of memory" in answer.json()["error"]
    assert httpx.delete(f"{url}/models/hash4", headers=KEY, timeout=60).status_code == 200
    answer = _load(url, "hash5", root / "oomload" / "model")
    assert answer.status_code == 507, answer.text
    assert "CUDA out of memory" in answer.json()["error"]
    # A failed load leaves nothing registered: the same archive is tried afresh.
    assert _load(url, "hash5", root / "oomload" / "model").status_code == 507


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"model_name": "h", "url": "/proc/self/model"}, 400, None),
        ({"model_name": "h", "url": "/elsewhere/h/model"}, 400, "Invalid \"url\" '/elsewhere/h/model'"),
        (
            {"model_name": "h", "url": "{root}/nothere/model"},
            400,
            "failed to register '{root}/nothere/model'",
        ),
        ({"model_name": 3, "url": "{root}/one/model"}, 400, "attempt to access JSON non-string as string"),
        (b'{"model_name":"h",', 400, "failed to parse the request JSON buffer: Missing a name for object"),
        (b"", 400, "Invalid \"url\" ''"),
    ],
)
def test_mme_refuses_a_bad_load(mme: Any, body: Any, status: int, error: str | None) -> None:
    _, url, root = mme
    if isinstance(body, dict):
        body = json.dumps(
            {k: v.replace("{root}", str(root)) if isinstance(v, str) else v for k, v in body.items()}
        )
    answer = httpx.post(f"{url}/models", content=body, headers=KEY, timeout=30)
    assert (answer.status_code, answer.headers["content-type"]) == (status, "text/plain")
    if error is None:
        assert answer.content == b""
    else:
        assert answer.json()["error"].startswith(error.replace("{root}", str(root))), answer.text


def test_mme_routes_and_restrictions(mme: Any) -> None:
    _, url, root = mme
    forbidden = httpx.get(f"{url}/models", timeout=10)
    assert forbidden.status_code == 403
    assert forbidden.json() == {"error": "This API is restricted, expecting header 'mme-key'"}
    assert httpx.put(f"{url}/models", headers=KEY, timeout=10).status_code == 400
    assert httpx.post(f"{url}/models/x/invoke/y", headers=KEY, timeout=10).status_code == 400
    assert httpx.delete(f"{url}/models", headers=KEY, timeout=10).status_code == 404
    assert httpx.get(f"{url}/models/nope/invoke", headers=KEY, timeout=10).status_code == 404
    assert _invoke(url, "nope").status_code == 404  # inference is not restricted here
