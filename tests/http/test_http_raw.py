"""Malformed and unusual requests, sent byte for byte with httpx."""

from __future__ import annotations

import gzip
import json
import struct

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def http(live) -> httpx.Client:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=f"http://{live.url}", timeout=10) as c:
        yield c


def _two_inputs(**over: object) -> dict:
    doc = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [[1, 1, 1, 1]]},
        ]
    }
    doc.update(over)
    return doc


def _error(resp: httpx.Response, status: int, text: str, media_type: str = "application/json") -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == media_type
    assert text in resp.json()["error"]


def test_json_infer_matches_triton_shape(http: httpx.Client) -> None:
    resp = http.post("/v2/models/addsub/infer", json=_two_inputs(id="r7"))
    assert resp.status_code == 200
    body = resp.json()
    assert body == {
        "model_name": "addsub",
        "model_version": "1",
        "id": "r7",
        "outputs": [
            {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 4], "data": [2, 3, 4, 5]},
            {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 4], "data": [0, 1, 2, 3]},
        ],
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{bad", 400, "failed to parse the request JSON buffer"),
        (b"[" * 100_000, 400, "nested too deeply"),
        # Triton 2.51's words (its JSON reader's), each as observed
        (b"[1, 2]", 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
        (b"{}", 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
        (b'{"inputs": 3}', 400, "Unable to parse 'inputs': attempt to access JSON non-array as array"),
        (
            b'{"inputs": [{"data": [1]}]}',
            400,
            "Unable to parse 'name': attempt to access non-existing object member",
        ),
        (
            b'{"inputs": [{"name": 3, "data": [1]}]}',
            400,
            "Unable to parse 'name': attempt to access JSON non-string",
        ),
        (
            b'{"inputs": [{"name": "I", "data": [1]}]}',
            400,
            "Unable to parse 'datatype': attempt to access non-existing",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": "x", "datatype": "INT32", "data": [1]}]}',
            400,
            "Unable to parse 'shape': attempt to access JSON non-array as array",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1.5], "datatype": "INT32", "data": [1]}]}',
            400,
            "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        (  # the data check comes first, whatever else is missing
            b'{"inputs": [3]}',
            400,
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But no field is set",
        ),
        (
            b'{"inputs": [{"name": "I", "data": [1], "parameters": {"binary_data_size": -4}}]}',
            400,
            "But set 'data' 'binary_data_size'",
        ),
        (
            b'{"inputs": [{"name": "I", "datatype": "INT32", "shape": [1], '
            b'"parameters": {"binary_data_size": "4"}}]}',
            400,
            "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as "
            "unsigned-integer",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FLOAT", "data": [1]}]}',
            400,
            "invalid datatype for input INPUT0",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32"}]}',
            400,
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But no field is set",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [9, 4], "datatype": "INT32", "data": [1]}]}',
            400,
            "Shape does not match true shape of 'data' field (input 'INPUT0' of shape [9, 4] needs 36 "
            "elements, got 1)",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32", "data": ["x"]}]}',
            400,
            "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
        ),
        (
            b'{"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32", "data": 3}]}',
            400,
            "Unable to parse 'data': attempt to access JSON non-array as array",
        ),
        (
            json.dumps(_two_inputs(outputs=[{"name": "NOPE"}])).encode(),
            400,
            "unexpected inference output 'NOPE' for model 'addsub'",
        ),
    ],
)
def test_malformed_json_is_400(http: httpx.Client, body: bytes, status: int, message: str) -> None:
    _error(http.post("/v2/models/addsub/infer", content=body), status, message)


def _binary_request(declared: int, payload: bytes) -> tuple[bytes, dict[str, str]]:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 4],
                    "datatype": "INT32",
                    "parameters": {"binary_data_size": declared},
                },
                {"name": "INPUT1", "shape": [1, 4], "datatype": "INT32", "data": [0, 0, 0, 0]},
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    return header + payload, {"Inference-Header-Content-Length": str(len(header))}


def test_binary_in_and_out(http: httpx.Client) -> None:
    data = np.array([1, 2, 3, 4], np.int32).tobytes()
    body, headers = _binary_request(16, data)
    resp = http.post("/v2/models/addsub/infer", content=body, headers=headers)
    assert resp.status_code == 200
    n = int(resp.headers["inference-header-content-length"])
    meta = json.loads(resp.content[:n])
    assert meta["outputs"][0]["parameters"] == {"binary_data_size": 16}
    assert np.frombuffer(resp.content[n : n + 16], np.int32).tolist() == [1, 2, 3, 4]


def test_empty_binary_outputs_answer_plain_json(http: httpx.Client) -> None:
    # Triton 2.51: when every binary output is empty there is no binary section,
    # so plain JSON (no Inference-Header-Content-Length), each binary output
    # keeping "binary_data_size": 0 and a JSON one its "data": [].
    doc = {"inputs": [{"name": "INPUT0", "shape": [1, 0], "datatype": "FP32", "data": []}]}
    cases = [
        ({"parameters": {"binary_data_output": True}}, [{"binary_data_size": 0}, {"binary_data_size": 0}]),
        (
            {
                "outputs": [
                    {"name": "OUTPUT0", "parameters": {"binary_data": True}},
                    {"name": "OUTPUT1", "parameters": {"binary_data": False}},
                ]
            },
            [{"binary_data_size": 0}, None],
        ),
    ]
    for extra, expected in cases:
        resp = http.post("/v2/models/one_input/infer", json={**doc, **extra})
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"] == "application/json"
        assert "inference-header-content-length" not in resp.headers
        outputs = resp.json()["outputs"]
        assert [o.get("parameters") for o in outputs] == expected
        assert [o["shape"] for o in outputs] == [[1, 0], [1, 0]]
        assert "data" not in outputs[0] and (expected[1] or outputs[1]["data"] == [])


@pytest.mark.parametrize(
    ("declared", "payload", "message"),
    [
        (
            16,
            b"\0" * 8,
            "unexpected size for input 'INPUT0', expecting 8 additional bytes for model 'addsub'",
        ),
        (  # checked after the rest of the request, in Triton's words
            12,
            b"\0" * 12,
            "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'addsub'. "
            "Expected 16, got 12",
        ),
        (16, b"\0" * 20, "unexpected additional input data for model 'addsub'"),
    ],
)
def test_bad_binary_framing(http: httpx.Client, declared: int, payload: bytes, message: str) -> None:
    body, headers = _binary_request(declared, payload)
    _error(http.post("/v2/models/addsub/infer", content=body, headers=headers), 400, message)


@pytest.mark.parametrize("value", ["abc", "-1", "999999"])
def test_bad_header_length(http: httpx.Client, value: str) -> None:
    resp = http.post(
        "/v2/models/addsub/infer", content=b"{}", headers={"Inference-Header-Content-Length": value}
    )
    _error(resp, 400, f"inference header size should be in range (0, 2), got: {value}")


def _split(resp: httpx.Response) -> tuple[dict, dict[str, bytes]]:
    """The JSON of a binary response and each binary output's bytes."""
    n = int(resp.headers["inference-header-content-length"])
    meta = json.loads(resp.content[:n])
    data, offset = {}, n
    for out in meta["outputs"]:
        size = out["parameters"]["binary_data_size"]
        data[out["name"]] = resp.content[offset : offset + size]
        offset += size
    assert offset == len(resp.content)
    return meta, data


RAW = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}


@pytest.mark.parametrize(
    ("model", "values", "shape"),
    [
        ("one_input", np.arange(6, dtype=np.float32), [1, 6]),  # dims [-1]: from the size
        ("raw_fixed", np.arange(3, dtype=np.float32), [1, 3]),  # batch dim is 1
        ("one_input", np.zeros(0, dtype=np.float32), [1, 0]),
    ],
)
def test_raw_single_input_body(http: httpx.Client, model: str, values: np.ndarray, shape: list[int]) -> None:
    # Triton: the config gives datatype and dims, the batch dim is 1, and every
    # output comes back binary.
    resp = http.post(f"/v2/models/{model}/infer", content=values.tobytes(), headers=RAW)
    assert resp.status_code == 200, resp.text
    if not values.size:  # every binary output empty: plain JSON, as Triton
        assert resp.headers["content-type"] == "application/json"
        assert "inference-header-content-length" not in resp.headers
        assert resp.json()["outputs"][0]["shape"] == shape
        return
    assert resp.headers["content-type"] == "application/octet-stream"
    meta, data = _split(resp)
    assert meta["outputs"][0]["shape"] == shape
    assert np.frombuffer(data["OUTPUT0"], np.float32).tolist() == (values * 2).tolist()


def test_raw_bytes_body_is_one_element(http: httpx.Client) -> None:
    resp = http.post("/v2/models/raw_string/infer", content=b"hello world", headers=RAW)
    assert resp.status_code == 200, resp.text
    meta, data = _split(resp)
    assert meta["outputs"][0]["shape"] == [1, 1]
    assert data["OUTPUT0"] == struct.pack("<I", 11) + b"hello world"


@pytest.mark.parametrize(
    ("model", "payload", "message"),
    [
        (
            "addsub",
            b"\0" * 16,
            "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced "
            "but got 2 inputs",
        ),
        (  # Triton 2.51's words: its raw input is 'raw_input' until matched to the model's
            "raw_fixed",
            b"\0" * 24,
            "[request id: <id_unknown>] input byte size mismatch for input 'raw_input' for model "
            "'raw_fixed'. Expected 12, got 24",
        ),
        ("one_input", b"\0" * 5, "Expected 4, got 5"),
        (
            "raw_two_variable",
            b"\0" * 8,
            "[request id: <id_unknown>] The shape of the raw input 'INPUT0' can not be deduced because there "
            "are more than one variable-sized dimension",
        ),
        ("nope", b"\0" * 4, "Request for unknown model: 'nope' is not found"),
    ],
)
def test_raw_body_errors(http: httpx.Client, model: str, payload: bytes, message: str) -> None:
    status = 404 if model == "nope" else 400
    _error(http.post(f"/v2/models/{model}/infer", content=payload, headers=RAW), status, message)


def test_an_empty_body_is_a_raw_request(http: httpx.Client) -> None:
    """As Triton 2.51 (observed): an empty body without Inference-Header-Content-Length
    is a raw request of no data, not an empty JSON document."""
    _error(http.post("/v2/models/addsub/infer", content=b""), 400, "Raw request must only have 1 input")
    resp = http.post("/v2/models/one_input/infer", content=b"")  # its one variable dim: 0 elements
    assert resp.status_code == 200, resp.text
    assert [o["shape"] for o in resp.json()["outputs"]] == [[1, 0], [1, 0]]  # no binary bytes


def test_json_then_binary_without_header_length_ends_at_a_nul(http: httpx.Client) -> None:
    """rapidjson, Triton's reader, ends the document at a NUL byte: binary data appended
    to the JSON (starting with a zero) without Inference-Header-Content-Length is not
    read, and the request fails for the binary data it lacks (Triton 2.51's answer)."""
    doc = {
        "inputs": [
            {"name": n, "shape": [1, 4], "datatype": "INT32", "parameters": {"binary_data_size": 16}}
            for n in ("INPUT0", "INPUT1")
        ]
    }
    data = np.arange(4, dtype=np.int32).tobytes()
    resp = http.post("/v2/models/addsub/infer", content=json.dumps(doc).encode() + data + data)
    _error(resp, 400, "unexpected size for input 'INPUT0', expecting 16 additional bytes for model 'addsub'")


def test_body_limits(http: httpx.Client) -> None:
    _error(http.post("/v2/models/addsub/infer", content=b" " * ((1 << 20) + 1)), 400, "maximum input size")
    bomb = gzip.compress(b" " * (4 << 20))
    _error(
        http.post("/v2/models/addsub/infer", content=bomb, headers={"Content-Encoding": "gzip"}),
        400,
        "exceeds the maximum input size",
    )
    _error(
        http.post("/v2/models/addsub/infer", content=b"not gzip", headers={"Content-Encoding": "gzip"}),
        400,
        "failed to decompress",
    )
    _error(
        http.post("/v2/models/addsub/infer", content=b"{}", headers={"Content-Encoding": "br"}),
        501,
        "unsupported Content-Encoding",
    )


def test_response_compression_follows_accept_encoding(http: httpx.Client) -> None:
    resp = http.post("/v2/models/addsub/infer", json=_two_inputs(), headers={"Accept-Encoding": "gzip"})
    assert resp.headers["content-encoding"] == "gzip"
    assert resp.json()["outputs"][0]["data"] == [2, 3, 4, 5]  # httpx inflates it
    plain = http.post("/v2/models/addsub/infer", json=_two_inputs(), headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [  # what the real Triton chose for each header
        ("deflate, gzip", "deflate"),
        ("deflate;q=0.5, gzip;q=1", "gzip"),
        ("gzip;q=0.5, deflate;q=0.6", "deflate"),
        ("gzip;q=0, deflate", "deflate"),
        ("gzip;q=0", None),
        ("br, gzip", "gzip"),
        ("*", None),
        ("x-gzip", None),
    ],
)
def test_accept_encoding_choice(http: httpx.Client, accept: str, chosen: str | None) -> None:
    resp = http.post("/v2/models/addsub/infer", json=_two_inputs(), headers={"Accept-Encoding": accept})
    assert resp.status_code == 200
    assert resp.headers.get("content-encoding") == chosen
    assert resp.json()["outputs"][1]["data"] == [0, 1, 2, 3]


def test_only_inference_responses_are_compressed(http: httpx.Client) -> None:
    assert "content-encoding" not in http.get("/v2", headers={"Accept-Encoding": "gzip"}).headers


@pytest.mark.parametrize("accept", ["identity", "gzip"])
def test_large_binary_outputs(http: httpx.Client, accept: str) -> None:
    # Big enough that the outputs go to the transport as views of the output arrays.
    values = np.arange(100_000, dtype=np.float32)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, values.size],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": values.nbytes},
                }
            ],
            "outputs": [
                {"name": "OUTPUT0", "parameters": {"binary_data": True}},
                {"name": "OUTPUT1", "parameters": {"binary_data": True}},
            ],
        }
    ).encode()
    resp = http.post(
        "/v2/models/one_input/infer",
        content=header + values.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header)), "Accept-Encoding": accept},
    )
    assert resp.status_code == 200, resp.text
    meta, data = _split(resp)
    assert [o["parameters"]["binary_data_size"] for o in meta["outputs"]] == [values.nbytes] * 2
    np.testing.assert_array_equal(np.frombuffer(data["OUTPUT0"], np.float32), values * 2)
    np.testing.assert_array_equal(np.frombuffer(data["OUTPUT1"], np.float32), np.zeros_like(values))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"parameters": {"binary_data_output": "yes"}},
            "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean",
        ),
        (
            {"outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]},
            "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean",
        ),
        (
            {"parameters": {"x": None}},
            "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'.",
        ),
        ({"parameters": [1]}, "failed to get request params.: attempt to get members for non-object"),
        ({"parameters": None}, "failed to get request params.: attempt to get members for non-object"),
        ({"id": 5}, "Unable to parse 'id': attempt to access JSON non-string as string"),
        ({"outputs": None}, "Unable to parse 'outputs': attempt to access JSON non-array as array"),
        ({"outputs": [3]}, "Unable to parse 'name': attempt to access non-existing object member 'name'"),
    ],
)
def test_bad_request_fields(http: httpx.Client, change: dict, message: str) -> None:
    _error(http.post("/v2/models/addsub/infer", json=_two_inputs(**change)), 400, message)


def test_input_with_data_and_binary_size(http: httpx.Client) -> None:
    doc = _two_inputs()
    doc["inputs"][0]["parameters"] = {"binary_data_size": 16}
    body = json.dumps(doc).encode()
    resp = http.post(
        "/v2/models/addsub/infer",
        content=body + b"\0" * 16,
        headers={"Inference-Header-Content-Length": str(len(body))},
    )
    _error(resp, 400, "Input must set only one of the following fields")
    _error(
        http.post("/v2/models/addsub/infer", json=_two_inputs(inputs=_two_inputs()["inputs"] * 2)),
        400,
        "already exists",
    )


def test_parameters_of_every_kind_pass_through(http: httpx.Client) -> None:
    params = {"echo": "x", "priority": 0, "timeout": 1_000_000, "ratio": 0.5, "flag": True}
    resp = http.post("/v2/models/addsub/infer", json=_two_inputs(parameters=params))
    assert resp.status_code == 200, resp.text
    assert resp.json()["parameters"] == {"echo": "x"}


def test_routing_errors(http: httpx.Client) -> None:
    # Triton labels these text/plain, their JSON body notwithstanding.
    text = "text/plain"
    _error(http.get("/v2/models/addsub/infer"), 405, "Method Not Allowed", text)
    _error(http.post("/v2/health/live"), 405, "Method Not Allowed", text)
    _error(http.get("/v2/nothing/here"), 404, "Not Found", text)
    # Triton's routes take only digits as a version: anything else is an unknown path.
    _error(http.get("/v2/models/addsub/versions/x"), 404, "Not Found", text)
    _error(http.get("/v2/models/addsub/versions/x/ready"), 404, "Not Found", text)
    _error(http.post("/v2/models/addsub/versions/x/infer", json=_two_inputs()), 404, "Not Found", text)
    _error(http.get("/v2/models/nope/ready"), 400, "Model version not ready", text)
    _error(http.get("/v2/models/addsub/versions/7/ready"), 400, "Model version not ready", text)


def test_bodiless_answers_and_error_documents_byte_for_byte(http: httpx.Client) -> None:
    """As Triton 2.51 writes them: health answers labelled text/plain, control answers
    application/json, and an error as compact JSON."""

    def answer(resp: httpx.Response) -> tuple[int, str | None, bytes]:
        return resp.status_code, resp.headers.get("content-type"), resp.content

    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/addsub/ready"):
        assert answer(http.get(path)) == (200, "text/plain", b"")
    assert answer(http.post("/v2/systemsharedmemory/unregister")) == (200, "application/json", b"")
    assert answer(http.get("/v2/models/nope/ready")) == (
        400,
        "text/plain",
        b'{"error":"Model version not ready"}',
    )
    assert answer(http.get("/v2/models/nope")) == (
        404,
        "application/json",
        b'{"error":"Request for unknown model: \'nope\' is not found"}',
    )
    inference = http.post("/v2/models/addsub/infer", content=b'{"inputs": []}')
    assert inference.status_code == 400
    assert inference.content.startswith(b'{"error":"[request id: <id_unknown>] expected 2 inputs')


def test_load_and_unload_are_refused_in_control_mode_none(http: httpx.Client) -> None:
    for action in ("load", "unload"):
        resp = http.post(f"/v2/repository/models/addsub/{action}")
        _error(resp, 503, "explicit model load / unload is not allowed")
    assert http.get("/v2/models/addsub/ready").status_code == 200


def test_a_repository_name_is_ignored_by_the_index_and_refused_by_load_and_unload(
    http: httpx.Client,
) -> None:
    """As Triton 2.51 answers (checked on the reference server)."""
    assert http.post("/v2/repository/any/index").json() == http.post("/v2/repository/index").json()
    for action in ("load", "unload"):
        resp = http.post(f"/v2/repository/any/models/addsub/{action}")
        _error(resp, 501, "'repository_name' specification is not supported")
    assert http.get("/v2/models/addsub/ready").status_code == 200


def test_repository_index_ready_filter(http: httpx.Client) -> None:
    every = http.post("/v2/repository/index").json()
    ready = http.post("/v2/repository/index", json={"ready": True}).json()
    assert {m["name"] for m in ready} <= {m["name"] for m in every}
    assert all(m["state"] == "READY" for m in ready)
    _error(http.post("/v2/repository/index", content=b"{nope"), 400, "failed to parse")
    # Triton 2.51's words (a 500 there): "ready" must be a JSON boolean
    _error(
        http.post("/v2/repository/index", json={"ready": "yes"}),
        400,
        "attempt to access JSON non-boolean as boolean",
    )


def test_bytes_truncated_in_binary(http: httpx.Client) -> None:
    payload = struct.pack("<I", 10) + b"abc"
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 4],
                    "datatype": "BYTES",
                    "parameters": {"binary_data_size": len(payload)},
                },
                {"name": "INPUT1", "shape": [1, 4], "datatype": "BYTES", "data": ["a", "b", "c", "d"]},
            ]
        }
    ).encode()
    resp = http.post(
        "/v2/models/addsub_string/infer",
        content=header + payload,
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    # Triton 2.51's words, asked: the one element it finds is cut short, and three are missing.
    _error(
        resp,
        400,
        "[request id: <id_unknown>] expected 4 string elements for inference input 'INPUT0' for model "
        "'addsub_string', got 1",
    )


def test_logging_settings(http: httpx.Client) -> None:
    before = http.get("/v2/logging").json()
    assert before == {
        "log_file": "",
        "log_info": True,
        "log_warning": True,
        "log_error": True,
        "log_verbose_level": 0,
        "log_format": "default",
    }
    try:
        after = http.post("/v2/logging", json={"log_verbose_level": 2, "log_info": False, "other": 1}).json()
        assert after["log_verbose_level"] == 2 and after["log_info"] is False
        assert http.get("/v2/logging").json() == after
        _error(http.post("/v2/logging", json={"log_format": "xml"}), 400, "invalid argument for --log_format")
        unsigned = "expect unsigned 32-bit integer"
        _error(http.post("/v2/logging", json={"log_verbose_level": "x"}), 400, unsigned)
        # Out of uint32 range: refused (it used to be taken, and broke gRPC LogSettings for everyone).
        for level in (99999999999999999999, 2**32, -1, 1.5, True):
            body = '{"log_verbose_level": ' + json.dumps(level) + "}"
            _error(http.post("/v2/logging", content=body), 400, unsigned)
        assert http.post("/v2/logging", json={"log_verbose_level": 2**32 - 1}).status_code == 200
        http.post("/v2/logging", json={"log_verbose_level": 2})
        _error(http.post("/v2/logging", json={"log_file": "/tmp/x"}), 501, "can not be updated")
        assert http.get("/v2/logging").json() == after  # a refused update changes nothing
    finally:
        http.post("/v2/logging", json={k: v for k, v in before.items() if k != "log_file"})


def test_trace_settings(http: httpx.Client) -> None:
    assert http.get("/v2/trace/setting").json()["trace_level"] == ["OFF"]
    updated = http.post("/v2/models/addsub/trace/setting", json={"trace_rate": "7"}).json()
    assert updated["trace_rate"] == "7"
    assert http.get("/v2/models/addsub/trace/setting").json()["trace_rate"] == "7"
    assert http.get("/v2/trace/setting").json()["trace_rate"] == "1000"
    assert (
        http.post("/v2/models/addsub/trace/setting", json={"trace_rate": None}).json()["trace_rate"] == "1000"
    )
    _error(http.post("/v2/trace/setting", json={"trace_file": "/tmp/t"}), 501, "can not be updated")
    _error(http.post("/v2/trace/setting", json={"trace_level": ["LOUD"]}), 400, "invalid trace level")
    # The JSON types Triton 2.51 reads (its words; a 500 there): nothing of such an update applies
    for bad, words in (
        ({"trace_level": "TIMESTAMPS"}, "attempt to access JSON non-array as array"),
        ({"trace_level": [5]}, "attempt to access JSON non-string as string"),
        ({"trace_rate": 5}, "attempt to access JSON non-string as string"),
        ({"trace_count": ["7"]}, "attempt to access JSON non-string as string"),
    ):
        _error(http.post("/v2/trace/setting", json=bad), 400, words)
    assert http.get("/v2/trace/setting").json()["trace_rate"] == "1000"
    # Triton 2.51 (observed): a level without a trace file is 400, and nothing of the update applies
    no_file = "Attempting to set invalid trace setting :trace file name is not given"
    for path in ("/v2/trace/setting", "/v2/models/addsub/trace/setting"):
        _error(http.post(path, json={"trace_level": ["TIMESTAMPS"], "log_frequency": "3"}), 400, no_file)
        assert http.get(path).json()["log_frequency"] == "0"
    # Triton 2.51 answers 400 {"error":"Request for unknown model : nope"} to both
    nope = "/v2/models/nope/trace/setting"
    for resp in (http.get(nope), http.post(nope, json={})):
        assert resp.status_code == 400 and resp.json() == {"error": "Request for unknown model : nope"}


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/addsub/versions/%D9%A3",  # ARABIC-INDIC DIGIT THREE: not a version
        "/v2/models/addsub/versions/%D9%A3/ready",
        "/v2/models/addsub/versions/%EF%BC%91/config",  # FULLWIDTH DIGIT ONE
        "/v2/models/addsub/",  # trailing slashes: 404 as in Triton, never a redirect
        "/v2/models/addsub/ready/",
        "/v2/health/live/",
    ],
)
def test_paths_that_triton_does_not_route(http: httpx.Client, path: str) -> None:
    resp = http.get(path, follow_redirects=False)
    _error(resp, 404, "Not Found", "text/plain")


@pytest.mark.parametrize("version", ["%D9%A3", "%EF%BC%91", "1%20", "+1"])
def test_inference_with_a_non_ascii_version_is_not_routed(http: httpx.Client, version: str) -> None:
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}
    resp = http.post(f"/v2/models/addsub/versions/{version}/infer", json=body, follow_redirects=False)
    _error(resp, 404, "Not Found", "text/plain")


def test_a_failure_while_encoding_fails_that_request_only_and_shows_no_internals(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tritonpy.http.inference as app_module

    real = app_module.encode_response

    def encode(response, binary_output, binary_flags):  # type: ignore[no-untyped-def]
        if response.id == "poison":
            raise FileNotFoundError(2, "No such file or directory", "/srv/secret/models/x")
        return real(response, binary_output, binary_flags)

    monkeypatch.setattr(app_module, "encode_response", encode)
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}
    body["inputs"].append({**body["inputs"][0], "name": "INPUT1"})
    resp = http.post("/v2/models/addsub/infer", json={**body, "id": "poison"})
    _error(resp, 500, "internal error (FileNotFoundError); the server log has the details under incident")
    assert "/srv/secret" not in resp.text and "Traceback" not in resp.text
    ok = http.post("/v2/models/addsub/infer", json={**body, "id": "fine"})
    assert ok.status_code == 200 and ok.json()["outputs"][0]["data"] == [2, 4, 6, 8]


def test_unknown_shared_memory_regions(live) -> None:  # type: ignore[no-untyped-def]
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(live.url)
    a = np.ones((1, 4), np.int32)
    inputs = [httpclient.InferInput(n, [1, 4], "INT32") for n in ("INPUT0", "INPUT1")]
    inputs[1].set_data_from_numpy(a)
    inputs[0].set_shared_memory("input_region", 16)  # as NVIDIA's shm example clients do
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", inputs)
    assert info.value.status() == "404"
    assert info.value.message() == "Unable to find shared memory region: 'input_region'"
    inputs[0].set_data_from_numpy(a)
    output = httpclient.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("output_region", 16)
    with pytest.raises(InferenceServerException) as info:
        client.infer("addsub", inputs, outputs=[output])
    assert info.value.status() == "404"
    assert info.value.message() == "Unable to find shared memory region: 'output_region'"


def test_versions_as_triton_reads_them(http: httpx.Client) -> None:
    """Version 0 is a number, which no model has; digits that do not fit a C long are
    refused with Triton 2.51's std::stol message."""
    for path, status in (("", 404), ("/ready", 400), ("/config", 404)):
        resp = http.get(f"/v2/models/addsub/versions/0{path}")
        assert resp.status_code == status, resp.text
    assert http.get("/v2/models/addsub/versions/0").json() == {
        "error": "Request for unknown model: 'addsub' version 0 is not found"
    }
    _error(
        http.get("/v2/models/addsub/versions/0/stats"),
        400,
        "requested model version is not available for model 'addsub'",
    )
    infer = http.post("/v2/models/addsub/versions/0/infer", json=_two_inputs())
    assert infer.status_code == 404
    assert infer.json()["error"] == "Request for unknown model: 'addsub' version 0 is not found"
    huge = str(2**63)
    for resp in (
        http.get(f"/v2/models/addsub/versions/{huge}"),
        http.post(f"/v2/models/addsub/versions/{huge}/infer", json=_two_inputs()),
    ):
        _error(
            resp,
            400,
            f"failed to get model version from specified version string '{huge}' (details: stol), "
            "version should be an integral value > 0",
        )
    assert http.get("/v2/models/addsub/versions/01").status_code == 200


def test_an_input_given_twice_in_tritons_words(http: httpx.Client) -> None:
    body = _two_inputs(id="q")
    body["inputs"][1] = body["inputs"][0]
    _error(
        http.post("/v2/models/addsub/infer", json=body),
        400,
        "[request id: q] input 'INPUT0' already exists in request",
    )
