"""Property-based fuzzing of HTTP inference: whatever the body, framing and
parameters, every request is answered within a bound, a client's mistake is a
4xx with Triton's ``{"error": ...}`` body (never a 5xx), and the server then
answers a valid request correctly.

Examples are derandomized and bounded, so CI runs the same cases every time.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tritonpy_fuzzservers import ADDSUB_BODY, FUZZ, THREADED_SERVERS, Servers, assert_serves

pytestmark = [pytest.mark.integration, THREADED_SERVERS]


#: Statuses a well-behaved server may give a fuzzed request: success, a client
#: error, an unknown model, an unsupported feature (e.g. a decoupled model).
ALLOWED = {200, 400, 404, 501}

DATATYPES = [
    "BOOL",
    "UINT8",
    "INT8",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
    "int32",
    "X",
    "",
]
PARAM_KEYS = [
    "classification",
    "class_count",
    "binary_data",
    "binary_data_output",
    "binary_data_size",
    "priority",
    "timeout",
    "shared_memory_region",
    "shared_memory_offset",
    "shared_memory_byte_size",
    "sequence_id",
    "sequence_start",
    "echo",
    "other",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
parameters = st.dictionaries(st.sampled_from(PARAM_KEYS), json_values, max_size=3) | json_values
shapes = st.lists(st.integers(min_value=-3, max_value=2**33), max_size=4) | json_values
data = (
    st.lists(json_values, max_size=8)
    | st.lists(st.integers(-(2**40), 2**40), min_size=4, max_size=4)
    | json_values
)


def _entry(name: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from([name, "INPUT0", "INPUT1", "OUTPUT0", "nope"]) | json_values,
            "shape": st.sampled_from([[1, 4], [4], [2, 4], [9, 4]]) | shapes,
            "datatype": st.sampled_from(DATATYPES) | json_values,
            "data": data,
            "parameters": parameters,
        },
    )


bodies = st.fixed_dictionaries(
    {},
    optional={
        "inputs": st.lists(_entry("INPUT0"), max_size=3) | json_values,
        "outputs": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["OUTPUT0", "OUTPUT1", "nope"]) | json_values},
                optional={"parameters": parameters},
            ),
            max_size=2,
        )
        | json_values,
        "parameters": parameters,
        "id": st.text(max_size=5) | json_values,
    },
)

models = st.sampled_from(["addsub", "batched", "addsub_bytes", "addsub_fp16", "one_input", "classes", "nope"])
paths = st.builds(
    lambda m, v: f"/v2/models/{m}{v}/infer", models, st.sampled_from(["", "/versions/1", "/versions/2"])
)


def _post(servers: Servers, path: str, content: bytes, headers: dict[str, str]) -> httpx.Response:
    # A hang would show as a timeout here: the test fails, it does not wait forever.
    return httpx.post(f"http://{servers.http.url}{path}", content=content, headers=headers, timeout=10)


def _check(resp: httpx.Response) -> None:
    assert resp.status_code in ALLOWED, (resp.status_code, resp.text)
    if resp.status_code != 200:
        error = resp.json()["error"]
        assert isinstance(error, str) and error
        assert "Traceback" not in error


@FUZZ
@given(path=paths, body=bodies)
def test_json_bodies(servers: Servers, path: str, body: dict[str, Any]) -> None:
    _check(_post(servers, path, json.dumps(body).encode(), {"content-type": "application/json"}))


@FUZZ
@given(
    path=paths,
    header=bodies,
    binary=st.binary(max_size=64),
    length=st.sampled_from(["auto", "0", "-1", "x", "99999", "1"]) | st.integers(0, 300).map(str),
    sizes=st.lists(st.integers(-2, 40) | json_values, max_size=3),
)
def test_binary_framing(
    servers: Servers, path: str, header: dict[str, Any], binary: bytes, length: str, sizes: list[Any]
) -> None:
    inputs = header.get("inputs")
    if isinstance(inputs, list):
        for entry, size in zip(inputs, sizes):
            if isinstance(entry, dict):
                entry.setdefault("parameters", {})
                if isinstance(entry["parameters"], dict):
                    entry["parameters"]["binary_data_size"] = size
    head = json.dumps(header).encode()
    value = str(len(head)) if length == "auto" else length
    resp = _post(servers, path, head + binary, {"Inference-Header-Content-Length": value})
    _check(resp)


@FUZZ
@given(
    raw=st.binary(max_size=256),
    encoding=st.sampled_from(["gzip", "deflate", "br", "identity", "gzip, deflate", ""]),
    compress=st.booleans(),
)
def test_garbage_and_encodings(servers: Servers, raw: bytes, encoding: str, compress: bool) -> None:
    content = gzip.compress(raw) if compress else raw
    headers = {"Content-Encoding": encoding} if encoding else {}
    _check(_post(servers, "/v2/models/batched/infer", content, headers))


@FUZZ
@given(
    body=json_values
    | st.dictionaries(
        st.sampled_from(
            ["log_verbose_level", "log_info", "log_format", "trace_level", "trace_rate", "ready"]
        ),
        json_values,
        max_size=3,
    )
)
def test_management_bodies(servers: Servers, body: Any) -> None:
    for path in ("/v2/logging", "/v2/trace/setting", "/v2/repository/index"):
        _check(_post(servers, path, json.dumps(body).encode(), {}))
    # Leave the logging and trace settings as they were for the other examples.
    httpx.post(
        f"http://{servers.http.url}/v2/logging", json={"log_verbose_level": 0, "log_info": True}, timeout=10
    )


def test_still_serves_after_fuzzing(servers: Servers) -> None:
    assert_serves(servers.http.url)
    resp = httpx.post(f"http://{servers.http.url}/v2/models/addsub/infer", json=ADDSUB_BODY, timeout=10)
    assert resp.json()["outputs"][1]["data"] == [0, 1, 2, 3]
