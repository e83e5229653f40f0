"""gRPC over TLS and mutual TLS, with certificates the test makes with openssl."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy_testservers import start_grpc

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            f"{name}.pem",
            cwd=d,
        )
    return d


def _infer(client: grpcclient.InferenceServerClient) -> np.ndarray:
    a = np.ones((1, 4), np.int32)
    inputs = [grpcclient.InferInput(n, [1, 4], "INT32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    return client.infer("addsub", inputs).as_numpy("OUTPUT0")


@pytest.fixture(scope="module", params=["tritonpy", "grpcio"])
def tls_server(test_repos: list[Path], pki: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    server, frontend = start_grpc(
        test_repos,
        grpc_implementation=request.param,
        grpc_use_ssl=True,
        grpc_server_cert=str(pki / "server.pem"),
        grpc_server_key=str(pki / "server.key"),
    )
    yield frontend.url
    frontend.stop()
    server.stop()


def test_tls(tls_server: str, pki: Path) -> None:
    client = grpcclient.InferenceServerClient(tls_server, ssl=True, root_certificates=str(pki / "ca.pem"))
    assert _infer(client).tolist() == [[2, 2, 2, 2]]
    plain = grpcclient.InferenceServerClient(tls_server)
    with pytest.raises(InferenceServerException):
        plain.is_server_live()


@pytest.mark.parametrize("implementation", ["tritonpy", "grpcio"])
def test_mutual_tls(test_repos: list[Path], pki: Path, implementation: str) -> None:
    server, frontend = start_grpc(
        test_repos,
        grpc_implementation=implementation,
        grpc_use_ssl=True,
        grpc_use_ssl_mutual=True,
        grpc_server_cert=str(pki / "server.pem"),
        grpc_server_key=str(pki / "server.key"),
        grpc_root_cert=str(pki / "ca.pem"),
    )
    try:
        with_cert = grpcclient.InferenceServerClient(
            frontend.url,
            ssl=True,
            root_certificates=str(pki / "ca.pem"),
            private_key=str(pki / "client.key"),
            certificate_chain=str(pki / "client.pem"),
        )
        assert _infer(with_cert).tolist() == [[2, 2, 2, 2]]
        without = grpcclient.InferenceServerClient(
            frontend.url, ssl=True, root_certificates=str(pki / "ca.pem")
        )
        with pytest.raises(InferenceServerException):
            without.is_server_live()
    finally:
        frontend.stop()
        server.stop()


def test_bad_tls_settings_are_clear_errors(tmp_path: Path) -> None:
    import tritonpy
    from tritonpy.grpc.aio import credentials

    options = tritonpy.ServerOptions(grpc_use_ssl=True)
    with pytest.raises(ValueError, match="needs --grpc-server-cert and --grpc-server-key"):
        credentials(options)
    options = tritonpy.ServerOptions(
        grpc_use_ssl=True,
        grpc_server_cert=str(tmp_path / "nope.pem"),
        grpc_server_key=str(tmp_path / "nope.key"),
    )
    with pytest.raises(ValueError, match="cannot read --grpc-server-key"):
        credentials(options)
