"""Where the core says each requested output is wanted (``RequestedOutput.device_id``):
on the GPU of the client's CUDA shared-memory region it goes to (HTTP and gRPC, on a
host-memory stand-in for the CUDA runtime), and inside an ensemble on the GPU where
every step that reads it takes device inputs; nowhere else. The ensemble's decision
is checked on its parts and served in process (members on the CPU here: the client's
wish alone); the served GPU paths are the ``gpu``-marked tests of the torch backend."""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
import tritonpy
from tritonpy.grpc import grpc_service_pb2 as pb
from tritonpy.grpc.tensors import request_from_proto
from tritonpy.http.tensors import decode_request
from tritonpy.memory import SystemSharedMemory
from tritonpy.memory.placement import input_device
from tritonpy.runtime.ensemble_plan import with_readers
from tritonpy.runtime.responses import finish_response
from tritonpy.runtime.spec import IOSpec
from tritonpy.scheduler.ensemble import Step, step_outputs
from tritonpy_ensembles import StepBackend, write_pipe
from tritonpy_hostcuda import HostRuntime
from tritonpy_sdk import (
    Backend,
    DataType,
    DeviceArray,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    RequestedOutput,
    Tensor,
    hookimpl,
)

X = np.array([[1.0, 2.0]], np.float32)


@pytest.fixture
def memory() -> Iterator[SystemSharedMemory]:
    runtime = HostRuntime(device_count=2)
    made = SystemSharedMemory(runtime)
    handle, _ = runtime.export(256)
    made.register_cuda("gpu1", handle, 1, 256)
    yield made
    made.unregister_cuda()


def _region(name: str, byte_size: int = 8) -> dict[str, Any]:
    return {"shared_memory_region": name, "shared_memory_byte_size": byte_size, "shared_memory_offset": 0}


def _http(memory: SystemSharedMemory, outputs: list[dict[str, Any]]) -> InferenceRequest:
    header = {
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}],
        "outputs": outputs,
    }
    request, _, _ = decode_request("m", "", json.dumps(header).encode(), memoryview(b""), memory)
    return request


def test_http_a_cuda_region_output_is_wanted_on_its_gpu(memory: SystemSharedMemory) -> None:
    request = _http(
        memory,
        [
            {"name": "Y", "parameters": _region("gpu1")},
            {"name": "Z", "parameters": {"binary_data": True}},
            {"name": "W"},
        ],
    )
    assert [(o.name, o.device_id) for o in request.requested_outputs] == [("Y", 1), ("Z", None), ("W", None)]
    assert request.output_device("Y") == 1
    assert request.requested_outputs[0].parameters == {}  # the region's parameters are the core's


def test_http_a_plain_or_system_region_request_wants_nothing_on_a_device(memory: SystemSharedMemory) -> None:
    assert _http(memory, []).requested_outputs == []
    key = f"/tritonpy-devout-{os.getpid()}"
    handle = shm.create_shared_memory_region("sys", key, 64)
    try:
        memory.register("sys", key, 0, 64)
        request = _http(memory, [{"name": "Y", "parameters": _region("sys")}])
        assert request.output_device("Y") is None
    finally:
        memory.unregister("sys")
        shm.destroy_shared_memory_region(handle)


def test_grpc_a_cuda_region_output_is_wanted_on_its_gpu(memory: SystemSharedMemory) -> None:
    msg = pb.ModelInferRequest(model_name="m")
    entry = msg.inputs.add(name="X", datatype="FP32", shape=[1, 2])
    entry.contents.fp32_contents.extend([1.0, 2.0])
    out = msg.outputs.add(name="Y")
    out.parameters["shared_memory_region"].string_param = "gpu1"
    out.parameters["shared_memory_byte_size"].int64_param = 8
    msg.outputs.add(name="Z")
    request, slots = request_from_proto(msg, memory)
    assert [(o.name, o.device_id) for o in request.requested_outputs] == [("Y", 1), ("Z", None)]
    assert slots is not None and slots["Y"].device_id == 1


def _instance(kind: str, device_id: int, device_inputs: bool) -> ModelInstance:
    model = Model("m", 1, {}, Path("nowhere"), Backend("test"))
    return ModelInstance(f"m_{device_id}", kind, device_id, model, device_inputs=device_inputs)


def test_a_model_takes_device_inputs_on_one_gpu_only_when_every_instance_does() -> None:
    gpu = _instance("KIND_GPU", 1, True)
    assert input_device([gpu, _instance("KIND_GPU", 1, True)]) == 1
    assert input_device([gpu, _instance("KIND_GPU", 1, False)]) is None  # one takes host memory
    assert input_device([gpu, _instance("KIND_GPU", 0, True)]) is None  # two GPUs: which one is later
    assert input_device([_instance("KIND_CPU", 0, True)]) is None
    assert input_device([_instance("KIND_MODEL", 0, True)]) is None  # placement gives it host memory
    assert input_device([]) is None  # an ensemble member has no instances


def _steps() -> list[Step]:
    """pre: IN → T; gpu_step (GPU 0) and host_step read T; both_gpu (GPU 0) reads U of gpu_step."""
    return [
        Step(0, "pre", -1, (("X", "IN"),), (("Y", "T"),)),
        Step(1, "gpu_step", -1, (("X", "T"),), (("Y", "U"),)),
        Step(2, "host_step", -1, (("X", "T"),), (("Y", "V"),)),
        Step(3, "both_gpu", -1, (("X", "U"),), (("Y", "OUT"),)),
    ]


def _wants(step: Step, wanted: Sequence[str] = (), on_device: dict[str, int] | None = None) -> list[Any]:
    return [o.device_id for o in step_outputs(step, wanted, on_device)]


def test_an_output_stays_on_the_device_only_when_every_reader_takes_it_there() -> None:
    pre, gpu_step, host_step, both_gpu = with_readers(_steps(), {0: None, 1: 0, 2: None, 3: 0})
    assert pre.readers == ((0, None),)  # one reader on GPU 0, one on the host
    assert _wants(pre) == [None]
    assert gpu_step.readers == ((0,),)
    assert _wants(gpu_step) == [0]
    assert (host_step.readers, host_step.device_readers) == (((),), False)  # nobody reads V
    assert _wants(host_step) == [None]
    assert (both_gpu.readers, both_gpu.device_readers) == (((),), False)
    assert pre.device_readers and gpu_step.device_readers
    # An ensemble output: the client is a reader too.
    assert _wants(gpu_step, wanted=("U",), on_device={"U": 0}) == [0]
    assert _wants(gpu_step, wanted=("U",), on_device={"U": 1}) == [None]  # another GPU
    assert _wants(gpu_step, wanted=("U",), on_device=None) == [None]  # the client takes host memory
    assert _wants(both_gpu, wanted=("OUT",), on_device={"OUT": 0}) == [0]
    assert _wants(both_gpu, wanted=("OUT",), on_device={"OTHER": 0}) == [None]


def test_readers_on_two_gpus_leave_the_output_on_the_host() -> None:
    steps = with_readers(_steps(), {0: None, 1: 0, 2: 1, 3: 0})
    assert steps[0].readers == ((0, 1),)
    assert _wants(steps[0]) == [None]


class Wants(StepBackend):
    """Records, per model, each request's ``{output: device_id}``."""

    def __init__(self) -> None:
        super().__init__()
        self.wants: list[tuple[str, dict[str, int | None]]] = []

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        for r in requests:
            self.wants.append((instance.model.name, {o.name: o.device_id for o in r.requested_outputs}))
        return super().execute(instance, requests)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tritonpy.Server, Wants]]:
    repo = tmp_path_factory.mktemp("repo")
    write_pipe(repo)
    backend = Wants()
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("stepbk", backend)
    with server:
        yield server, backend


def _infer(server: tritonpy.Server, model: str, outputs: list[RequestedOutput]) -> InferenceResponse:
    request = InferenceRequest(
        model, -1, {"IN" if model == "pipe" else "X": Tensor.from_numpy("X", X)}, outputs
    )
    return server.infer(request)


def test_in_process_a_wish_reaches_the_backend_and_costs_a_host_model_nothing(
    served: tuple[tritonpy.Server, Wants],
) -> None:
    server, backend = served
    backend.wants.clear()
    response = _infer(server, "pre", [RequestedOutput("Y", device_id=0)])
    assert backend.wants == [("pre", {"Y": 0})]
    assert not response.outputs["Y"].is_device  # a backend that ignores it answers as always
    np.testing.assert_array_equal(response.outputs["Y"].data, X + 1)


def test_an_ensemble_passes_the_clients_gpu_to_the_step_that_writes_its_output(
    served: tuple[tritonpy.Server, Wants],
) -> None:
    server, backend = served
    backend.wants.clear()
    response = _infer(server, "pipe", [RequestedOutput("OUT", device_id=0)])
    np.testing.assert_array_equal(response.outputs["OUT"].data, X + 101)
    # MID's only reader, post, runs on the CPU: pre's output goes to the host.
    assert sorted(backend.wants) == [("post", {"Y": 0}), ("pre", {"Y": None})]
    backend.wants.clear()
    _infer(server, "pipe", [RequestedOutput("MID", device_id=0), RequestedOutput("OUT")])
    assert sorted(backend.wants) == [
        ("post", {"Y": None}),
        ("pre", {"Y": None}),
    ]  # post reads MID on the host
    backend.wants.clear()
    _infer(server, "pipe", [])
    assert sorted(backend.wants) == [("post", {"Y": None}), ("pre", {"Y": None})]


def test_a_device_output_with_a_reshape_stays_on_the_device() -> None:
    """The config's output ``reshape`` is undone on the device tensor's shape, no copy."""
    config = {
        "name": "m",
        "max_batch_size": 4,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2, 2], "reshape": {"shape": [4]}}],
    }
    spec = IOSpec.from_config(config, 1)
    values = np.arange(8, dtype=np.float32)
    buffer = ctypes.create_string_buffer(values.tobytes(), values.nbytes)
    array = DeviceArray(
        ctypes.addressof(buffer),
        (2, 4),
        np.float32,
        owner=buffer,
        to_host=lambda: np.frombuffer(bytes(buffer), np.float32).reshape(2, 4),
    )
    request = InferenceRequest("m", 1, {}, [RequestedOutput("Y", device_id=0)])
    response = InferenceResponse({"Y": Tensor.on_device("Y", array, DataType.FP32)})
    out = finish_response(spec, {}, request, response).outputs["Y"]
    assert out.is_device and out.shape == (2, 2, 2)
    assert out.device is not None and out.device.address == array.address
    np.testing.assert_array_equal(out.data, values.reshape(2, 2, 2))
