"""``tritonpy serve --frontend-workers 2``: two worker processes serve HTTP and gRPC in
front of the core process, which runs the models.

Every test talks to a real server with ``tritonclient`` (HTTP and gRPC) and opens
fresh connections, so both workers take part; which worker accepted a connection
is read from ``/proc`` (the worker process that holds the server side of it), so a
test can prove that both served. The models are those of a small test backend
(``fwbk``, installed into a site folder on the servers' ``PYTHONPATH``).
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

WORKERS = ("--frontend-workers", "2")
#: How long a test waits for something that should happen at once (a loaded machine is slow).
PATIENCE = 30.0

BACKEND = """
import time
from pathlib import Path

import numpy as np
from tritonpy_sdk import BackendInfo, InferenceResponse, Tensor, hookimpl


@hookimpl
def backend_info():
    return BackendInfo(default_model_filename="model.fw", default_instance_kind="KIND_CPU")


def _join(a, b):
    return np.array([x + y for x, y in zip(a.ravel(), b.ravel())], dtype=object).reshape(a.shape)


def _answer(kind, params, r, batch):
    if kind == "addsub":
        a, b = r.inputs["INPUT0"].data, r.inputs["INPUT1"].data
        if a.dtype == object:  # BYTES: the two strings joined, both ways round
            return {"OUTPUT0": Tensor.from_numpy("OUTPUT0", _join(a, b)),
                    "OUTPUT1": Tensor.from_numpy("OUTPUT1", _join(b, a))}
        return {"OUTPUT0": Tensor.from_numpy("OUTPUT0", a + b),
                "OUTPUT1": Tensor.from_numpy("OUTPUT1", a - b)}
    if kind == "identity":  # the input's own array: the worker's arena block, read in place
        return {"OUT": Tensor.from_numpy("OUT", r.inputs["IN"].data)}
    if kind == "batcher":  # BATCH: how many requests the batch that carried this one held
        x = r.inputs["IN"].data
        return {"OUT": Tensor.from_numpy("OUT", x.copy()),
                "BATCH": Tensor.from_numpy("BATCH", np.full(x.shape, batch, np.int32))}
    if kind == "accumulate":  # the sequence's running sum, in the core's implicit state
        total = (r.inputs["INPUT"].data + r.inputs["STATE"].data).astype(np.int32)
        return {"OUTPUT": Tensor.from_numpy("OUTPUT", total),
                "STATE_OUT": Tensor.from_numpy("STATE_OUT", total.copy())}
    if kind == "slow":
        Path(params["marker"]).write_text("executing")
        time.sleep(float(params.get("seconds", "1")))
        return {"OUT": Tensor.from_numpy("OUT", r.inputs["IN"].data + 1)}
    raise ValueError(kind)


@hookimpl
def execute(instance, requests):
    params = instance.model.parameters
    return [InferenceResponse(_answer(params["kind"], params, r, len(requests))) for r in requests]
"""


def _tensors(spec: str) -> str:
    """``"IN:TYPE_INT32:16, ..."`` as config entries."""
    entries = []
    for item in spec.split(","):
        name, dtype, dims = item.strip().split(":")
        entries.append(f'{{ name: "{name}" data_type: {dtype} dims: [ {dims} ] }}')
    return ", ".join(entries)


def _model(
    repo: Path, name: str, kind: str, inputs: str, outputs: str, extra: str = "", **params: str
) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.fw").write_text("")
    parameters = "".join(
        f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n'
        for k, v in {"kind": kind, **params}.items()
    )
    (repo / name / "config.pbtxt").write_text(
        f'backend: "fwbk"\nmax_batch_size: 8\ninput [ {_tensors(inputs)} ]\noutput [ {_tensors(outputs)} ]\n'
        f"{parameters}{extra}"
    )


def _repository(root: Path) -> Path:
    repo = root / "models"
    repo.mkdir()
    _model(
        repo,
        "addsub",
        "addsub",
        "INPUT0:TYPE_INT32:16, INPUT1:TYPE_INT32:16",
        "OUTPUT0:TYPE_INT32:16, OUTPUT1:TYPE_INT32:16",
    )
    _model(
        repo,
        "spare",
        "addsub",
        "INPUT0:TYPE_INT32:16, INPUT1:TYPE_INT32:16",
        "OUTPUT0:TYPE_INT32:16, OUTPUT1:TYPE_INT32:16",
    )
    _model(
        repo,
        "addsub_bytes",
        "addsub",
        "INPUT0:TYPE_STRING:4, INPUT1:TYPE_STRING:4",
        "OUTPUT0:TYPE_STRING:4, OUTPUT1:TYPE_STRING:4",
    )
    _model(
        repo,
        "identity",
        "identity",
        "IN:TYPE_FP32:-1",
        "OUT:TYPE_FP32:-1",
        "instance_group [ { count: 2 } ]\n",
    )
    _model(
        repo,
        "batcher",
        "batcher",
        "IN:TYPE_INT32:1",
        "OUT:TYPE_INT32:1, BATCH:TYPE_INT32:1",
        # A batch leaves once it holds 8 requests, or after 5 s: the tests send whole batches.
        "dynamic_batching { max_queue_delay_microseconds: 5000000 }\n",
    )
    _model(
        repo,
        "accumulate",
        "accumulate",
        "INPUT:TYPE_INT32:1",
        "OUTPUT:TYPE_INT32:1",
        "sequence_batching {\n  direct { }\n"
        '  state [ { input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n}\n',
    )
    return repo


# -- the worker processes, seen through /proc ------------------------------------------------


def worker_pids(server: ServerProcess) -> set[int]:
    """The server's front-end worker processes now (not its other children, nor zombies)."""
    pids: set[int] = set()
    for children in Path(f"/proc/{server.proc.pid}/task").glob("*/children"):
        try:
            listed = children.read_text().split()
        except OSError:  # the thread or the process just ended
            continue
        for pid in listed:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"tritonpy.workers.worker" in cmdline:
                pids.add(int(pid))
    return pids


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that did not exit (a zombie has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_workers(server: ServerProcess, count: int = 2) -> set[int]:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        pids = worker_pids(server)
        if len(pids) == count:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"never {count} workers (now {worker_pids(server)}):\n{server.output()}")


def _server_sockets(port: int, peer_port: int | None = None) -> set[str]:
    """Inodes of the established TCP sockets whose local port is ``port`` (from ``peer_port``)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state != "01" or int(local.rsplit(":", 1)[1], 16) != port:
                continue
            if peer_port is None or int(remote.rsplit(":", 1)[1], 16) == peer_port:
                inodes.add(inode)
    return inodes


def _holders(inodes: set[str], pids: set[int]) -> dict[str, int]:
    """Which of ``pids`` holds each socket of ``inodes``."""
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    found: dict[str, int] = {}
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted:
                found[wanted[target]] = pid
    return found


def serving_workers(server: ServerProcess, port: int) -> set[int]:
    """The workers holding established connections on ``port`` now."""
    return set(_holders(_server_sockets(port), worker_pids(server)).values())


class Connection:
    """A plain HTTP/1.1 connection whose worker is known (the one that accepted it)."""

    def __init__(self, server: ServerProcess) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PATIENCE)
        status, _ = self.request("GET", "/v2/health/live")  # answered: a worker accepted it
        assert status == 200
        sock = self.http.sock
        assert sock is not None
        peer = sock.getsockname()[1]
        held = _holders(_server_sockets(server.port, peer), worker_pids(server))
        assert len(held) == 1, held
        self.worker = next(iter(held.values()))

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        self.http.request(
            method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
        )
        response = self.http.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else None)

    def close(self) -> None:
        self.http.close()


def connections_on_both(server: ServerProcess, count: int) -> list[Connection]:
    """``count`` (at least 2) fresh HTTP connections, each worker holding at least one."""
    opened: list[Connection] = []
    try:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            opened.append(Connection(server))
            workers = {c.worker for c in opened}
            if len(workers) == 2 and len(opened) >= count:
                break
        else:
            raise AssertionError(f"{len(opened)} connections all went to worker {workers}")
        # Keep one of each worker's, then fill up with the others.
        chosen = [next(c for c in opened if c.worker == w) for w in workers]
        chosen += [c for c in opened if c not in chosen][: count - len(chosen)]
    except BaseException:
        for c in opened:
            c.close()
        raise
    for c in opened:
        if c not in chosen:
            c.close()
    return chosen


# -- clients ---------------------------------------------------------------------------------

Client = Any  # tritonclient.http or tritonclient.grpc InferenceServerClient
#: ``server_factory``: ``(repos, *flags, env=..., wait_ready=...)`` to a started ``ServerProcess``.
Factory = Callable[..., ServerProcess]
PROTOCOLS = ("http", "grpc")
FRESH_CHANNEL = [
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
    ("grpc.use_local_subchannel_pool", 1),
]


def fresh(server: ServerProcess, protocol: str) -> Client:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.url, network_timeout=PATIENCE)
    # A channel of its own: grpcio shares one connection between channels to one target.
    return grpcclient.InferenceServerClient(server.grpc_url, channel_args=FRESH_CHANNEL)


def module_of(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def tensor(protocol: str, name: str, array: np.ndarray[Any, Any], binary: bool = True) -> Any:
    datatype = "BYTES" if array.dtype == object else {np.int32: "INT32", np.float32: "FP32"}[array.dtype.type]
    t = module_of(protocol).InferInput(name, list(array.shape), datatype)
    if protocol == "http":
        t.set_data_from_numpy(array, binary_data=binary)
    else:
        t.set_data_from_numpy(array)
    return t


def outputs(protocol: str, names: tuple[str, ...], binary: bool = True) -> list[Any]:
    if protocol == "http":
        return [httpclient.InferRequestedOutput(n, binary_data=binary) for n in names]
    return [grpcclient.InferRequestedOutput(n) for n in names]


def infer(
    client: Client,
    protocol: str,
    model: str,
    inputs: dict[str, np.ndarray[Any, Any]],
    out: tuple[str, ...],
    binary: bool = True,
    **kwargs: Any,
) -> Any:
    tensors = [tensor(protocol, n, a, binary) for n, a in inputs.items()]
    if protocol == "grpc":
        kwargs.setdefault("client_timeout", PATIENCE)
    return client.infer(model, tensors, outputs=outputs(protocol, out, binary), **kwargs)


def addsub(client: Client, protocol: str, seed: int, binary: bool = True) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16) * seed
    b = np.full((1, 16), seed + 1, np.int32)
    result = infer(client, protocol, "addsub", {"INPUT0": a, "INPUT1": b}, ("OUTPUT0", "OUTPUT1"), binary)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def as_bytes(array: np.ndarray[Any, Any]) -> list[list[bytes]]:
    """BYTES elements as bytes (tritonclient hands JSON's BYTES back as str)."""
    return [[x.encode() if isinstance(x, str) else x for x in row] for row in array.tolist()]


def error_of(call: Callable[..., object], *args: Any) -> InferenceServerException:
    """The error ``call(*args)`` raises."""
    with pytest.raises(InferenceServerException) as info:
        call(*args)
    return info.value


# -- the servers -------------------------------------------------------------------------------

RESTRICTED = (
    "--http-restricted-api=model-repository:admin-key=secret",
    "--grpc-restricted-protocol=model-repository:admin-key=secret",
)
HTTP_ADMIN = {"admin-key": "secret"}
GRPC_ADMIN = {"triton-grpc-protocol-admin-key": "secret"}


@pytest.fixture(scope="module")
def fw_env(tmp_path_factory: pytest.TempPathFactory, backend_dist: Callable[..., None]) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    backend_dist(site, "fwbk", BACKEND)
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repository(tmp_path_factory.mktemp("fw"))


@pytest.fixture(scope="module")
def server(server_factory: Factory, repo: Path, fw_env: dict[str, str]) -> ServerProcess:
    """Two workers; explicit model control (``spare`` not loaded); model-repository restricted."""
    loads = [
        f"--load-model={name}" for name in ("addsub", "addsub_bytes", "identity", "batcher", "accumulate")
    ]
    server = server_factory(
        [repo],
        *WORKERS,
        "--model-control-mode=explicit",
        *loads,
        *RESTRICTED,
        "--allow-client-shm=true",
        env=fw_env,
    )
    wait_workers(server)
    return server


# -- 1. inference ------------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_inference_over_http(server: ServerProcess, binary: bool) -> None:
    client = fresh(server, "http")
    try:
        addsub(client, "http", 3, binary)
        a = np.array([[b"ab", b"", b"\x00z", "é".encode()]], dtype=object)
        b = np.array([[b"1", b"22", b"", b"x"]], dtype=object)
        result = infer(
            client, "http", "addsub_bytes", {"INPUT0": a, "INPUT1": b}, ("OUTPUT0", "OUTPUT1"), binary
        )
        assert as_bytes(result.as_numpy("OUTPUT0")) == [[b"ab1", b"22", b"\x00z", "é".encode() + b"x"]]
        assert as_bytes(result.as_numpy("OUTPUT1")) == [[b"1ab", b"22", b"\x00z", b"x" + "é".encode()]]
    finally:
        client.close()


def test_inference_over_grpc(server: ServerProcess) -> None:
    client = fresh(server, "grpc")
    try:
        addsub(client, "grpc", 5)
        a = np.array([[b"ab", b"", b"\x00z", "é".encode()]], dtype=object)
        b = np.array([[b"1", b"22", b"", b"x"]], dtype=object)
        result = infer(client, "grpc", "addsub_bytes", {"INPUT0": a, "INPUT1": b}, ("OUTPUT0", "OUTPUT1"))
        assert as_bytes(result.as_numpy("OUTPUT0")) == [[b"ab1", b"22", b"\x00z", "é".encode() + b"x"]]
        assert as_bytes(result.as_numpy("OUTPUT1")) == [[b"1ab", b"22", b"\x00z", b"x" + "é".encode()]]
    finally:
        client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_large_tensor_both_ways(server: ServerProcess, protocol: str) -> None:
    """1 MiB of FP32 in and out: past the link's inline limit, so through the shared arenas."""
    data = np.random.default_rng(7).standard_normal((1, 1 << 18)).astype(np.float32)
    client = fresh(server, protocol)
    try:
        for _ in range(3):  # blocks of the arenas are given back and used again
            result = infer(client, protocol, "identity", {"IN": data}, ("OUT",))
            out = result.as_numpy("OUT")
            assert out.shape == data.shape
            assert out.tobytes() == data.tobytes()
            data = data[:, ::-1].copy()
    finally:
        client.close()


def test_large_tensors_from_many_connections_at_once(server: ServerProcess) -> None:
    """Distinct tensors of 64 KiB to 1 MiB from 12 connections at once (both protocols, two
    model instances): every answer is its own request's data (no arena block mixed up or
    reused too early)."""
    count, rounds = 12, 4

    def one(n: int) -> None:
        protocol = PROTOCOLS[n % 2]
        client = fresh(server, protocol)
        try:
            for r in range(rounds):
                size = (1 << 14) << ((n + r) % 5)  # 64 KiB .. 1 MiB of FP32
                data = np.full((1, size), n * 100 + r, np.float32)
                data[0, ::97] = -n
                out = infer(client, protocol, "identity", {"IN": data}, ("OUT",)).as_numpy("OUT")
                assert out.tobytes() == data.tobytes(), (n, r)
        finally:
            client.close()

    with ThreadPoolExecutor(count) as pool:
        for done in [pool.submit(one, n) for n in range(count)]:
            done.result()


def test_errors_keep_tritons_codes(server: ServerProcess) -> None:
    a = np.zeros((1, 15), np.int32)
    for protocol, not_found, invalid in (
        ("http", "404", "400"),
        ("grpc", "StatusCode.NOT_FOUND", "StatusCode.INVALID_ARGUMENT"),
    ):
        client = fresh(server, protocol)
        try:
            error = error_of(infer, client, protocol, "nope", {"INPUT0": a}, ("OUTPUT0",))
            assert error.status() == not_found
            assert "Request for unknown model: 'nope' is not found" in error.message()
            error = error_of(infer, client, protocol, "addsub", {"INPUT0": a, "INPUT1": a}, ("OUTPUT0",))
            assert error.status() == invalid
            # Both inputs are wrong: Triton names the last given.
            assert "unexpected shape for input 'INPUT1' for model 'addsub'" in error.message()
            addsub(client, protocol, 1)  # the connection still serves
        finally:
            client.close()


def test_many_fresh_connections_are_served_by_both_workers(server: ServerProcess) -> None:
    """Fresh connections of each protocol, one after another, until both workers have served
    some (the kernel hands each to whichever worker accepts first); the last few, kept
    open, serve again."""
    workers = worker_pids(server)
    for protocol, port in (("http", server.port), ("grpc", server.grpc_port)):
        clients: list[Client] = []
        seen: set[int] = set()
        opened = 0
        try:
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline and opened < 500 and (seen != workers or opened < 8):
                client = fresh(server, protocol)
                clients.append(client)
                opened += 1
                addsub(client, protocol, opened)
                seen |= serving_workers(server, port)
                if len(clients) > 8:
                    clients.pop(0).close()
            assert seen == workers, (protocol, opened)
            for n, client in enumerate(clients):  # every connection still serves
                addsub(client, protocol, n)
        finally:
            for client in clients:
                client.close()


# -- 2. one scheduler per model --------------------------------------------------------------


def _counts(client: Client, protocol: str, model: str) -> tuple[int, int]:
    """(inference_count, execution_count) of ``model`` version 1."""
    if protocol == "http":
        stats = client.get_inference_statistics(model)["model_stats"]
    else:
        stats = client.get_inference_statistics(model, as_json=True)["model_stats"]
    (row,) = [r for r in stats if r["version"] == "1"]
    return int(row.get("inference_count", 0)), int(row.get("execution_count", 0))


def _stats_everywhere(server: ServerProcess, model: str) -> tuple[int, int]:
    """The statistics of ``model`` through fresh connections of both protocols, which agree."""
    seen = set()
    for protocol in PROTOCOLS * 2:
        client = fresh(server, protocol)
        try:
            seen.add(_counts(client, protocol, model))
        finally:
            client.close()
    assert len(seen) == 1, seen
    return seen.pop()


def test_requests_through_both_workers_form_one_batch(server: ServerProcess) -> None:
    """Eight requests on connections of both workers arrive in one batch of eight: the
    core's one dynamic batcher takes both workers' requests."""
    inferences, executions = _stats_everywhere(server, "batcher")
    connections = connections_on_both(server, 8)
    barrier = threading.Barrier(len(connections))

    def one(n: int, connection: Connection) -> tuple[int, Any]:
        body = {"inputs": [{"name": "IN", "shape": [1, 1], "datatype": "INT32", "data": [n]}]}
        barrier.wait(PATIENCE)
        return connection.request("POST", "/v2/models/batcher/infer", body)

    try:
        with ThreadPoolExecutor(len(connections)) as pool:
            answers = list(pool.map(one, range(len(connections)), connections))
    finally:
        for c in connections:
            c.close()
    for n, (status, body) in enumerate(answers):
        assert status == 200, body
        out = {o["name"]: o["data"] for o in body["outputs"]}
        assert out == {"OUT": [n], "BATCH": [8]}
    assert _stats_everywhere(server, "batcher") == (inferences + 8, executions + 1)


def test_many_connections_share_one_dynamic_batcher(server: ServerProcess) -> None:
    """Sixteen concurrent requests on sixteen fresh connections (both protocols): batches
    form, and the statistics read through any connection add every worker's requests up."""
    inferences, executions = _stats_everywhere(server, "batcher")
    count = 16
    clients = [fresh(server, PROTOCOLS[n % 2]) for n in range(count)]
    barrier = threading.Barrier(count)

    def one(n: int) -> tuple[int, int]:
        protocol = PROTOCOLS[n % 2]
        value = np.array([[1000 + n]], np.int32)
        barrier.wait(PATIENCE)
        result = infer(clients[n], protocol, "batcher", {"IN": value}, ("OUT", "BATCH"))
        return int(result.as_numpy("OUT")[0, 0]), int(result.as_numpy("BATCH")[0, 0])

    try:
        with ThreadPoolExecutor(count) as pool:
            answers = list(pool.map(one, range(count)))
    finally:
        for client in clients:
            client.close()
    assert [out for out, _ in answers] == [1000 + n for n in range(count)]
    sizes = [batch for _, batch in answers]
    assert all(1 <= size <= 8 for size in sizes), sizes
    batches = round(sum(1 / size for size in sizes))  # each batch of k requests: k answers of k
    assert batches < count, sizes
    assert _stats_everywhere(server, "batcher") == (inferences + count, executions + batches)


# -- 3. sequences -------------------------------------------------------------------------------


def test_a_sequence_keeps_its_slot_whatever_connection_brings_its_requests(server: ServerProcess) -> None:
    """Two interleaved sequences, every request on a new connection: sequence 101 over HTTP
    on connections of both workers, sequence 202 alternating HTTP and gRPC clients; each
    request's answer is its sequence's running sum (the core's implicit state)."""
    steps = [[3, 5, -2, 10, 7, 1], [100, 1, 2, 3, 4, 5]]
    connections = connections_on_both(server, len(steps[0]))
    workers = set()
    totals = [0, 0]
    try:
        for step in range(len(steps[0])):
            first, last = step == 0, step == len(steps[0]) - 1
            # Sequence 101: plain HTTP, on the connection of a known worker.
            value = steps[0][step]
            connection = connections[step]
            body = {
                "parameters": {"sequence_id": 101, "sequence_start": first, "sequence_end": last},
                "inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [value]}],
            }
            status, answer = connection.request("POST", "/v2/models/accumulate/infer", body)
            totals[0] += value
            assert status == 200, answer
            assert answer["outputs"][0]["data"] == [totals[0]], (step, answer)
            workers.add(connection.worker)
            connection.close()
            # Sequence 202: a fresh tritonclient client, the protocols in turn.
            value = steps[1][step]
            protocol = PROTOCOLS[step % 2]
            client = fresh(server, protocol)
            try:
                result = infer(
                    client,
                    protocol,
                    "accumulate",
                    {"INPUT": np.array([[value]], np.int32)},
                    ("OUTPUT",),
                    sequence_id=202,
                    sequence_start=first,
                    sequence_end=last,
                )
            finally:
                client.close()
            totals[1] += value
            assert result.as_numpy("OUTPUT").tolist() == [[totals[1]]], step
    finally:
        for c in connections:
            c.close()
    assert workers == worker_pids(server)
    assert totals == [24, 115]


# -- 4. model control -----------------------------------------------------------------------------


def _ready_everywhere(server: ServerProcess, model: str) -> set[bool]:
    """Whether ``model`` is ready, through HTTP connections of both workers and fresh gRPC clients."""
    answers = set()
    connections = connections_on_both(server, 2)
    try:
        for connection in connections:
            status, _ = connection.request("GET", f"/v2/models/{model}/ready")
            answers.add(status == 200)
    finally:
        for c in connections:
            c.close()
    for _ in range(2):
        client = fresh(server, "grpc")
        try:
            answers.add(client.is_model_ready(model))
        finally:
            client.close()
    return answers


def test_model_control_through_one_connection_is_seen_through_all(server: ServerProcess) -> None:
    assert _ready_everywhere(server, "spare") == {False}
    loader = fresh(server, "http")
    try:
        loader.load_model("spare", headers=HTTP_ADMIN)
    finally:
        loader.close()
    assert _ready_everywhere(server, "spare") == {True}
    for protocol in PROTOCOLS:
        client = fresh(server, protocol)
        try:
            a = np.arange(16, dtype=np.int32).reshape(1, 16)
            result = infer(client, protocol, "spare", {"INPUT0": a, "INPUT1": a}, ("OUTPUT0",))
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
            if protocol == "grpc":
                index = client.get_model_repository_index(headers=GRPC_ADMIN, as_json=True)["models"]
            else:
                index = client.get_model_repository_index(headers=HTTP_ADMIN)
            assert {m["name"]: m.get("state") for m in index}["spare"] == "READY"
        finally:
            client.close()

    unloader = fresh(server, "grpc")
    try:
        unloader.unload_model("spare", headers=GRPC_ADMIN)
    finally:
        unloader.close()
    assert _ready_everywhere(server, "spare") == {False}
    for protocol in PROTOCOLS:
        client = fresh(server, protocol)
        try:
            a = np.zeros((1, 16), np.int32)
            error = error_of(infer, client, protocol, "spare", {"INPUT0": a, "INPUT1": a}, ("OUTPUT0",))
            assert "'spare'" in error.message()
        finally:
            client.close()


# -- 5. system shared memory --------------------------------------------------------------------


def _shm_body(region: str) -> dict[str, Any]:
    """A JSON request of ``addsub`` with its inputs and outputs in ``region``."""

    def where(offset: int) -> dict[str, Any]:
        return {"shared_memory_region": region, "shared_memory_byte_size": 64, "shared_memory_offset": offset}

    return {
        "inputs": [
            {"name": f"INPUT{i}", "shape": [1, 16], "datatype": "INT32", "parameters": where(64 * i)}
            for i in range(2)
        ],
        "outputs": [{"name": f"OUTPUT{i}", "parameters": where(128 + 64 * i)} for i in range(2)],
    }


def _shm_infer(client: Client, protocol: str, region: str) -> None:
    module = module_of(protocol)
    inputs = []
    for i in range(2):
        inputs.append(module.InferInput(f"INPUT{i}", [1, 16], "INT32"))
        inputs[-1].set_shared_memory(region, 64, 64 * i)
    outs = []
    for i in range(2):
        outs.append(module.InferRequestedOutput(f"OUTPUT{i}"))
        outs[-1].set_shared_memory(region, 64, 128 + 64 * i)
    client.infer("addsub", inputs, outputs=outs)


def _region_names(client: Client, protocol: str) -> list[str]:
    status = client.get_system_shared_memory_status()
    return [r["name"] for r in status] if protocol == "http" else list(status.regions)


def test_a_shared_memory_region_registered_once_serves_every_connection(server: ServerProcess) -> None:
    name, key = "fw_region", f"/tritonpy-fw-{os.getpid()}"
    handle = shm.create_shared_memory_region(name, key, 256)
    registered = False
    try:

        def check(seed: int, use: Callable[[], None]) -> None:
            a = np.arange(16, dtype=np.int32).reshape(1, 16) + seed
            b = np.full((1, 16), seed, np.int32)
            shm.set_shared_memory_region(handle, [a, b])
            use()
            out0 = shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=128)
            out1 = shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=192)
            np.testing.assert_array_equal(out0, a + b)
            np.testing.assert_array_equal(out1, a - b)

        registrar = fresh(server, "http")
        try:
            registrar.register_system_shared_memory(name, key, 256)
            registered = True
        finally:
            registrar.close()

        # Used through connections of both workers (each opens the region)...
        connections: list[Connection] = []
        try:
            connections = connections_on_both(server, 2)
            for seed, connection in enumerate(connections):

                def through(c: Connection = connection) -> None:
                    status, body = c.request("POST", "/v2/models/addsub/infer", _shm_body(name))
                    assert status == 200, body

                check(seed, through)
            # ... and fresh clients of both protocols, which also list it.
            for seed in range(2, 8):
                protocol = PROTOCOLS[seed % 2]
                client = fresh(server, protocol)
                try:
                    check(seed, functools.partial(_shm_infer, client, protocol, name))
                    assert _region_names(client, protocol) == [name]
                finally:
                    client.close()

            remover = fresh(server, "grpc")
            try:
                remover.unregister_system_shared_memory(name)
                registered = False
            finally:
                remover.close()

            # Gone for the kept connections of both workers (which had it open) and every fresh one.
            unknown = f"Unable to find shared memory region: '{name}'"
            for connection in connections:
                status, body = connection.request("POST", "/v2/models/addsub/infer", _shm_body(name))
                assert (status, body) == (404, {"error": unknown})
        finally:
            for c in connections:
                c.close()
        for connection in connections_on_both(server, 2):
            try:
                status, body = connection.request("POST", "/v2/models/addsub/infer", _shm_body(name))
                assert (status, body) == (404, {"error": unknown})
            finally:
                connection.close()
        for protocol, code in (("http", "404"), ("grpc", "StatusCode.NOT_FOUND")) * 2:
            client = fresh(server, protocol)
            try:
                error = error_of(_shm_infer, client, protocol, name)
                assert (str(error.status()), error.message()) == (code, unknown)
                assert _region_names(client, protocol) == []
            finally:
                client.close()
    finally:
        if registered:
            cleanup = fresh(server, "http")
            cleanup.unregister_system_shared_memory(name)
            cleanup.close()
        shm.destroy_shared_memory_region(handle)


def test_a_name_registered_again_after_unregister_all_is_the_new_region_everywhere(
    server: ServerProcess,
) -> None:
    """Region ``again`` on one key, used through both workers; every region unregistered
    through one connection; ``again`` registered on another key: through the same kept
    connections of both workers, requests read and write the new region, not the old."""
    name = "again"
    old = shm.create_shared_memory_region("old", f"/tritonpy-fw-old-{os.getpid()}", 256)
    new = shm.create_shared_memory_region("new", f"/tritonpy-fw-new-{os.getpid()}", 256)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    shm.set_shared_memory_region(old, [a, a])
    shm.set_shared_memory_region(new, [10 * a, a])
    connections: list[Connection] = []
    try:
        registrar = fresh(server, "grpc")
        try:
            registrar.register_system_shared_memory(name, f"/tritonpy-fw-old-{os.getpid()}", 256)
        finally:
            registrar.close()
        connections = connections_on_both(server, 2)
        for connection in connections:
            status, body = connection.request("POST", "/v2/models/addsub/infer", _shm_body(name))
            assert status == 200, body
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(old, np.int32, [1, 16], offset=128), 2 * a
            )

        admin = fresh(server, "http")
        try:
            admin.unregister_system_shared_memory()  # every region
            admin.register_system_shared_memory(name, f"/tritonpy-fw-new-{os.getpid()}", 256)
        finally:
            admin.close()
        for n, connection in enumerate(connections):
            shm.set_shared_memory_region(new, [10 * a + n, a])
            status, body = connection.request("POST", "/v2/models/addsub/infer", _shm_body(name))
            assert status == 200, body
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(new, np.int32, [1, 16], offset=128), 11 * a + n
            )
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(new, np.int32, [1, 16], offset=192), 9 * a + n
            )
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(old, np.int32, [1, 16], offset=128), 2 * a
            )
    finally:
        for c in connections:
            c.close()
        cleanup = fresh(server, "http")
        cleanup.unregister_system_shared_memory()
        cleanup.close()
        shm.destroy_shared_memory_region(old)
        shm.destroy_shared_memory_region(new)


# -- 6. log settings and restricted APIs ------------------------------------------------------------


def _log_settings(client: Client, protocol: str) -> dict[str, Any]:
    if protocol == "http":
        return dict(client.get_log_settings())
    settings = client.get_log_settings(as_json=True)["settings"]
    return {k: next(iter(v.values())) for k, v in settings.items()}


def test_log_settings_updated_through_one_connection_read_the_same_through_all(server: ServerProcess) -> None:
    first = fresh(server, "http")
    try:
        original = dict(first.get_log_settings())
        changed = first.update_log_settings({"log_verbose_level": 2, "log_format": "ISO8601"})
        assert changed["log_verbose_level"] == 2 and changed["log_format"] == "ISO8601"
        try:
            for protocol in PROTOCOLS * 3:
                client = fresh(server, protocol)
                try:
                    seen = _log_settings(client, protocol)
                finally:
                    client.close()
                assert int(seen["log_verbose_level"]) == 2, seen
                assert seen["log_format"] == "ISO8601", seen
                assert {k: str(v) for k, v in seen.items() if k != "log_verbose_level"} == {
                    k: str(v) for k, v in changed.items() if k != "log_verbose_level"
                }
        finally:
            restorer = fresh(server, "grpc")
            try:
                restorer.update_log_settings({k: v for k, v in original.items() if k != "log_file"})
            finally:
                restorer.close()
        for protocol in PROTOCOLS:
            client = fresh(server, protocol)
            try:
                seen = _log_settings(client, protocol)
            finally:
                client.close()
            assert int(seen["log_verbose_level"]) == int(original["log_verbose_level"])
            assert seen["log_format"] == original["log_format"]
    finally:
        first.close()


def test_restricted_apis_are_enforced_by_every_worker(server: ServerProcess) -> None:
    forbidden = {"error": "This API is restricted, expecting header 'admin-key'"}
    connections = connections_on_both(server, 4)
    try:
        for connection in connections:
            assert connection.request("POST", "/v2/repository/index") == (403, forbidden)
            assert connection.request("POST", "/v2/repository/index", headers={"admin-key": "wrong"}) == (
                403,
                forbidden,
            )
            assert connection.request("POST", "/v2/repository/models/spare/load") == (403, forbidden)
            status, index = connection.request("POST", "/v2/repository/index", headers=HTTP_ADMIN)
            assert status == 200 and "addsub" in {m["name"] for m in index}
            assert connection.request("GET", "/v2/health/ready")[0] == 200  # an open group
    finally:
        for c in connections:
            c.close()
    for _ in range(4):
        client = fresh(server, "grpc")
        try:
            error = error_of(client.get_model_repository_index)
            assert str(error.status()) == "StatusCode.UNAVAILABLE"
            assert (
                error.message()
                == "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
            )
            error = error_of(client.unload_model, "addsub")
            assert str(error.status()) == "StatusCode.UNAVAILABLE"
            names = {
                m["name"]
                for m in client.get_model_repository_index(headers=GRPC_ADMIN, as_json=True)["models"]
            }
            assert "addsub" in names
            assert client.is_model_ready("addsub")  # still loaded, and health is open
        finally:
            client.close()


# -- 7, 8. a worker dies; the core dies -------------------------------------------------------------


def _small_server(server_factory: Factory, repo: Path, fw_env: dict[str, str], *flags: str) -> ServerProcess:
    server: ServerProcess = server_factory(
        [repo], *WORKERS, "--model-control-mode=explicit", "--load-model=addsub", *flags, env=fw_env
    )
    server.wait_for_output("Started HTTPService", timeout=PATIENCE)  # every worker serves
    wait_workers(server)
    return server


def _served(server: ServerProcess, seed: int, tries: int = 3) -> int:
    """``addsub`` through fresh connections of both protocols, each retried on a new
    connection up to ``tries`` times; how many tries failed."""
    failed = 0
    for protocol in PROTOCOLS:
        for attempt in range(tries):
            client = fresh(server, protocol)
            try:
                addsub(client, protocol, seed)
                break
            except InferenceServerException as exc:
                failed += 1
                if attempt == tries - 1:
                    raise AssertionError(f"{protocol}: {exc}\n{server.output()}") from exc
            finally:
                client.close()
    return failed


def test_a_killed_worker_is_started_again_while_the_other_serves(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    server = _small_server(server_factory, repo, fw_env)
    before = worker_pids(server)
    victim_connection, survivor_connection = connections_on_both(server, 2)
    victim, survivor = victim_connection.worker, survivor_connection.worker
    try:
        os.kill(victim, signal.SIGKILL)
        # The other worker's connection serves on, untouched.
        body = {
            "inputs": [
                {"name": f"INPUT{i}", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))}
                for i in range(2)
            ]
        }
        status, answer = survivor_connection.request("POST", "/v2/models/addsub/infer", body)
        assert status == 200, answer
        assert answer["outputs"][0]["data"] == [2 * n for n in range(16)]
        # The victim's connection is gone with it.
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            victim_connection.request("GET", "/v2/health/live")
        # Fresh connections are served all along, while the worker is started again.
        seed = 0
        deadline = time.monotonic() + PATIENCE
        restarted = f"(pid {victim}) exited with status -9"
        while time.monotonic() < deadline:
            seed += 1
            _served(server, seed)
            if restarted in server.output() and len(worker_pids(server)) == 2:
                break
        assert restarted in server.output(), server.output()
        assert "starting it again" in server.output()
        after = wait_workers(server)
        assert victim not in after and survivor in after and len(after - before) == 1
        assert not running(victim)
        # The new worker serves too: fresh connections, each asked at once (an idle
        # keep-alive connection may be closed by its worker meanwhile), until both answered.
        answered: set[int] = set()
        deadline = time.monotonic() + PATIENCE
        while answered != after and time.monotonic() < deadline:
            connection = Connection(server)
            try:
                status, answer = connection.request("POST", "/v2/models/addsub/infer", body)
                assert status == 200, answer
                answered.add(connection.worker)
            finally:
                connection.close()
        assert answered == after
        _served(server, 99, tries=1)
    finally:
        victim_connection.close()
        survivor_connection.close()
    assert server.stop() == 0
    assert not any(running(pid) for pid in after)


def test_workers_exit_when_the_core_is_killed(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    server = _small_server(server_factory, repo, fw_env)
    workers = wait_workers(server)
    _served(server, 1, tries=1)
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(PATIENCE)
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and any(running(pid) for pid in workers):
        time.sleep(0.05)
    assert not [pid for pid in workers if running(pid)], server.output()
    # Nobody holds the listening sockets any more: the ports refuse connections.
    for port in (server.port, server.grpc_port):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_workers_exit_quietly_when_the_core_dies_while_they_start(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    """The core killed as soon as its workers exist (they are still importing): they end,
    as a worker whose core is gone does, without a traceback."""
    server: ServerProcess = server_factory(
        [repo], *WORKERS, "--model-control-mode=explicit", "--load-model=addsub", env=fw_env, wait_ready=False
    )
    deadline = time.monotonic() + PATIENCE
    while len(worker_pids(server)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    workers = worker_pids(server)
    assert len(workers) == 2, server.output()
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(PATIENCE)
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and any(running(pid) for pid in workers):
        time.sleep(0.05)
    assert not [pid for pid in workers if running(pid)], server.output()
    assert "Traceback" not in server.output(), server.output()


def test_a_hung_worker_is_killed_and_started_again(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    """A worker whose loop no longer turns (stopped here with SIGSTOP) answers no ``PING``:
    past ``TRITONPY_FRONTEND_WORKER_TIMEOUT`` the core kills it and starts another, and
    the server keeps serving throughout."""
    server = _small_server(server_factory, repo, {**fw_env, "TRITONPY_FRONTEND_WORKER_TIMEOUT": "2"})
    before = wait_workers(server)
    hung = min(before)
    os.kill(hung, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + PATIENCE
        line = f"(pid {hung}) has not answered the core for"
        while time.monotonic() < deadline and not (line in server.output() and not running(hung)):
            time.sleep(0.1)
        assert line in server.output(), server.output()
        assert not running(hung)
    finally:
        if running(hung):
            os.kill(hung, signal.SIGCONT)
    after = wait_workers(server)
    assert hung not in after and len(after & before) == 1, (before, after)
    _served(server, 7)  # (a fresh connection may first reach the killed worker's backlog)
    code = server.stop()
    assert code == 0, server.output()


def test_sigterm_while_a_worker_is_started_again_stops_everything(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    """SIGTERM right after a worker died (its replacement is starting, with no link to hear
    the core's STOP yet): the server still stops cleanly, and no worker outlives it."""
    server = _small_server(server_factory, repo, fw_env)
    workers = wait_workers(server)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and not (worker_pids(server) - workers):
        time.sleep(0.005)
    started = worker_pids(server) - workers
    assert started, server.output()
    assert server.stop() == 0, server.output()
    assert not [pid for pid in workers | started if running(pid)], server.output()


def test_the_server_exits_with_1_when_a_worker_cannot_be_started_again(
    server_factory: Factory, repo: Path, fw_env: dict[str, str], tmp_path: Path
) -> None:
    """A worker killed after the server's TLS key was removed cannot serve when started
    again: the pool gives up and the server stops, with status 1 (a supervisor sees a
    failure), after draining as it does on SIGTERM."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"]
        + ["-keyout", "server.key", "-out", "server.pem"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    tls = ["--grpc-use-ssl=true", f"--grpc-server-cert={tmp_path / 'server.pem'}"]
    server = _small_server(server_factory, repo, fw_env, *tls, f"--grpc-server-key={tmp_path / 'server.key'}")
    workers = wait_workers(server)
    (tmp_path / "server.key").unlink()
    os.kill(min(workers), signal.SIGKILL)
    assert server.proc.wait(PATIENCE * 2) == 1, server.output()
    out = server.output()
    assert "cannot be started again" in out, out
    assert "Server stopped" in out, out
    assert not any(running(pid) for pid in workers)


# -- 9. SIGTERM drains ---------------------------------------------------------------------------------


def _wait_for_pending(server: ServerProcess, model: str, count: int) -> None:
    """Wait until the core's metrics show ``count`` requests queued for ``model``."""
    import urllib.request

    line = f'nv_inference_pending_request_count{{model="{model}",version="1"}} {count}'
    deadline = time.monotonic() + PATIENCE
    text = ""
    while time.monotonic() < deadline:
        with urllib.request.urlopen(server.metrics_url, timeout=5) as r:
            text = r.read().decode()
        if line in text:
            return
        time.sleep(0.02)
    raise AssertionError(f"never saw {line!r}:\n{text}")


def test_sigterm_finishes_requests_in_flight_then_stops_the_workers(
    server_factory: Factory, fw_env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "executing"
    repo = tmp_path / "models"
    repo.mkdir()
    _model(repo, "slow", "slow", "IN:TYPE_INT32:2", "OUT:TYPE_INT32:2", marker=str(marker), seconds="1")
    _model(
        repo,
        "addsub",
        "addsub",
        "INPUT0:TYPE_INT32:16, INPUT1:TYPE_INT32:16",
        "OUTPUT0:TYPE_INT32:16, OUTPUT1:TYPE_INT32:16",
    )
    server: ServerProcess = server_factory([repo], *WORKERS, env=fw_env)
    workers = wait_workers(server)
    results: dict[str, object] = {}

    def call(protocol: str) -> None:
        client = fresh(server, protocol)
        try:
            value = np.array([[1, 2]], np.int32)
            results[protocol] = infer(client, protocol, "slow", {"IN": value}, ("OUT",)).as_numpy("OUT")
        except Exception as exc:  # recorded and asserted on below
            results[protocol] = exc
        finally:
            client.close()

    callers = [threading.Thread(target=call, args=(protocol,)) for protocol in PROTOCOLS]
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + PATIENCE
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), server.output()
    _wait_for_pending(server, "slow", 1)  # one executes, the other waits its turn: both are in
    server.proc.send_signal(signal.SIGTERM)

    # New requests are refused while those two finish: UNAVAILABLE "Server is stopping".
    refusals: dict[str, tuple[str, str]] = {}
    deadline = time.monotonic() + PATIENCE
    while len(refusals) < 2 and time.monotonic() < deadline:
        for protocol in set(PROTOCOLS) - set(refusals):
            client = fresh(server, protocol)
            try:
                addsub(client, protocol, 1)
            except InferenceServerException as exc:
                refusals[protocol] = (str(exc.status()), exc.message())
            finally:
                client.close()
    assert refusals == {
        "http": ("503", "Server is stopping"),
        "grpc": ("StatusCode.UNAVAILABLE", "Server is stopping"),
    }
    for caller in callers:
        caller.join(PATIENCE)
    for protocol in PROTOCOLS:
        result = results[protocol]
        assert isinstance(result, np.ndarray), result
        assert result.tolist() == [[2, 3]]
    assert server.proc.wait(PATIENCE) == 0, server.output()
    assert "Server stopped" in server.output()
    assert not [pid for pid in workers if running(pid)]


# -- 10. start-up errors --------------------------------------------------------------------------


def _one_line_failure(server: ServerProcess) -> str:
    assert server.proc.wait(PATIENCE * 2) == 1, server.output()
    out = server.output()
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert "Traceback" not in out, out
    assert "front-end workers serve" not in out, out
    return str(errors[0])


def test_a_busy_http_port_is_one_line(server_factory: Factory, repo: Path, fw_env: dict[str, str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        server = server_factory(
            [repo],
            *WORKERS,
            "--http-port",
            str(port),
            "--model-control-mode=explicit",
            env=fw_env,
            wait_ready=False,
        )
        line = _one_line_failure(server)
    assert line.startswith(
        f"error: failed to start HTTP service at 127.0.0.1:{port}: address already in use"
    ), line


def test_grpcio_cannot_serve_with_frontend_workers(
    server_factory: Factory, repo: Path, fw_env: dict[str, str]
) -> None:
    server = server_factory(
        [repo],
        *WORKERS,
        "--grpc-implementation",
        "grpcio",
        "--model-control-mode=explicit",
        env=fw_env,
        wait_ready=False,
    )
    line = _one_line_failure(server)
    assert line.startswith("error: --frontend-workers needs the native gRPC transport"), line
