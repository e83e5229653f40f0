"""Model repositories in object storage (``repository/remote.py``), against a real
S3-protocol server: moto's server, started here as its own process on 127.0.0.1.

The cache follows the bucket (objects added, changed and removed; unchanged ones
are not fetched again), poll mode loads a model added and reloads one changed in
the bucket while the server polls, and ``tritonpy serve --model-repository s3://...``
serves what the bucket holds to ``tritonclient``. The other stores' client
libraries are not installed in CI: a URI for them is one line naming the extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy.repository.remote import RemoteRepository, RemoteRepositoryError, open_store
from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_serverprocess import ServerProcess, free_port
from tritonpy_wait import wait_until

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")


class Scale:
    """OUTPUT0 = INPUT0 * k, k read from the version's model.txt: an answer shows the file."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def model_initialize(self, model: Model) -> None:
        model.state = int((model.version_path / "model.txt").read_text())

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        k = instance.model.state
        return [
            InferenceResponse({"OUTPUT0": Tensor.from_numpy("OUTPUT0", r.inputs["INPUT0"].data * k)})
            for r in requests
        ]


CONFIG = """backend: "scale"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""

EXAMPLES = Path(__file__).parents[2] / "examples" / "model_repository"

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server process, with test credentials in
    the environment (the standard variables the server reads, as a user would set them)."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        wait_until(answers, "moto's S3 server answers", timeout=60, step=0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def bucket(s3_endpoint: str) -> Any:
    """A new, empty bucket (boto3's resource) on the moto server."""
    s3 = boto3.session.Session().resource("s3", endpoint_url=s3_endpoint)
    b = s3.Bucket(f"models-{uuid.uuid4().hex[:12]}")
    b.create()
    return b


def uri(endpoint: str, bucket: Any, prefix: str = "repo") -> str:
    """Triton's form of an S3 URI on a server other than AWS's."""
    return f"s3://{endpoint}/{bucket.name}/{prefix}"


def put_model(bucket: Any, name: str, k: str, prefix: str = "repo/") -> None:
    bucket.put_object(Key=f"{prefix}{name}/config.pbtxt", Body=CONFIG.encode())
    bucket.put_object(Key=f"{prefix}{name}/1/model.txt", Body=k.encode())


def upload(bucket: Any, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            bucket.upload_file(str(path), f"{prefix}/{path.relative_to(folder).as_posix()}")


def infer(server: tritonpy.Server, name: str) -> int:
    out = server.model(name).predict({"INPUT0": np.array([[1, 1]], np.int32)})
    return int(out["OUTPUT0"][0, 0])


def answers(server: tritonpy.Server, name: str, k: int) -> bool:
    """Whether model ``name`` serves and multiplies by ``k`` (not loaded yet: False)."""
    try:
        return infer(server, name) == k
    except TritonError:
        return False


# -- the cache folder ---------------------------------------------------------------------------


def test_sync_mirrors_the_prefix_and_fetches_only_what_changed(
    s3_endpoint: str, bucket: Any, tmp_path: Path
) -> None:
    put_model(bucket, "a", "2")
    put_model(bucket, "b", "3")
    bucket.put_object(Key="repository-next-door/x/config.pbtxt", Body=b"not ours")
    bucket.put_object(Key="repo-other/x/config.pbtxt", Body=b"not ours either")
    repo = RemoteRepository(uri(s3_endpoint, bucket), cache_root=tmp_path / "cache")
    root = repo.sync()
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "a/1/model.txt",
        "a/config.pbtxt",
        "b/1/model.txt",
        "b/config.pbtxt",
    ]
    a_config = (root / "a" / "config.pbtxt").stat().st_mtime_ns
    time.sleep(0.01)
    bucket.put_object(Key="repo/b/1/model.txt", Body=b"30")
    bucket.Object("repo/a/1/model.txt").delete()
    assert repo.sync() == root
    assert (root / "b" / "1" / "model.txt").read_text() == "30"
    assert not (root / "a" / "1").exists()  # its only object went, and so does the folder
    assert (root / "a" / "config.pbtxt").stat().st_mtime_ns == a_config  # not fetched again
    repo.close()
    assert root.exists()  # a cache folder given by the user stays


def test_a_temporary_cache_goes_at_close(s3_endpoint: str, bucket: Any) -> None:
    put_model(bucket, "a", "2")
    repo = RemoteRepository(uri(s3_endpoint, bucket))
    root = repo.sync()
    assert (root / "a" / "1" / "model.txt").read_text() == "2"
    repo.close()
    assert not root.exists()


def test_aws_endpoint_url_and_a_bucket_without_prefix(
    s3_endpoint: str, bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    put_model(bucket, "a", "2", prefix="")
    repo = RemoteRepository(f"s3://{bucket.name}", cache_root=tmp_path)
    assert (repo.sync() / "a" / "1" / "model.txt").read_text() == "2"


def test_a_store_that_does_not_answer_is_an_os_error(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    repo = RemoteRepository(f"s3://{dead}/bucket/repo", cache_root=tmp_path)
    with pytest.raises(RemoteRepositoryError, match=r"failed to list model repository 's3://http://127"):
        repo.sync()


# -- serving from a bucket ------------------------------------------------------------------------


def test_poll_mode_follows_a_model_added_and_one_changed(s3_endpoint: str, bucket: Any) -> None:
    put_model(bucket, "a", "2")
    server = tritonpy.Server(
        model_repository=uri(s3_endpoint, bucket), model_control_mode="poll", repository_poll_secs=0.2
    )
    server.backends.register("scale", Scale())
    with server:
        assert infer(server, "a") == 2
        put_model(bucket, "b", "3")  # added
        bucket.put_object(Key="repo/a/1/model.txt", Body=b"7")  # changed
        wait_until(
            lambda: answers(server, "b", 3) and answers(server, "a", 7),
            "the poll thread loads b and reloads a",
            timeout=30,
        )
        bucket.Object("repo/b/1/model.txt").delete()
        bucket.Object("repo/b/config.pbtxt").delete()  # removed
        wait_until(
            lambda: "b" not in [e["name"] for e in server.repository_index()],
            "the poll thread unloads b",
            timeout=30,
        )
        cache = server.remote_repositories[0].path
        assert cache.is_dir()
    assert not cache.exists()  # the temporary cache went with the server


def test_explicit_mode_loads_a_model_put_in_the_bucket_after_start(s3_endpoint: str, bucket: Any) -> None:
    server = tritonpy.Server(model_repository=uri(s3_endpoint, bucket), model_control_mode="explicit")
    server.backends.register("scale", Scale())
    with server:
        put_model(bucket, "late", "5")
        assert [e["name"] for e in server.repository_index()] == ["late"]
        server.load_model("late")
        assert infer(server, "late") == 5


@pytest.mark.integration
def test_tritonpy_serve_serves_a_bucket(s3_endpoint: str, bucket: Any, tmp_path: Path) -> None:
    import tritonclient.http as httpclient

    upload(bucket, EXAMPLES / "simple", "models/simple")
    server = ServerProcess([uri(s3_endpoint, bucket, "models")], log=tmp_path / "serve.log")  # type: ignore[list-item]
    try:
        wait_until(lambda: b"READY" in _get(f"http://{server.url}/v2/models/simple/ready"), "simple ready")
        client = httpclient.InferenceServerClient(server.url)
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for i in inputs:
            i.set_data_from_numpy(a)
        result = client.infer("simple", inputs)
        assert (result.as_numpy("OUTPUT0") == 2 * a).all()
        client.close()
    finally:
        assert server.stop() == 0, server.output()


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return b"READY" if r.status == 200 else b""
    except OSError:
        return b""


def test_tritonpy_serve_says_when_the_bucket_cannot_be_read(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--model-repository",
            f"s3://{dead}/b/m",
            "--http-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **CREDENTIALS, "AWS_MAX_ATTEMPTS": "1"},
    )
    assert proc.returncode == 1
    assert f"error: failed to list model repository 's3://{dead}/b/m'" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- client libraries that are not installed ---------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "module", "needs"),
    [
        ("s3://bucket/models", "boto3", "needs boto3: pip install 'tritonpy[s3]'"),
        ("gs://bucket/models", "google.cloud", "needs google-cloud-storage: pip install 'tritonpy[gcs]'"),
        (
            "as://account/container/models",
            "azure.storage.blob",
            "needs azure-storage-blob: pip install 'tritonpy[azure]'",
        ),
    ],
)
def test_a_missing_client_library_names_the_extra(
    location: str,
    module: str,
    needs: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails, installed or not
    with pytest.raises(TritonError) as raised:
        open_store(location)
    assert raised.value.message == f"model repository '{location}' {needs}"
    from tritonpy.cli import main

    assert main(["serve", "--model-repository", location]) == 1
    assert capsys.readouterr().err == f"error: model repository '{location}' {needs}\n"
