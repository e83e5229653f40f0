"""Model repositories in object storage, mirrored into a local cache folder.

``--model-repository`` takes, as Triton's does:

- ``s3://bucket/prefix``, or ``s3://[http://|https://]host:port/bucket/prefix`` for an
  S3-protocol server other than AWS (``https`` unless said otherwise); also
  ``AWS_ENDPOINT_URL``. Credentials and region as boto3 reads them:
  ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_DEFAULT_REGION``, ``AWS_PROFILE`` and the shared files. Extra: ``tritonpy[s3]``.
- ``gs://bucket/prefix``: Google's default credentials
  (``GOOGLE_APPLICATION_CREDENTIALS``); with ``STORAGE_EMULATOR_HOST`` set
  (an emulator, ``http://host:port``), google-cloud-storage uses that server,
  anonymously. Extra: ``tritonpy[gcs]``.
- ``as://account/container/prefix``: ``AZURE_STORAGE_KEY`` (the account's key) or,
  without it, ``AZURE_STORAGE_CONNECTION_STRING`` (whose ``BlobEndpoint`` may name
  another server, such as Azurite), which must be the URI's account's.
  Extra: ``tritonpy[azure]``.

A call to Google's or Azure's store that fails is retried for about
``RETRY_SECONDS``, not the minutes their libraries would: a store that does not
answer is an error at start within seconds, and a poll that fails is tried again
at the next poll anyway.

A ``RemoteRepository`` is one such root. ``sync()`` makes its cache folder
hold exactly the objects under the prefix (one file per object, the key below the
prefix as its path) and returns the folder; the manager then reads it as any
local repository. Only objects whose ETag, size or time changed since the last
sync are downloaded (to a temporary name, then renamed into place), so a model
whose objects did not change keeps its folder stamp and is not reloaded in poll
mode, and one that changed gets new files, hence a new stamp. Objects gone from
the store are removed from the cache.

The cache is ``TRITON_AWS_MOUNT_DIRECTORY`` (Triton's variable) when set, used as
it is and kept; otherwise a temporary folder removed by ``close()``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from tritonpy_sdk import TritonError

log = logging.getLogger("tritonpy")

#: URI schemes of object stores, and the extra that installs each one's client.
SCHEMES = {"s3": "s3", "gs": "gcs", "as": "azure"}

_CLIENTS = {"s3": "boto3", "gs": "google-cloud-storage", "as": "azure-storage-blob"}

#: About how long one gs:// or as:// call is retried before it fails.
RETRY_SECONDS = 10.0


class RemoteRepositoryError(OSError):
    """An object store could not be listed or read (a poll logs it and tries again)."""


def is_remote(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names an object store (``s3://``, ``gs://``, ``as://``)."""
    return isinstance(location, str) and location.split("://", 1)[0] in SCHEMES and "://" in location


def repository_root(location: str | os.PathLike[str]) -> Path | str:
    """A ``--model-repository`` value as a root: a URI stays a string, a path is a ``Path``."""
    if isinstance(location, str) and is_remote(location):
        return location
    return Path(location)


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One object under the prefix: its path below the prefix, and what tells a change."""

    path: str
    version: str


class ObjectStore(Protocol):
    """What a repository needs of an object store: list the prefix, fetch one object."""

    def list(self) -> Iterator[StoredObject]: ...

    def download(self, path: str, dest: Path) -> None: ...


class RemoteRepository:
    """A repository root in object storage and its local cache folder."""

    def __init__(self, uri: str, cache_root: Path | None = None) -> None:
        self.uri = uri
        try:
            self._store = open_store(uri)
        except TritonError:
            raise
        except Exception as exc:  # the client library's: credentials not found, a malformed setting
            raise RemoteRepositoryError(f"failed to open model repository '{uri}': {_reason(exc)}") from exc
        mount = os.environ.get("TRITON_AWS_MOUNT_DIRECTORY")
        if cache_root is None and mount:
            cache_root = Path(mount)
        self._temporary = cache_root is None
        root = Path(tempfile.mkdtemp(prefix="tritonpy-repo-")) if cache_root is None else cache_root
        #: The local folder the manager reads (filled by ``sync``).
        self.path = root / _cache_name(uri) if not self._temporary else root
        self.path.mkdir(parents=True, exist_ok=True)
        self._have: dict[str, str] = {}  # path below the prefix -> version downloaded
        self._lock = threading.Lock()  # one sync at a time (poll thread, load API, index)

    def __repr__(self) -> str:
        return self.uri

    def sync(self) -> Path:
        """Bring the cache folder up to the store's current objects; return the folder.
        Raises ``RemoteRepositoryError`` when the store cannot be listed or read."""
        with self._lock:
            try:
                listing = {o.path: o.version for o in self._store.list()}
            except RemoteRepositoryError:
                raise
            except Exception as exc:
                raise RemoteRepositoryError(
                    f"failed to list model repository '{self.uri}': {_reason(exc)}"
                ) from exc
            changed = 0
            for rel, version in sorted(listing.items()):
                dest = self.path / rel
                if self._have.get(rel) == version and (dest.is_file() or rel.endswith("/")):
                    continue
                if rel.endswith("/"):  # a "folder" object: an empty folder
                    dest.mkdir(parents=True, exist_ok=True)
                else:
                    self._fetch(rel, dest)
                self._have[rel] = version
                changed += 1
            removed = self._remove_all_but(set(listing))
            for rel in set(self._have) - set(listing):
                del self._have[rel]
            if changed or removed:
                log.info(
                    "model repository '%s': %d object(s) fetched, %d file(s) removed, into %s",
                    self.uri,
                    changed,
                    removed,
                    self.path,
                )
            return self.path

    def close(self) -> None:
        """Remove the cache folder if it is a temporary one."""
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)

    def _fetch(self, rel: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_dir():  # was a folder, is now an object
            shutil.rmtree(dest)
        fd, tmp = tempfile.mkstemp(prefix=".fetch-", dir=dest.parent)
        os.close(fd)
        try:
            self._store.download(rel, Path(tmp))
            os.replace(tmp, dest)  # a reader sees the old file or the new one, never half of one
        except Exception as exc:
            Path(tmp).unlink(missing_ok=True)
            raise RemoteRepositoryError(
                f"failed to download '{rel}' from '{self.uri}': {_reason(exc)}"
            ) from exc

    def _remove_all_but(self, keep: set[str]) -> int:
        """Delete cached files (and then empty folders) that are no object's any more."""
        removed = 0
        folders = {str(PurePosixPath(k).parent) for k in keep}
        folders |= {k.rstrip("/") for k in keep if k.endswith("/")}
        kept_folders: set[str] = set()
        for folder in folders:
            parts = PurePosixPath(folder).parts
            kept_folders.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        for root, dirs, files in os.walk(self.path, topdown=False):
            here = Path(root).relative_to(self.path).as_posix()
            for name in files:
                rel = name if here == "." else f"{here}/{name}"
                if rel not in keep:
                    os.unlink(os.path.join(root, name))
                    removed += 1
            for name in dirs:
                rel = name if here == "." else f"{here}/{name}"
                if rel not in kept_folders:
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        return removed


def _reason(exc: Exception) -> str:
    """A client library's error in one line: Azure's messages go on with the request's
    id, time and the XML body over several lines; their error code says it shorter."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = lines[0] if lines else type(exc).__name__
    code = getattr(exc, "error_code", None)
    return f"{reason} ({code})" if code and str(code) not in reason else reason


def _cache_name(uri: str) -> str:
    """A folder name for ``uri`` inside a shared cache root (readable, and one per URI)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", uri).strip("_")


def _relative(key: str, prefix: str) -> str | None:
    """``key`` below ``prefix`` as a safe relative path, or None to skip it."""
    rel = key[len(prefix) :] if prefix else key
    if not rel or rel == "/":
        return None
    parts = PurePosixPath(rel).parts
    if any(p in ("..", ".") for p in parts) or rel.startswith("/"):
        log.warning("skipping object '%s': its key leaves the repository folder", key)
        return None
    return rel


def _missing(scheme: str, uri: str) -> TritonError:
    extra = SCHEMES[scheme]
    return TritonError.invalid_arg(
        f"model repository '{uri}' needs {_CLIENTS[scheme]}: pip install 'tritonpy[{extra}]'"
    )


def open_store(uri: str) -> ObjectStore:
    """The object store of ``uri``; ``TritonError`` when its client library is missing
    (naming the extra that installs it) or the URI is malformed."""
    scheme, _, rest = uri.partition("://")
    if scheme == "s3":
        return _S3Store(uri, rest)
    if scheme == "gs":
        return _GcsStore(uri, rest)
    if scheme == "as":
        return _AzureStore(uri, rest)
    raise TritonError.invalid_arg(f"unsupported model repository '{uri}': use a path, s3://, gs:// or as://")


def _split(uri: str, rest: str, what: str) -> tuple[str, str]:
    """``bucket/prefix`` → (bucket, ``prefix/``); the prefix is empty for a whole bucket."""
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise TritonError.invalid_arg(f"model repository '{uri}' names no {what}")
    prefix = prefix.strip("/")
    return bucket, prefix + "/" if prefix else ""


# Triton's form for S3-protocol servers other than AWS: s3://[http://|https://]host:port/bucket/path
_S3_HOST = re.compile(r"^(https?://)?([0-9A-Za-z.\-]+):([0-9]+)/(.*)$")


class _S3Store:
    def __init__(self, uri: str, rest: str) -> None:
        try:
            import boto3
        except ImportError:
            raise _missing("s3", uri) from None
        endpoint = None
        match = _S3_HOST.match(rest)
        if match:
            scheme, host, port, rest = match.groups()
            endpoint = f"{scheme or 'https://'}{host}:{port}"
        self._bucket, self._prefix = _split(uri, rest, "bucket")
        # Without endpoint_url boto3 reads AWS_ENDPOINT_URL itself; credentials and region
        # come from the standard variables and files.
        self._client: Any = boto3.session.Session().client("s3", endpoint_url=endpoint)

    def list(self) -> Iterator[StoredObject]:
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=self._prefix):
            for obj in page.get("Contents", ()):
                rel = _relative(obj["Key"], self._prefix)
                if rel is not None:
                    yield StoredObject(rel, f"{obj.get('ETag', '')}:{obj['Size']}:{obj['LastModified']}")

    def download(self, path: str, dest: Path) -> None:
        self._client.download_file(self._bucket, self._prefix + path, str(dest))


class _GcsStore:
    def __init__(self, uri: str, rest: str) -> None:
        try:
            from google.cloud import storage
            from google.cloud.storage.retry import DEFAULT_RETRY
        except ImportError:
            raise _missing("gs", uri) from None
        name, self._prefix = _split(uri, rest, "bucket")
        # With STORAGE_EMULATOR_HOST set the client uses that server with anonymous
        # credentials; otherwise Google's default credentials.
        self._bucket: Any = storage.Client().bucket(name)
        self._retry: Any = DEFAULT_RETRY.with_timeout(RETRY_SECONDS)  # its default: 120 s

    def list(self) -> Iterator[StoredObject]:
        for blob in self._bucket.list_blobs(prefix=self._prefix, retry=self._retry):
            rel = _relative(blob.name, self._prefix)
            if rel is not None:
                yield StoredObject(rel, f"{blob.generation}:{blob.size}")

    def download(self, path: str, dest: Path) -> None:
        self._bucket.blob(self._prefix + path).download_to_filename(str(dest), retry=self._retry)


class _AzureStore:
    def __init__(self, uri: str, rest: str) -> None:
        try:
            from azure.storage.blob import BlobServiceClient, LinearRetry
        except ImportError:
            raise _missing("as", uri) from None
        account, _, rest = rest.partition("/")
        container, self._prefix = _split(uri, rest, "container")
        key = os.environ.get("AZURE_STORAGE_KEY")
        connection = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        # About a second between tries, for about RETRY_SECONDS (the default backs off
        # from 15 s: a minute and a half before a refused connection is an error).
        retry = LinearRetry(backoff=1, random_jitter_range=1, retry_total=max(int(RETRY_SECONDS), 0))
        if key or not connection:
            service = BlobServiceClient(
                f"https://{account}.blob.core.windows.net", credential=key, retry_policy=retry
            )
        else:
            service = BlobServiceClient.from_connection_string(connection, retry_policy=retry)
            # Another account's connection string would read that account's container.
            if (service.account_name or "").lower() != account.lower():
                raise TritonError.invalid_arg(
                    f"model repository '{uri}' names account '{account}', but "
                    f"AZURE_STORAGE_CONNECTION_STRING is for account '{service.account_name}'"
                )
        self._container: Any = service.get_container_client(container)

    def list(self) -> Iterator[StoredObject]:
        for blob in self._container.list_blobs(name_starts_with=self._prefix):
            rel = _relative(blob.name, self._prefix)
            if rel is not None:
                yield StoredObject(rel, f"{blob.etag}:{blob.size}")

    def download(self, path: str, dest: Path) -> None:
        with open(dest, "wb") as f:
            self._container.download_blob(self._prefix + path).readinto(f)
