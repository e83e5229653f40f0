"""Model repositories in object storage (``repository/remote.py``), against real
servers of each protocol, each started here as its own process on 127.0.0.1 once per
module: moto's S3 server (``s3://``), gcp-storage-emulator (``gs://``) and Azurite
(``as://``, an npm package: ``./dev setup`` installs it into ``.cache/azurite`` when npm
is there; its tests skip without it). The stores' real client libraries talk to them.

The cache follows the bucket (objects added, changed and removed; unchanged ones
are not fetched again), poll mode loads a model added and reloads one changed in
the bucket while the server polls, explicit mode loads a model put after start, and
``tritonpy serve --model-repository s3://...`` (``gs://``, ``as://``) serves what the
bucket holds to ``tritonclient``. A store that does not answer, or a bucket that is not
there, is one line of error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.repository import remote
from tritonpy.repository.remote import RemoteRepository, RemoteRepositoryError, open_store
from tritonpy_scale import CONFIG, Scale
from tritonpy_sdk import TritonError
from tritonpy_serverprocess import ServerProcess, free_port
from tritonpy_wait import wait_until

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")


EXAMPLES = Path(__file__).parents[2] / "examples" / "model_repository"

REPO_ROOT = Path(__file__).parents[2]

# -- the servers -----------------------------------------------------------------------------------

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

#: Azurite's development account and its published key (Azure's documentation).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


def azurite_blob() -> list[str] | None:
    """The command that starts Azurite's blob service, or None when node or Azurite is missing."""
    installed = REPO_ROOT / ".cache" / "azurite"  # ./dev setup's, complete once stamped
    local = installed / "node_modules" / ".bin" / "azurite-blob"
    stamped = (installed / ".installed").is_file() and local.is_file()
    found = str(local) if stamped else shutil.which("azurite-blob")
    return [found] if found and shutil.which("node") else None


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` (where the server and its subprocesses read them) for the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def server_process(cmd: list[str], what: str, probe: str, log: Path) -> Iterator[None]:
    """``cmd`` as its own process until the block ends, once an HTTP GET of ``probe`` gets an
    answer (any status: one that refuses anonymous requests answers 403)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)

    def answers() -> bool:
        assert proc.poll() is None, f"{what} exited:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(probe, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    try:
        wait_until(answers, f"{what} answers", timeout=60, step=0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server process, with test credentials in
    the environment (the standard variables the server reads, as a user would set them)."""
    port = str(free_port())
    endpoint = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", port]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with server_process(cmd, "moto's S3 server", f"{endpoint}/moto-api/", log), environment(CREDENTIALS):
        yield endpoint


@pytest.fixture(scope="module")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a gcp-storage-emulator process (in memory), named by
    ``STORAGE_EMULATOR_HOST`` in the environment, as a user points google-cloud-storage at it."""
    port = str(free_port())
    endpoint = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", port]
    log = tmp_path_factory.mktemp("gcs") / "gcs.log"
    with (
        server_process([*cmd, "--in-memory"], "gcp-storage-emulator", f"{endpoint}/storage/v1/b", log),
        environment({"STORAGE_EMULATOR_HOST": endpoint}),
    ):
        yield endpoint


@pytest.fixture(scope="module")
def azurite_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of Azurite's blob service (in memory), its development
    account's connection string in ``AZURE_STORAGE_CONNECTION_STRING``."""
    blob = azurite_blob()
    if blob is None:
        pytest.skip(
            "Azurite is not installed (npm package azurite; ./dev setup installs it when npm is there)"
        )
    port = str(free_port())
    endpoint = f"http://127.0.0.1:{port}"
    cmd = [*blob, "--blobHost", "127.0.0.1", "--blobPort", port, "--inMemoryPersistence", "--silent"]
    # Any API version: azure-storage-blob may be newer than the Azurite release.
    cmd += ["--skipApiVersionCheck", "--disableTelemetry"]
    log = tmp_path_factory.mktemp("azurite") / "azurite.log"
    with (
        server_process(cmd, "Azurite", f"{endpoint}/{AZURITE_ACCOUNT}?comp=list", log),
        environment({"AZURE_STORAGE_CONNECTION_STRING": azurite_connection_string(endpoint)}),
    ):
        yield endpoint


# -- a new bucket of each kind ------------------------------------------------------------------------


def _new_name() -> str:
    return f"models-{uuid.uuid4().hex[:12]}"


class Store:
    """A new, empty bucket (container) on one of the servers, written with its client library."""

    #: What the store's error says of a bucket that is not there.
    missing: str

    def __init__(self, name: str) -> None:
        self.name = name

    def uri(self, prefix: str = "repo") -> str:
        """The model repository at ``prefix`` in this bucket (``""``: the whole bucket)."""
        return self.uri_of(self.name, prefix)

    def uri_of(self, bucket: str, prefix: str) -> str:
        raise NotImplementedError

    def put(self, key: str, body: bytes) -> None:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError


class S3Bucket(Store):
    missing = "NoSuchBucket"

    def __init__(self, endpoint: str) -> None:
        super().__init__(_new_name())
        self.endpoint = endpoint
        self._bucket = boto3.session.Session().resource("s3", endpoint_url=endpoint).Bucket(self.name)
        self._bucket.create()

    def uri_of(self, bucket: str, prefix: str) -> str:
        """Triton's form of an S3 URI on a server other than AWS's."""
        return f"s3://{self.endpoint}/{bucket}/{prefix}".rstrip("/")

    def put(self, key: str, body: bytes) -> None:
        self._bucket.put_object(Key=key, Body=body)

    def delete(self, key: str) -> None:
        self._bucket.Object(key).delete()


class GcsBucket(Store):
    missing = "404 GET"  # the emulator's words; Google's add "The specified bucket does not exist."

    def __init__(self) -> None:
        from google.cloud import storage

        super().__init__(_new_name())
        self._bucket = storage.Client().create_bucket(self.name)

    def uri_of(self, bucket: str, prefix: str) -> str:
        return f"gs://{bucket}/{prefix}".rstrip("/")

    def put(self, key: str, body: bytes) -> None:
        self._bucket.blob(key).upload_from_string(body)

    def delete(self, key: str) -> None:
        self._bucket.blob(key).delete()


class AzureContainer(Store):
    missing = "The specified container does not exist. (ContainerNotFound)"

    def __init__(self) -> None:
        from azure.storage.blob import BlobServiceClient

        super().__init__(_new_name())
        service = BlobServiceClient.from_connection_string(os.environ["AZURE_STORAGE_CONNECTION_STRING"])
        self._container = service.create_container(self.name)

    def uri_of(self, bucket: str, prefix: str) -> str:
        return f"as://{AZURITE_ACCOUNT}/{bucket}/{prefix}".rstrip("/")

    def put(self, key: str, body: bytes) -> None:
        self._container.upload_blob(key, body, overwrite=True)

    def delete(self, key: str) -> None:
        self._container.delete_blob(key)


def _s3(request: pytest.FixtureRequest) -> Store:
    return S3Bucket(request.getfixturevalue("s3_endpoint"))


def _gcs(request: pytest.FixtureRequest) -> Store:
    request.getfixturevalue("gcs_endpoint")
    return GcsBucket()


def _azure(request: pytest.FixtureRequest) -> Store:
    request.getfixturevalue("azurite_endpoint")
    return AzureContainer()


STORES: dict[str, Callable[[pytest.FixtureRequest], Store]] = {"s3": _s3, "gs": _gcs, "as": _azure}


@pytest.fixture(params=list(STORES))
def store(request: pytest.FixtureRequest) -> Store:
    """A new, empty bucket of each kind in turn, its server started for the module."""
    return STORES[request.param](request)


def put_model(store: Store, name: str, k: str, prefix: str = "repo/") -> None:
    store.put(f"{prefix}{name}/config.pbtxt", CONFIG.encode())
    store.put(f"{prefix}{name}/1/model.txt", k.encode())


def upload(store: Store, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            store.put(f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())


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


def test_sync_mirrors_the_prefix_and_fetches_only_what_changed(store: Store, tmp_path: Path) -> None:
    put_model(store, "a", "2")
    put_model(store, "b", "3")
    store.put("repository-next-door/x/config.pbtxt", b"not ours")
    store.put("repo-other/x/config.pbtxt", b"not ours either")
    repo = RemoteRepository(store.uri(), cache_root=tmp_path / "cache")
    root = repo.sync()
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        "a/1/model.txt",
        "a/config.pbtxt",
        "b/1/model.txt",
        "b/config.pbtxt",
    ]
    a_config = (root / "a" / "config.pbtxt").stat().st_mtime_ns
    time.sleep(0.01)
    store.put("repo/b/1/model.txt", b"30")
    store.delete("repo/a/1/model.txt")
    assert repo.sync() == root
    assert (root / "b" / "1" / "model.txt").read_text() == "30"
    assert not (root / "a" / "1").exists()  # its only object went, and so does the folder
    assert (root / "a" / "config.pbtxt").stat().st_mtime_ns == a_config  # not fetched again
    repo.close()
    assert root.exists()  # a cache folder given by the user stays


def test_a_bucket_without_prefix(store: Store, tmp_path: Path) -> None:
    put_model(store, "a", "2", prefix="")
    repo = RemoteRepository(store.uri(""), cache_root=tmp_path)
    assert (repo.sync() / "a" / "1" / "model.txt").read_text() == "2"


def test_a_temporary_cache_goes_at_close(s3_endpoint: str) -> None:
    store = S3Bucket(s3_endpoint)
    put_model(store, "a", "2")
    repo = RemoteRepository(store.uri())
    root = repo.sync()
    assert (root / "a" / "1" / "model.txt").read_text() == "2"
    repo.close()
    assert not root.exists()


def test_aws_endpoint_url(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    store = S3Bucket(s3_endpoint)
    put_model(store, "a", "2")
    repo = RemoteRepository(f"s3://{store.name}/repo", cache_root=tmp_path)
    assert (repo.sync() / "a" / "1" / "model.txt").read_text() == "2"


def _dead_store(scheme: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A URI of ``scheme`` on a server that is not there (a free port on 127.0.0.1)."""
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(remote, "RETRY_SECONDS", 1.0)  # gs://, as://: retried for a second, not ten
    if scheme == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", dead)
        return "gs://bucket/repo"
    if scheme == "as":
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_connection_string(dead))
        return f"as://{AZURITE_ACCOUNT}/container/repo"
    return f"s3://{dead}/bucket/repo"


@pytest.mark.parametrize("scheme", list(STORES))
def test_a_store_that_does_not_answer_is_an_os_error(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = _dead_store(scheme, monkeypatch)
    repo = RemoteRepository(location, cache_root=tmp_path)
    started = time.monotonic()
    with pytest.raises(RemoteRepositoryError, match=f"^failed to list model repository '{location}': .+"):
        repo.sync()
    assert time.monotonic() - started < 10  # retried for about RETRY_SECONDS, not minutes


def test_a_bucket_that_is_not_there_is_an_os_error(store: Store, tmp_path: Path) -> None:
    location = store.uri_of(f"{store.name}-not-there", "repo")
    repo = RemoteRepository(location, cache_root=tmp_path)
    with pytest.raises(RemoteRepositoryError) as raised:
        repo.sync()
    assert str(raised.value).startswith(f"failed to list model repository '{location}': ")
    assert store.missing in str(raised.value)
    assert "\n" not in str(raised.value)


# -- serving from a bucket ------------------------------------------------------------------------


def test_poll_mode_follows_a_model_added_and_one_changed(store: Store) -> None:
    put_model(store, "a", "2")
    server = tritonpy.Server(
        model_repository=store.uri(), model_control_mode="poll", repository_poll_secs=0.2
    )
    server.backends.register("scale", Scale())
    with server:
        assert infer(server, "a") == 2
        put_model(store, "b", "3")  # added
        store.put("repo/a/1/model.txt", b"7")  # changed
        wait_until(
            lambda: answers(server, "b", 3) and answers(server, "a", 7),
            "the poll thread loads b and reloads a",
            timeout=30,
        )
        store.delete("repo/b/1/model.txt")
        store.delete("repo/b/config.pbtxt")  # removed
        wait_until(
            lambda: "b" not in [e["name"] for e in server.repository_index()],
            "the poll thread unloads b",
            timeout=30,
        )
        cache = server.remote_repositories[0].path
        assert cache.is_dir()
    assert not cache.exists()  # the temporary cache went with the server


def test_explicit_mode_loads_a_model_put_in_the_bucket_after_start(store: Store) -> None:
    server = tritonpy.Server(model_repository=store.uri(), model_control_mode="explicit")
    server.backends.register("scale", Scale())
    with server:
        put_model(store, "late", "5")
        assert [e["name"] for e in server.repository_index()] == ["late"]
        server.load_model("late")
        assert infer(server, "late") == 5


@pytest.mark.integration
def test_tritonpy_serve_serves_a_bucket(store: Store, tmp_path: Path) -> None:
    import tritonclient.http as httpclient

    upload(store, EXAMPLES / "simple", "models/simple")
    server = ServerProcess([store.uri("models")], log=tmp_path / "serve.log")  # type: ignore[list-item]
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


def _serve(location: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``tritonpy serve --model-repository location``, expected to give up at start."""
    return subprocess.run(
        [sys.executable, "-m", "tritonpy", "serve", "--model-repository", location, "--http-port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_tritonpy_serve_says_when_the_store_does_not_answer(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    proc = _serve(f"s3://{dead}/b/m", {**CREDENTIALS, "AWS_MAX_ATTEMPTS": "1"})
    assert proc.returncode == 1
    assert f"error: failed to list model repository 's3://{dead}/b/m'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_tritonpy_serve_says_when_the_bucket_is_not_there(store: Store) -> None:
    location = store.uri_of(f"{store.name}-not-there", "models")
    proc = _serve(location, {})
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(f"error: failed to list model repository '{location}': ")
    assert store.missing in errors[0]
    assert "Traceback" not in proc.stderr


# -- setting up a store's client --------------------------------------------------------------------


def test_an_azure_uri_names_the_connection_strings_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a connection string the account is the string's: a URI naming another account
    would read the wrong account's container, so it is refused."""
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_connection_string("http://127.0.0.1:1"))
    assert open_store(f"as://{AZURITE_ACCOUNT}/container/models") is not None
    with pytest.raises(TritonError) as raised:
        open_store("as://otheraccount/container/models")
    assert raised.value.message == (
        "model repository 'as://otheraccount/container/models' names account 'otheraccount', "
        f"but AZURE_STORAGE_CONNECTION_STRING is for account '{AZURITE_ACCOUNT}'"
    )


def _missing_google_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A credentials file that is not there: Google's client looks no further (no gcloud
    login, no metadata server), on any machine."""
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))


def _malformed_connection_string(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AZURE_STORAGE_KEY", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "not a connection string")


@pytest.mark.parametrize(
    ("location", "setting", "says"),
    [
        ("gs://bucket/models", _missing_google_credentials, "missing.json was not found"),
        ("as://account/container/models", _malformed_connection_string, "blank or malformed"),
    ],
    ids=["gs-missing-credentials", "as-malformed-connection-string"],
)
def test_a_client_that_cannot_be_set_up_is_one_line(
    location: str,
    setting: Callable[[pytest.MonkeyPatch, Path], None],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    setting(monkeypatch, tmp_path)
    with pytest.raises(RemoteRepositoryError, match=f"^failed to open model repository '{location}': "):
        RemoteRepository(location, cache_root=tmp_path)
    from tritonpy.cli import main

    assert main(["serve", "--model-repository", location]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: failed to open model repository '{location}': ")
    assert says in err.lower()
    assert err.count("\n") == 1


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
