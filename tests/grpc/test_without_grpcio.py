"""grpcio is an extra: ``tritonpy serve`` on the default native transport serves gRPC from
a process that cannot import grpc (as on free-threaded CPython, which has no grpcio
wheels), and ``--grpc-implementation grpcio`` there is one clear line.

The server runs with a ``sitecustomize.py`` on its PYTHONPATH that refuses every
import of ``grpc`` and ``grpc.*``, and that writes, when the process exits, the
imports it refused and the ``grpc`` modules loaded (none can be). The clients
here, in the test process, are grpcio's.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
from functools import partial
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy.grpc import health_pb2, health_pb2_grpc
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

SIMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "simple"

HIDE_GRPC = '''
"""Test hook: this interpreter has no grpc (see tests/grpc/test_without_grpcio.py)."""
import atexit
import json
import os
import sys


class _NoGrpc:
    refused = []

    def find_spec(self, name, path=None, target=None):
        if name == "grpc" or name.startswith("grpc."):
            self.refused.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None


_FINDER = _NoGrpc()
sys.meta_path.insert(0, _FINDER)


@atexit.register
def _report():
    loaded = sorted(m for m in sys.modules if m == "grpc" or m.startswith("grpc."))
    path = os.path.join(os.environ["NOGRPC_REPORTS"], f"{os.getpid()}.json")
    with open(path, "w") as out:
        json.dump({"refused": _FINDER.refused, "loaded": loaded}, out)
'''


def _grpc_mapped(pid: int | str) -> list[str]:
    """grpc's compiled core (``grpc/_cython/cygrpc*.so``) as mapped into the process."""
    with open(f"/proc/{pid}/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "cygrpc" in line})


@pytest.fixture
def no_grpc(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that cannot import grpc, and reports on it at exit."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HIDE_GRPC)
    reports = tmp_path / "reports"
    reports.mkdir()
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "NOGRPC_REPORTS": str(reports)}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``simple`` alone (ONNX, in the server's process): INT32 [-1, 16] sum and difference."""
    repo = tmp_path / "repo"
    shutil.copytree(SIMPLE, repo / "simple")
    return repo


def _inputs(a: np.ndarray, b: np.ndarray) -> list[grpcclient.InferInput]:
    inputs = []
    for name, value in (("INPUT0", a), ("INPUT1", b)):
        tensor = grpcclient.InferInput(name, list(value.shape), "INT32")
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    return inputs


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_native_transport_serves_without_grpcio(tmp_path: Path, no_grpc: dict[str, str], repo: Path) -> None:
    # The probe below finds grpc where it is loaded: in this process (tritonclient.grpc).
    assert _grpc_mapped("self"), "no cygrpc mapped in the test process: the probe finds nothing"
    server = ServerProcess([repo], "--allow-metrics=false", log=tmp_path / "server.log", env=no_grpc)
    try:
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.ones((1, 16), np.int32)
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            assert client.is_server_live()
            assert client.is_model_ready("simple")
            result = client.infer("simple", _inputs(a, b))
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)

            # An error status from a unary handler (servicer._unary's abort).
            with pytest.raises(InferenceServerException) as info:
                client.infer("nope", _inputs(a, b))
            assert info.value.status() == "StatusCode.NOT_FOUND"
            assert "unknown model: 'nope'" in str(info.value.message())

            # ModelStreamInfer: a response, then a stream ended by an error status.
            results: queue.Queue = queue.Queue()
            client.start_stream(callback=partial(lambda q, result, error: q.put((result, error)), results))
            try:
                client.async_stream_infer("simple", _inputs(a, b), request_id="s1")
                result, error = results.get(timeout=30)
            finally:
                client.stop_stream()
            assert error is None
            assert result.get_response().id == "s1"
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            client.start_stream(
                callback=partial(lambda q, result, error: q.put((result, error)), results),
                headers={"triton_grpc_error": "true"},
            )
            try:
                client.async_stream_infer("nope", _inputs(a, b))
                result, error = results.get(timeout=30)
            finally:
                client.stop_stream()
            assert result is None and error.status() == "StatusCode.NOT_FOUND"

        with grpc.insecure_channel(server.grpc_url) as channel:
            # An RPC the server does not implement.
            with pytest.raises(grpc.RpcError) as rpc:
                channel.unary_unary("/inference.GRPCInferenceService/Nope")(b"")
            assert rpc.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert rpc.value.details() == "Method not found!"
            health = health_pb2_grpc.HealthStub(channel)
            check = health.Check(health_pb2.HealthCheckRequest())
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as rpc:
                health.Check(health_pb2.HealthCheckRequest(service="other"))
            assert rpc.value.code() == grpc.StatusCode.NOT_FOUND

        # Having answered all of that, the server has no grpc in it.
        assert _grpc_mapped(server.proc.pid) == []
    finally:
        code = server.stop()
    assert code == 0, server.output()
    report = json.loads((Path(no_grpc["NOGRPC_REPORTS"]) / f"{server.proc.pid}.json").read_text())
    # Nothing imported grpc, or tried to: the hook refused nothing and none is loaded.
    assert report == {"refused": [], "loaded": []}


def test_grpcio_transport_without_grpcio_is_one_clear_line(
    tmp_path: Path, no_grpc: dict[str, str], repo: Path
) -> None:
    server = ServerProcess(
        [repo],
        "--grpc-implementation",
        "grpcio",
        log=tmp_path / "server.log",
        env=no_grpc,
        wait_ready=False,
    )
    try:
        code = server.proc.wait(60)
    finally:
        server.stop()
    out = server.output()
    assert code == 1, out
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert errors == [
        "error: --grpc-implementation grpcio needs the grpcio package, which is not installed: "
        "pip install 'tritonpy[grpcio]' (or use the default --grpc-implementation tritonpy)"
    ], out
    assert "Traceback" not in out and "READY" not in out, out  # said at start, before any model loaded
    report = json.loads((Path(no_grpc["NOGRPC_REPORTS"]) / f"{server.proc.pid}.json").read_text())
    assert report == {"refused": ["grpc"], "loaded": []}  # missing because the hook refused it
