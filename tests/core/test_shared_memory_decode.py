"""Inputs named by shared-memory parameters reach the core request as views of
the region (no copy), over both front ends' decoders."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonpy.grpc import grpc_service_pb2 as pb
from tritonpy.grpc.tensors import request_from_proto, response_to_proto
from tritonpy.http.tensors import decode_request, encode_response
from tritonpy.memory import SystemSharedMemory
from tritonpy_sdk import DataType, InferenceResponse, Tensor


@pytest.fixture
def region() -> Iterator[tuple[SystemSharedMemory, object]]:
    key = f"/tritonpy-decode-{os.getpid()}"
    handle = shm.create_shared_memory_region("r", key, 4096)
    shm.set_shared_memory_region(handle, [np.arange(8, dtype=np.float32)])
    memory = SystemSharedMemory()
    memory.register("r", key, 0, 4096)
    yield memory, handle
    memory.unregister()
    shm.destroy_shared_memory_region(handle)


def test_http_inputs_are_views_and_outputs_go_to_the_region(
    region: tuple[SystemSharedMemory, object],
) -> None:
    memory, handle = region
    doc = {
        "inputs": [
            {
                "name": "X",
                "shape": [4],
                "datatype": "FP32",
                "parameters": {
                    "shared_memory_region": "r",
                    "shared_memory_byte_size": 16,
                    "shared_memory_offset": 8,
                },
            }
        ],
        "outputs": [
            {
                "name": "Y",
                "parameters": {
                    "shared_memory_region": "r",
                    "shared_memory_byte_size": 16,
                    "shared_memory_offset": 64,
                    "binary_data": False,  # as tritonclient sends it
                },
            },
            {"name": "Z", "parameters": {"binary_data": False}},
        ],
    }
    request, binary, placements = decode_request("m", "", json.dumps(doc).encode(), memoryview(b""), memory)
    x = request.inputs["X"].data
    assert x.tolist() == [2, 3, 4, 5]
    shm.set_shared_memory_region(handle, [np.array([40.0], np.float32)], offset=8)  # the client writes...
    assert x.tolist() == [40, 3, 4, 5]  # ...and the request sees it: a view, not a copy
    assert [o.parameters for o in request.requested_outputs] == [{}, {}]  # consumed by the front end
    response = InferenceResponse(
        {"Y": Tensor("Y", x * 2, DataType.FP32), "Z": Tensor("Z", np.ones(1, np.float32), DataType.FP32)},
        model_name="m",
        model_version=1,
    )
    parts, header_length = encode_response(response, binary, placements)
    assert header_length is None and json.loads(parts[0])["outputs"] == [
        {"name": "Y", "datatype": "FP32", "shape": [4]},
        {"name": "Z", "datatype": "FP32", "shape": [1], "data": [1.0]},
    ]
    assert shm.get_contents_as_numpy(handle, np.float32, [4], offset=64).tolist() == [80, 6, 8, 10]


def test_grpc_inputs_are_views_and_raw_contents_skip_them(region: tuple[SystemSharedMemory, object]) -> None:
    memory, handle = region
    msg = pb.ModelInferRequest(model_name="m")
    shared = msg.inputs.add(name="X", datatype="FP32", shape=[2])
    shared.parameters["shared_memory_region"].string_param = "r"
    shared.parameters["shared_memory_byte_size"].int64_param = 8
    msg.inputs.add(name="W", datatype="FP32", shape=[1])
    msg.raw_input_contents.append(np.array([7], np.float32).tobytes())  # W's: X has none
    out = msg.outputs.add(name="Y")
    out.parameters["shared_memory_region"].string_param = "r"
    out.parameters["shared_memory_byte_size"].int64_param = 8
    out.parameters["shared_memory_offset"].int64_param = 128
    request, slots = request_from_proto(msg, memory)
    x = request.inputs["X"].data
    assert x.tolist() == [0, 1] and request.inputs["W"].data.tolist() == [7]
    shm.set_shared_memory_region(handle, [np.array([9.0], np.float32)])
    assert x.tolist() == [9, 1]
    response = InferenceResponse({"Y": Tensor("Y", x + 1, DataType.FP32)}, model_name="m", model_version=1)
    reply = response_to_proto(response, slots)
    assert list(reply.raw_output_contents) == [b""] and list(reply.outputs[0].shape) == [2]
    assert shm.get_contents_as_numpy(handle, np.float32, [2], offset=128).tolist() == [10, 2]
