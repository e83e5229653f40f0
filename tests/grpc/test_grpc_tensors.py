"""ModelInfer without a server: the request from its message (``grpc/tensors.py``), its answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tritonpy.grpc import grpc_service_pb2 as pb
from tritonpy.grpc.tensors import RequestPlans, request_from_proto
from tritonpy_sdk import DataType, TritonError


def _request(datatype: str = "FP32") -> pb.ModelInferRequest:
    msg = pb.ModelInferRequest(model_name="add_sub", id="7")
    msg.parameters["sequence_id"].int64_param = 3
    for name in ("INPUT0", "INPUT1"):
        msg.inputs.add(name=name, datatype=datatype, shape=[2])
        msg.raw_input_contents.append(np.arange(2, dtype=np.float32).tobytes())
    msg.outputs.add(name="OUTPUT0")
    out = msg.outputs.add(name="OUTPUT1")
    out.parameters["classification"].int64_param = 1
    return msg


def test_every_protocol_datatype_is_known() -> None:
    for member in DataType:
        if member is DataType.BYTES:
            continue
        msg = pb.ModelInferRequest(model_name="m")
        width = np.dtype(member.numpy_dtype).itemsize
        msg.inputs.add(name="X", datatype=member.value, shape=[1])
        msg.raw_input_contents.append(bytes(width))
        request, _ = request_from_proto(msg)
        assert request.inputs["X"].datatype is member


def test_triton_parameters_as_triton_takes_them() -> None:
    # Triton 2.51, asked: the stream's flag is the only ``triton_`` key a client may send,
    # and the model does not see it; any other is refused, with these words.
    msg = _request()
    msg.parameters["triton_enable_empty_final_response"].bool_param = True
    request, _ = request_from_proto(msg)
    assert request.parameters == {"sequence_id": 3}
    plans = _learned(_plain())
    planned = _planned(plans, _plain("again").SerializeToString())
    assert planned is not None and planned.parameters == {"priority": 2}
    msg.parameters["triton_foo"].string_param = "x"
    with pytest.raises(TritonError) as info:
        request_from_proto(msg)
    assert info.value.code.name == "INVALID_ARG"
    assert info.value.message == (
        "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
        "starting with 'triton_' are allowed: triton_enable_empty_final_response"
    )


def test_unknown_datatype_is_a_client_error() -> None:
    with pytest.raises(TritonError) as info:
        request_from_proto(_request("FLOAT"))
    assert info.value.message == "invalid datatype 'FLOAT' for input 'INPUT0'"


# Triton 2.51's gRPC front end, asked (the reference server): each reserved parameter's
# kinds, and what it makes of a negative number.
@pytest.mark.parametrize(
    ("key", "kind", "value", "message"),
    [
        ("timeout", "string_param", "x", "invalid value type for 'timeout' parameter, expected int64_param."),
        ("timeout", "bool_param", True, "invalid value type for 'timeout' parameter, expected int64_param."),
        (
            "priority",
            "string_param",
            "1",
            "invalid value type for 'priority' parameter, expected int64_param or uint64_param.",
        ),
        ("priority", "int64_param", -1, "invalid value for 'priority', expected value >= 0."),
        (
            "sequence_id",
            "bool_param",
            True,
            "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
        ),
        (
            "sequence_id",
            "double_param",
            1.5,
            "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
        ),
        (
            "sequence_start",
            "int64_param",
            1,
            "invalid value type for 'sequence_start' parameter, expected bool_param.",
        ),
        (
            "sequence_end",
            "string_param",
            "yes",
            "invalid value type for 'sequence_end' parameter, expected bool_param.",
        ),
    ],
)
def test_reserved_parameters_of_the_wrong_kind_in_tritons_grpc_words(
    key: str, kind: str, value: Any, message: str
) -> None:
    msg = _request()
    msg.parameters.clear()
    setattr(msg.parameters[key], kind, value)
    with pytest.raises(TritonError) as info:
        request_from_proto(msg)
    assert info.value.code.name == "INVALID_ARG"
    assert info.value.message == message


def test_negative_timeouts_and_sequence_ids_are_their_unsigned_values() -> None:
    msg = _request()
    msg.parameters["sequence_id"].int64_param = -3
    msg.parameters["timeout"].int64_param = -5
    msg.parameters["priority"].uint64_param = 2
    request, _ = request_from_proto(msg)
    assert request.parameters == {"sequence_id": 2**64 - 3, "timeout": 2**64 - 5, "priority": 2}


def test_raw_contents_missing_for_an_input_in_tritons_words() -> None:
    msg = _request()
    del msg.raw_input_contents[1]
    with pytest.raises(TritonError) as info:
        request_from_proto(msg)
    assert (
        info.value.message == "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request."
    )
    del msg.raw_input_contents[0]  # no raw contents and no typed contents either
    with pytest.raises(TritonError) as info:
        request_from_proto(msg)
    assert (
        info.value.message == "unable to find data for input tensor 'INPUT0' for model 'add_sub' in request."
    )
    # More raw contents than inputs: the rest is left unread, as Triton leaves it.
    extra = _request()
    extra.raw_input_contents.append(b"unread")
    request, _ = request_from_proto(extra)
    assert list(request.inputs) == ["INPUT0", "INPUT1"]


def test_parameters_pass_through_and_are_fresh_dicts() -> None:
    msg = _request()
    request, slots = request_from_proto(msg)
    assert slots is None
    assert request.id == "7"
    assert request.parameters == {"sequence_id": 3}
    assert [(o.name, o.parameters) for o in request.requested_outputs] == [
        ("OUTPUT0", {}),
        ("OUTPUT1", {"classification": 1}),
    ]
    np.testing.assert_array_equal(request.inputs["INPUT1"].data, np.arange(2, dtype=np.float32))
    again, _ = request_from_proto(msg)
    assert again.requested_outputs[0].parameters is not request.requested_outputs[0].parameters
    bare = pb.ModelInferRequest(model_name="m")
    bare.inputs.add(name="X", datatype="FP32", shape=[1])
    bare.raw_input_contents.append(bytes(4))
    assert request_from_proto(bare)[0].parameters == {}


def test_unary_answer_is_set_at_once_on_the_loop_and_handed_over_from_elsewhere() -> None:
    """ModelInfer's future: set in place on the loop's thread (the handler resumes on the
    next turn), set by the loop when the answer comes from another thread."""
    import asyncio
    import threading

    from tritonpy.bridges import answer_on as _answered
    from tritonpy_sdk import InferenceResponse

    async def main() -> None:
        loop = asyncio.get_running_loop()
        here: asyncio.Future[InferenceResponse] = loop.create_future()
        response = InferenceResponse({})
        _answered(loop, here, response)
        assert here.done() and here.result() is response
        _answered(loop, here, InferenceResponse({}))  # a second answer is dropped
        assert here.result() is response
        there: asyncio.Future[InferenceResponse] = loop.create_future()
        thread = threading.Thread(target=_answered, args=(loop, there, response))
        thread.start()
        thread.join()
        assert not there.done()  # queued for the loop, not set from the other thread
        assert await there is response

    asyncio.run(main())


# -- RequestPlans: the same request as request_from_proto, or none -----------------------------


def _fields(request: Any) -> tuple[Any, ...]:
    inputs = [
        (name, t.name, t.datatype, t.data.dtype, t.data.shape, t.data.flags.writeable, t.data.tolist())
        for name, t in request.inputs.items()
    ]
    outputs = [(o.name, o.parameters, o.device_id) for o in request.requested_outputs]
    return (
        request.model_name,
        request.model_version,
        request.id,
        request.parameters,
        inputs,
        outputs,
        request.trace_context,
        request.correlation_id,
        request.flags,
        request.priority,
        request.timeout_us,
    )


def _planned(plans: RequestPlans, data: bytes) -> Any:
    """The plan's request for ``data``, checked against the general decoding's."""
    got = _request_of(plans, data)
    if got is not None:
        general, slots = request_from_proto(pb.ModelInferRequest.FromString(data))
        assert slots is None
        assert _fields(got) == _fields(general)
    return got


def _plain(
    request_id: str = "", datatype: str = "FP32", shape: tuple[int, ...] = (2, 3)
) -> pb.ModelInferRequest:
    msg = pb.ModelInferRequest(model_name="add_sub", model_version="1", id=request_id)
    msg.parameters["triton_enable_empty_final_response"].bool_param = True
    msg.parameters["priority"].int64_param = 2
    count = int(np.prod(shape))
    for name in ("INPUT0", "INPUT1"):
        msg.inputs.add(name=name, datatype=datatype, shape=list(shape))
        if datatype == "BYTES":
            from tritonpy_sdk import serialize_bytes_tensor

            values = np.array([f"v{i}".encode() for i in range(count)], dtype=np.object_)
            msg.raw_input_contents.append(bytes(serialize_bytes_tensor(values)))
        else:
            dtype = DataType(datatype).numpy_dtype
            msg.raw_input_contents.append(np.arange(count).astype(dtype).tobytes())
    msg.outputs.add(name="OUTPUT0")
    msg.outputs.add(name="OUTPUT1")
    return msg


def _learned(msg: pb.ModelInferRequest, plans: RequestPlans | None = None) -> RequestPlans:
    plans = plans or RequestPlans()
    data = msg.SerializeToString()
    for _ in range(2):  # a plan is made the second time a layout comes
        assert _request_of(plans, data) is None
        request, slots = request_from_proto(msg)
        split = plans.split(data)
        if split is not None:
            plans.learn(split, msg, request, slots)
    return plans


def _request_of(plans: RequestPlans, data: bytes) -> Any:
    split = plans.split(data)
    return None if split is None else plans.request(data, split)


@pytest.mark.parametrize("datatype", ["FP32", "INT64", "BOOL", "FP16", "BF16", "UINT8", "BYTES"])
def test_a_plan_makes_the_general_request(datatype: str) -> None:
    plans = _learned(_plain("first", datatype))
    for request_id in ("", "second", "é" * 200):  # the id is read from each message
        msg = _plain(request_id, datatype)
        msg.raw_input_contents[1] = (
            msg.raw_input_contents[0][::-1] if datatype != "BYTES" else msg.raw_input_contents[1]
        )
        got = _planned(plans, msg.SerializeToString())
        assert got is not None and got.id == request_id
    assert _planned(plans, _plain("x", datatype, (3, 2)).SerializeToString()) is None  # another shape


def test_a_planned_request_whose_inputs_do_not_fit_is_decoded_in_full() -> None:
    plans = _learned(_plain())
    short = _plain()
    short.raw_input_contents[1] = short.raw_input_contents[1][:-1]
    assert _request_of(plans, short.SerializeToString()) is None  # request_from_proto words the error
    one = _plain()
    del one.raw_input_contents[1]
    assert _request_of(plans, one.SerializeToString()) is None
    data = _plain("abc").SerializeToString()
    bad_id = data.replace(b"abc", b"a\xffc")  # not UTF-8: the parser's error
    assert _request_of(plans, bad_id) is None
    with pytest.raises(Exception):  # noqa: B017, PT011 - protobuf's DecodeError
        pb.ModelInferRequest.FromString(bad_id)


def test_what_is_not_planned() -> None:
    """Shared memory, parameters on inputs or outputs, typed contents, fields after the raw
    contents, an id given twice: always the general decoding."""
    in_params = _plain()
    in_params.inputs[0].parameters["x"].int64_param = 1
    out_params = _plain()
    out_params.outputs[0].parameters["classification"].int64_param = 1
    typed = pb.ModelInferRequest(model_name="m")
    typed.inputs.add(name="X", datatype="INT32", shape=[2]).contents.int_contents.extend([1, 2])
    for msg in (in_params, out_params, typed):
        plans = _learned(msg)
        assert _request_of(plans, msg.SerializeToString()) is None
    plans = _learned(_plain())
    data = _plain().SerializeToString()
    assert _planned(plans, data) is not None
    assert _request_of(plans, data + b"\x0a\x01m") is None  # model_name after the raw contents
    assert _planned(plans, b"\x1a\x01a" + data).id == "a"  # an id before the name: the same plan
    assert _request_of(plans, b"\x1a\x01a" + _plain("b").SerializeToString()) is None  # two ids
    assert _request_of(plans, data + b"\x38\x01") is None  # a varint field 7
    assert _request_of(plans, data[:-1]) is None  # cut short


def test_a_layout_seen_once_makes_no_plan() -> None:
    """Messages that differ each call (a sequence id) make no plans; what is kept of
    them is bounded."""
    plans = RequestPlans(size=4)
    for n in range(100):
        msg = _plain()
        msg.parameters["sequence_id"].int64_param = n
        data = msg.SerializeToString()
        assert _request_of(plans, data) is None
        request, slots = request_from_proto(msg)
        split = plans.split(data)
        assert split is not None
        plans.learn(split, msg, request, slots)
        assert not plans._plans and len(plans._seen) <= 16
    plans.learn(split, msg, request, slots)  # the last one, again: now planned
    assert _planned(plans, data) is not None


def test_no_plan_for_a_long_layout() -> None:
    """What is kept of a layout is bounded: a message whose fields but its raw contents
    and id take over 4 KiB is never planned."""
    plans = RequestPlans()
    long_id = _plain("i" * 10_000)  # the id is not kept
    assert plans.split(long_id.SerializeToString()) is not None
    long_params = _plain()
    long_params.parameters["note"].string_param = "n" * 5000
    assert plans.split(long_params.SerializeToString()) is None


def test_plans_are_bounded() -> None:
    plans = RequestPlans(size=4)
    for n in range(10):
        msg = _plain()
        msg.model_name = f"m{n}"
        _learned(msg, plans)
        assert len(plans._plans) <= 4


def test_mutated_messages_never_differ_from_the_general_decoding() -> None:
    """Random bytes changed in planned messages: the plan answers None, or what
    request_from_proto makes of the same bytes (which must then parse)."""
    import random

    rng = random.Random(11)
    plans = _learned(_plain("id"))
    _learned(_plain("id", "BYTES"), plans)
    hits = 0
    for n in range(3000):
        data = bytearray(_plain("id", "BYTES" if n % 2 else "FP32").SerializeToString())
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        got = _request_of(plans, bytes(data))
        if got is not None:
            hits += 1
            try:
                general, _ = request_from_proto(pb.ModelInferRequest.FromString(bytes(data)))
            except TritonError:
                raise AssertionError(f"planned, yet the general decoding refuses {bytes(data)!r}") from None
            assert _fields(got) == _fields(general)
    assert hits  # changes within the raw contents still fit


# -- ResponseEncoder: response_to_proto's bytes, or none ----------------------------------------


def _response(name: str = "add_sub", version: int = 1, rid: str = "", **outputs: Any) -> Any:
    from tritonpy_sdk import InferenceResponse, Tensor

    tensors = {key: Tensor(key, array, datatype) for key, (array, datatype) in outputs.items()}
    return InferenceResponse(tensors, model_name=name, model_version=version, id=rid)


def test_encoded_responses_are_protobufs_bytes() -> None:
    from tritonpy.grpc.tensors import ResponseEncoder, response_to_proto

    big = np.arange(40_000, dtype=np.float32).reshape(200, 200)
    strings = np.array([b"a", "é".encode(), b"x" * 300], dtype=np.object_)
    cases = [
        _response(OUTPUT0=(np.arange(4, dtype=np.float32), DataType.FP32)),
        _response(rid="req-é", OUTPUT0=(np.arange(4, dtype=np.int64), DataType.INT64)),
        _response(name="", version=0, OUTPUT0=(np.float32(3.5).reshape(()), DataType.FP32)),  # 0-d, no name
        _response(version=-1, Y=(big, DataType.FP32), Z=(big.T, DataType.FP32)),  # not contiguous
        _response(S=(strings, DataType.BYTES), B=(np.array([True, False]), DataType.BOOL)),
        _response(E=(np.zeros((0, 3), np.float16), DataType.FP16)),
        _response(**{"": (np.arange(3, dtype=np.uint8), DataType.UINT8)}),  # an unnamed output
        _response(L=(np.zeros((1, 300, 2), np.int8), DataType.INT8)),  # a dim over 127
        _response("m" * 200, 12345, "i" * 200),  # no outputs; long fields
    ]
    encoder = ResponseEncoder()
    for _ in range(2):  # made, then kept
        for response in cases:
            assert encoder.encode(response) == response_to_proto(response).SerializeToString()


def test_what_the_encoder_leaves_to_protobuf() -> None:
    from tritonpy.grpc.tensors import ResponseEncoder

    encoder = ResponseEncoder(size=2)
    plain = _response(OUTPUT0=(np.arange(4, dtype=np.float32), DataType.FP32))
    with_params = _response(OUTPUT0=(np.arange(4, dtype=np.float32), DataType.FP32))
    with_params.parameters["p"] = 1
    assert encoder.encode(with_params) is None
    odd = _response(OUTPUT0=(np.arange(4, dtype=np.float32), DataType.FP32))
    odd.model_version = True  # type: ignore[assignment]  # not an int: str() differs
    assert encoder.encode(plain) is not None and encoder.encode(odd) is None
    for n in range(5):
        assert encoder.encode(_response(name=f"m{n}")) is not None
        assert len(encoder._heads) <= 2


@pytest.mark.parametrize("asked", [True, False])
def test_decode_keeps_a_streams_empty_final_flag_in_the_plan(asked: bool) -> None:
    """``RequestPlans.decode``: the first two messages of a layout are parsed, the third
    comes from the plan; each says whether it asked for the empty final response, which
    the request's parameters leave out."""
    plans = RequestPlans()
    got = []
    for i in range(3):
        msg = _plain(f"r{i}", "FP32")
        msg.parameters["triton_enable_empty_final_response"].bool_param = asked
        decoded = plans.decode(msg.SerializeToString(), None)
        assert decoded is not None
        request, slots, parsed, empty_final = decoded
        assert request.id == f"r{i}" and slots is None
        assert "triton_enable_empty_final_response" not in request.parameters
        got.append((parsed is None, empty_final))
    assert got == [(False, asked), (False, asked), (True, asked)]
    assert plans.decode(b"\xff\xff", None) is None  # not a ModelInferRequest
