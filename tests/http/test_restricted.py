"""Restricted API groups over HTTP (--http-restricted-api), as Triton 2.51 answers them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonpy
from tritonclient.utils import InferenceServerException
from tritonpy.http.restricted import http_group
from tritonpy_sdk import TritonError
from tritonpy_testbackend import TestBackend
from tritonpy_testservers import LiveServer

RESTRICTED = ["model-repository,logging:admin-key=secret", "inference:Infer-Key=letmein"]


@pytest.fixture(scope="module")
def live(test_repos: list[Path]) -> Iterator[LiveServer]:
    server = tritonpy.Server(model_repository=test_repos, http_restricted_api=RESTRICTED)
    server.backends.register("testbk", TestBackend())
    server.start()
    frontend = LiveServer(server)
    frontend.start()
    yield frontend
    frontend.stop()
    server.stop()


def _forbidden(resp: httpx.Response, key: str) -> None:
    assert resp.status_code == 403, resp.text
    assert resp.headers["content-type"] == "text/plain"  # Triton's label for its JSON document
    assert resp.content == b'{"error":"This API is restricted, expecting header \'%s\'"}' % key.encode()


def test_restricted_groups_need_their_header(live: LiveServer) -> None:
    with httpx.Client(base_url=f"http://{live.url}") as http:
        _forbidden(http.get("/v2/logging"), "admin-key")
        _forbidden(http.post("/v2/repository/index"), "admin-key")
        _forbidden(http.post("/v2/repository/index", headers={"admin-key": "wrong"}), "admin-key")
        _forbidden(http.get("/v2/logging", headers={"infer-key": "letmein"}), "admin-key")
        # Header names compare without case, values exactly (as in Triton).
        assert http.get("/v2/logging", headers={"ADMIN-KEY": "secret"}).status_code == 200
        assert http.post("/v2/repository/index", headers={"admin-key": "secret"}).status_code == 200
        _forbidden(http.get("/v2/logging", headers={"admin-key": "SECRET"}), "admin-key")
        # Groups not listed stay open.
        assert http.get("/v2/health/ready").status_code == 200
        assert http.get("/v2/models/addsub/config").status_code == 200
        assert http.get("/v2/models/addsub/stats").status_code == 200


def test_inference_is_restricted_on_the_fast_path_too(live: LiveServer) -> None:
    client = httpclient.InferenceServerClient(live.url)
    a = np.ones((1, 4), np.int32)
    inputs = [httpclient.InferInput(n, [1, 4], "INT32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", inputs)
    assert info.value.status() == "403"
    assert "This API is restricted, expecting header 'Infer-Key'" in str(info.value)
    result = client.infer("addsub", inputs, headers={"Infer-Key": "letmein"})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)
    with httpx.Client(base_url=f"http://{live.url}") as http:
        _forbidden(http.post("/v2/models/addsub/versions/1/infer", json={}), "Infer-Key")
        _forbidden(http.post("/v2/models/addsub/generate", json={}), "Infer-Key")


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("/v2/health/live", "health"),
        ("/v2/health/ready", "health"),
        ("/v2/models/m/ready", "health"),
        ("/v2/models/m/versions/2/ready", "health"),
        ("/v2", "metadata"),
        ("/v2/models/m", "metadata"),
        ("/v2/models/m/versions/2", "metadata"),
        ("/v2/models/m/infer", "inference"),
        ("/v2/models/m/versions/1/infer", "inference"),
        ("/v2/models/m/generate_stream", "inference"),
        ("/v2/models/m/config", "model-config"),
        ("/v2/models/stats", "statistics"),
        ("/v2/models/m/versions/1/stats", "statistics"),
        ("/v2/repository/index", "model-repository"),
        ("/v2/repository/models/m/load", "model-repository"),
        ("/v2/systemsharedmemory/status", "shared-memory"),
        ("/v2/cudasharedmemory/region/r/register", "shared-memory"),
        ("/v2/trace/setting", "trace"),
        ("/v2/models/m/trace/setting", "trace"),
        ("/v2/logging", "logging"),
        ("/metrics", None),
    ],
)
def test_every_route_belongs_to_triton_s_group(path: str, group: str | None) -> None:
    assert http_group(path) == group


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("bogus:k=v", "unknown restricted api 'bogus'"),
        ("logging", "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got logging"),
        ("logging:k=", "option format is '<config name>:<setting>=<value>'. Got logging:k="),
        ("logging:=v", "Got logging:=v"),
    ],
)
def test_malformed_values_are_refused_with_triton_s_messages(value: str, message: str) -> None:
    with pytest.raises(TritonError) as info:
        tritonpy.Server(http_restricted_api=[value])
    assert message in info.value.message


def test_a_group_in_two_values_is_refused() -> None:
    with pytest.raises(TritonError) as info:
        tritonpy.Server(grpc_restricted_protocol=["logging:k=v", "trace,logging:j=w"])
    assert info.value.message == "restricted api 'logging' can not be specified in multiple config groups"


def test_the_cli_stops_with_one_line_for_a_bad_value(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--model-repository",
            str(tmp_path),
            "--grpc-restricted-protocol",
            "everything:k=v",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "error: unknown restricted api 'everything'"
