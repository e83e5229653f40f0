"""ModelInfer without a server: the request from its message (``grpc/tensors.py``), its answer."""

from __future__ import annotations

import numpy as np
import pytest
from tritonpy.grpc import grpc_service_pb2 as pb
from tritonpy.grpc.tensors import request_from_proto
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


def test_unknown_datatype_is_a_client_error() -> None:
    with pytest.raises(TritonError) as info:
        request_from_proto(_request("FLOAT"))
    assert info.value.message == "invalid datatype 'FLOAT' for input 'INPUT0'"


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
