"""Property-based fuzzing of gRPC ModelInfer and ModelStreamInfer: typed contents
and raw contents of any size and count, every InferParameter kind, requested
outputs with parameters. Every call ends within a bound with a status a client's
mistake deserves (never INTERNAL or UNKNOWN), and the server then still serves.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonpy_fuzzservers import FUZZ, THREADED_SERVERS, Servers, assert_serves

pytestmark = [pytest.mark.integration, THREADED_SERVERS]


ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNIMPLEMENTED,
}

CONTENT_FIELDS = {
    "bool_contents": st.lists(st.booleans(), max_size=9),
    "int_contents": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=9),
    "int64_contents": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=9),
    "uint_contents": st.lists(st.integers(0, 2**32 - 1), max_size=9),
    "uint64_contents": st.lists(st.integers(0, 2**64 - 1), max_size=9),
    "fp32_contents": st.lists(st.floats(width=32), max_size=9),
    "fp64_contents": st.lists(st.floats(), max_size=9),
    "bytes_contents": st.lists(st.binary(max_size=6), max_size=9),
}
KEYS = [
    "classification",
    "binary_data",
    "priority",
    "timeout",
    "shared_memory_region",
    "sequence_id",
    "echo",
    "x",
]


@st.composite
def parameter_maps(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True)):
        kind = draw(
            st.sampled_from(["bool_param", "int64_param", "uint64_param", "string_param", "double_param"])
        )
        value = {
            "bool_param": st.booleans(),
            "int64_param": st.integers(-(2**63), 2**63 - 1),
            "uint64_param": st.integers(0, 2**64 - 1),
            "string_param": st.text(max_size=6),
            "double_param": st.floats(),
        }[kind]
        out[key] = (kind, draw(value))
    return out


def _fill(target: Any, params: dict[str, Any]) -> None:
    for key, (kind, value) in params.items():
        setattr(target[key], kind, value)


@st.composite
def requests(draw: st.DrawFn) -> pb.ModelInferRequest:
    msg = pb.ModelInferRequest(
        model_name=draw(st.sampled_from(["addsub", "batched", "addsub_bytes", "addsub_fp16", "nope"])),
        model_version=draw(st.sampled_from(["", "1", "2", "x", "-1"])),
        id=draw(st.text(max_size=4)),
    )
    _fill(msg.parameters, draw(parameter_maps()))
    raw = draw(st.booleans())
    for _ in range(draw(st.integers(0, 3))):
        entry = msg.inputs.add(
            name=draw(st.sampled_from(["INPUT0", "INPUT1", "nope"])),
            datatype=draw(
                st.sampled_from(["INT32", "FP16", "BYTES", "BOOL", "FP32", "UINT64", "BF16", "??"])
            ),
            shape=draw(st.sampled_from([[1, 4], [4], [2, 4]]) | st.lists(st.integers(-2, 2**40), max_size=3)),
        )
        _fill(entry.parameters, draw(parameter_maps()))
        if raw:
            msg.raw_input_contents.append(draw(st.binary(max_size=40)))
        else:
            field = draw(st.sampled_from(sorted(CONTENT_FIELDS)))
            getattr(entry.contents, field).extend(draw(CONTENT_FIELDS[field]))
    if raw and draw(st.booleans()):
        msg.raw_input_contents.append(draw(st.binary(max_size=8)))  # one too many
    for _ in range(draw(st.integers(0, 2))):
        out = msg.outputs.add(name=draw(st.sampled_from(["OUTPUT0", "OUTPUT1", "nope"])))
        _fill(out.parameters, draw(parameter_maps()))
    return msg


def _check(error: grpc.RpcError | None) -> None:
    if error is None:
        return
    assert error.code() in ALLOWED, (error.code(), error.details())
    assert error.details() and "Traceback" not in error.details()


@FUZZ
@given(request=requests())
def test_model_infer(servers: Servers, request: pb.ModelInferRequest) -> None:
    with grpc.insecure_channel(servers.grpc.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            stub.ModelInfer(request, timeout=10)  # DEADLINE_EXCEEDED (a hang) is not allowed
        except grpc.RpcError as exc:
            _check(exc)


@FUZZ
@given(batch=st.lists(requests(), min_size=1, max_size=4))
def test_model_stream_infer(servers: Servers, batch: list[pb.ModelInferRequest]) -> None:
    with grpc.insecure_channel(servers.grpc.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            answers = list(stub.ModelStreamInfer(iter(batch), timeout=10))
        except grpc.RpcError as exc:
            _check(exc)
            return
    assert len(answers) == len(batch)  # one answer (or error message) per request, none lost
    for answer in answers:
        assert "internal error" not in answer.error_message


def test_still_serves_after_fuzzing(servers: Servers) -> None:
    assert_serves(servers.http.url)
