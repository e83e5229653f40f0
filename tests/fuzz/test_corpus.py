"""Every malformed request under tests/data/malformed gets its expected answer at once,
and the server serves a valid request afterwards."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonpy_fuzzservers import Servers, assert_serves

pytestmark = pytest.mark.integration

CASES = sorted((Path(__file__).resolve().parents[1] / "data" / "malformed").glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text())
    return case


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_malformed_request(servers: Servers, path: Path) -> None:
    case = _load(path)
    if case["protocol"] == "http":
        _http(servers, case)
    else:
        _grpc(servers, case)
    assert_serves(servers.http.url)


def _http(servers: Servers, case: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"headers": case.get("headers", {})}
    if "body" in case:
        kwargs["json"] = case["body"]
    elif "body_text" in case:
        kwargs["content"] = case["body_text"].encode()
    elif "body_base64" in case:
        kwargs["content"] = base64.b64decode(case["body_base64"])
    url = f"http://{servers.http.url}{case['path']}"
    resp = httpx.request(case["method"], url, timeout=10, follow_redirects=False, **kwargs)
    assert resp.status_code == case["status"], resp.text
    if resp.status_code >= 400:
        assert case["error"] in resp.json()["error"]


def _grpc(servers: Servers, case: dict[str, Any]) -> None:
    request_type = getattr(service_pb2, f"{case['rpc']}Request")
    request = json_format.ParseDict(case["request"], request_type())
    with grpc.insecure_channel(servers.grpc.url) as channel:
        call = getattr(service_pb2_grpc.GRPCInferenceServiceStub(channel), case["rpc"])
        with pytest.raises(grpc.RpcError) as info:
            call(request, timeout=10)
    assert info.value.code().name == case["code"], info.value.details()
    assert case["error"] in (info.value.details() or "")


def test_the_corpus_is_there() -> None:
    assert len(CASES) >= 25
    assert {_load(p)["protocol"] for p in CASES} == {"http", "grpc"}
