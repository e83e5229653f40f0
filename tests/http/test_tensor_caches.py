"""The decoded-header plans and the response fragments of ``http/tensors.py``: a
request decoded from a known header, or a response encoded from remembered
fragments, is what the full decoding and one ``json.dumps`` give."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from tritonpy.http import tensors
from tritonpy.http.tensors import decode_request, encode_response
from tritonpy_sdk import DataType, InferenceResponse, Tensor, TritonError

HEADER = json.dumps(
    {
        "id": "r1",
        "parameters": {"priority": 2, "binary_data_output": True},
        "inputs": [
            {"name": "A", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},
            {"name": "B", "datatype": "INT64", "shape": [1, 1], "parameters": {"binary_data_size": 8}},
        ],
        "outputs": [{"name": "X", "parameters": {"binary_data": False, "k": "v"}}, {"name": "Y"}],
    }
).encode()


def _decode(binary: bytes) -> tuple:  # type: ignore[type-arg]
    request, binary_output, flags = decode_request("m", "2", HEADER, memoryview(binary))
    return request, binary_output, flags


def _same(a: tuple, b: tuple) -> None:  # type: ignore[type-arg]
    (ra, oa, fa), (rb, ob, fb) = a, b
    assert (oa, fa) == (ob, fb)
    assert (ra.model_name, ra.model_version, ra.id, ra.parameters) == (
        rb.model_name,
        rb.model_version,
        rb.id,
        rb.parameters,
    )
    assert ra.requested_outputs == rb.requested_outputs
    assert list(ra.inputs) == list(rb.inputs)
    for name, t in ra.inputs.items():
        u = rb.inputs[name]
        assert (t.datatype, t.data.dtype, t.data.shape) == (u.datatype, u.data.dtype, u.data.shape)


def test_a_known_header_decodes_as_the_first_time() -> None:
    tensors._PLANS.clear()
    data = struct.pack("<2f", 1.5, 2.5) + struct.pack("<q", 7)
    first = _decode(data)
    assert HEADER in tensors._PLANS
    # The first request's objects may change downstream: the plan keeps its own.
    first[0].parameters["priority"] = 9
    first[0].requested_outputs[0].parameters["k"] = "changed"
    first[2]["X"] = True
    other = struct.pack("<2f", 3.0, 4.0) + struct.pack("<q", -1)
    tensors._PLANS.clear()
    fresh = _decode(other)
    planned = _decode(other)
    _same(fresh, planned)
    np.testing.assert_array_equal(planned[0].inputs["A"].data, [3.0, 4.0])
    np.testing.assert_array_equal(planned[0].inputs["B"].data, [[-1]])


def test_a_known_header_with_other_binary_sizes_is_decoded_again() -> None:
    _decode(bytes(16))
    with pytest.raises(TritonError, match="unexpected additional input data"):
        _decode(bytes(17))
    with pytest.raises(TritonError, match="expecting 1 additional bytes"):
        _decode(bytes(15))


def test_headers_that_depend_on_more_than_themselves_get_no_plan() -> None:
    tensors._PLANS.clear()
    json_input = {"inputs": [{"name": "A", "datatype": "INT32", "shape": [1], "data": [1]}]}
    decode_request("m", "", json.dumps(json_input).encode(), memoryview(b""))
    text = b"\x01\x00\x00\x00a"
    bytes_input = {
        "inputs": [{"name": "S", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 5}}]
    }
    decode_request("m", "", json.dumps(bytes_input).encode(), memoryview(text))
    assert not tensors._PLANS


@pytest.mark.parametrize("response_id", ["", 'é"id'])
@pytest.mark.parametrize("parameters", [{}, {"a": 1.5, "b": "x", "c": True}])
def test_responses_encode_as_one_json_dump(response_id: str, parameters: dict) -> None:  # type: ignore[type-arg]
    outputs = {
        "X": Tensor("X", np.arange(4, dtype=np.float32).reshape(2, 2), DataType.FP32),
        "Y": Tensor("Y", np.array([1, 2], dtype=np.int64), DataType.INT64),
        "Z": Tensor("Z", np.zeros((0,), dtype=np.int32), DataType.INT32),
    }
    response = InferenceResponse(
        outputs, id=response_id, model_name="m\u00e9", model_version=3, parameters=parameters
    )
    for _ in range(2):  # the second time from remembered fragments
        parts, length = encode_response(response, True, {"Y": False})
        doc = {"id": response_id} if response_id else {}
        doc["model_name"] = "m\u00e9"
        doc["model_version"] = "3"
        if parameters:
            doc["parameters"] = parameters
        doc["outputs"] = [
            {"name": "X", "datatype": "FP32", "shape": [2, 2], "parameters": {"binary_data_size": 16}},
            {"name": "Y", "datatype": "INT64", "shape": [2], "data": [1, 2]},
            {"name": "Z", "datatype": "INT32", "shape": [0], "parameters": {"binary_data_size": 0}},
        ]
        assert parts[0] == json.dumps(doc, separators=(",", ":")).encode()
        assert length == len(parts[0]) and len(parts) == 2


@pytest.mark.parametrize("key", ["triton_enable_empty_final_response", "triton_foo"])
def test_triton_parameters_are_refused(key: str) -> None:
    # Triton 2.51, asked: over HTTP every request parameter starting with ``triton_`` is
    # a 400 with these words, even the gRPC stream's flag.
    header = json.dumps(
        {"parameters": {key: True}, "inputs": [{"name": "A", "datatype": "INT32", "shape": [1], "data": [1]}]}
    ).encode()
    with pytest.raises(TritonError) as info:
        decode_request("m", "", header, memoryview(b""))
    assert info.value.code.name == "INVALID_ARG"
    assert info.value.message == (
        "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
    )
