"""GPU tensors in the Python backend: ``pb_utils.Tensor`` with ``is_cpu()`` false,
handed to an in-process model in place and taken back from it without a copy.
On the CPU the memory is host memory labelled as CUDA (the conversions are the
same); the ``gpu``-marked test uses real torch CUDA tensors."""

from __future__ import annotations

import ctypes
import socket
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils._api import GpuTensor
from triton_python_backend_utils._convert import tensor_to_wire
from triton_python_backend_utils._wire import Arena, Link
from tritonpy_backend_python import takes_gpu_inputs
from tritonpy_backend_python._convert import request_to_pb, response_from_pb, tensor_from_pb
from tritonpy_sdk import (
    KDLCUDA,
    Backend,
    DataType,
    DeviceArray,
    InferenceRequest,
    Model,
    ModelInstance,
    Tensor,
)


def _labelled_cuda(values: np.ndarray[Any, Any], device_id: int = 1) -> tuple[DeviceArray, Any]:
    """Host memory presented as CUDA memory of ``device_id``, with a host copy."""
    buffer = ctypes.create_string_buffer(values.tobytes(), values.nbytes)

    def to_host() -> np.ndarray[Any, Any]:
        return np.frombuffer(bytes(buffer), dtype=values.dtype).reshape(values.shape)

    address = ctypes.addressof(buffer)
    array = DeviceArray(
        address, values.shape, values.dtype, device_id=device_id, owner=buffer, to_host=to_host
    )
    return array, buffer


def test_a_gpu_input_reaches_an_in_process_model_in_place() -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    array, _ = _labelled_cuda(values)
    request = InferenceRequest("m", 1, {"X": Tensor.on_device("X", array, DataType.FP32)})
    (tensor,) = request_to_pb(request, ["Y"]).inputs()
    assert isinstance(tensor, pb_utils.Tensor) and not tensor.is_cpu()
    assert tensor.memory_type() == pb_utils.TRITONSERVER_MEMORY_GPU
    assert tensor.shape() == [2, 3] and tensor.triton_dtype_name() == "FP32"
    assert tensor.__dlpack_device__() == (KDLCUDA, 1)
    with pytest.raises(pb_utils.TritonModelException, match="stored in GPU and cannot be converted to NumPy"):
        tensor.as_numpy()
    back = tensor_from_pb(tensor)  # e.g. a BLS input, or an output: still on the GPU
    assert back.is_device and back.device is array
    renamed = pb_utils.Tensor.from_dlpack("Y", tensor)  # a model returning its input as an output
    assert not renamed.is_cpu() and renamed.name() == "Y" and tensor_from_pb(renamed).device is array


def test_host_inputs_stay_plain_numpy_tensors() -> None:
    request = InferenceRequest("m", 1, {"X": Tensor.from_numpy("X", np.ones(2, np.int32))})
    (tensor,) = request_to_pb(request, ["Y"]).inputs()
    assert type(tensor) is pb_utils.Tensor and tensor.is_cpu()


def test_a_gpu_output_is_a_device_tensor_for_the_core() -> None:
    values = np.arange(4, dtype=np.int64)
    array, _ = _labelled_cuda(values, device_id=0)
    outputs = [GpuTensor("Y", array, pb_utils.TRITONSERVER_TYPE_INT64), pb_utils.Tensor("Z", values)]
    response = pb_utils.InferenceResponse(outputs)
    got = response_from_pb(response)
    assert got.outputs["Y"].is_device and got.outputs["Y"].device is array
    assert got.outputs["Y"].data.tolist() == [0, 1, 2, 3]  # copied to the host when something reads it
    assert not got.outputs["Z"].is_device


def test_a_gpu_tensor_crosses_to_the_server_as_host_data(tmp_path: Path) -> None:
    values = np.arange(3, dtype=np.float64)
    array, _ = _labelled_cuda(values)
    ours, theirs = socket.socketpair()
    p2c = Arena(str(tmp_path / "p2c"), 1 << 20, create=True)
    c2p = Arena(str(tmp_path / "c2p"), 1 << 20, create=True)
    server = Link(Connection(ours.detach()), mine=p2c, theirs=c2p)
    stub = Link(Connection(theirs.detach()), mine=c2p, theirs=p2c)
    try:
        stub.send({"o": [tensor_to_wire(stub, GpuTensor("Y", array, pb_utils.TRITONSERVER_TYPE_FP64))]})
        (desc,) = server.recv()["o"]
        assert server.get(desc).tolist() == [0.0, 1.0, 2.0]
    finally:
        server.conn.close()
        stub.conn.close()


@pytest.mark.parametrize(
    ("kind", "value", "takes"),
    [
        ("KIND_GPU", "no", True),
        ("KIND_GPU", "yes", False),
        ("KIND_GPU", None, False),
        ("KIND_CPU", "no", False),
    ],
)
def test_force_cpu_only_input_tensors_decides_for_gpu_instances(
    kind: str, value: str | None, takes: bool
) -> None:
    config: dict[str, Any] = {"name": "m"}
    if value is not None:
        config["parameters"] = {"FORCE_CPU_ONLY_INPUT_TENSORS": {"string_value": value}}
    model = Model("m", 1, config, Path("/nowhere"), Backend("python"))
    assert takes_gpu_inputs(ModelInstance("m_0", kind, 0, model)) is takes


@pytest.mark.gpu
def test_a_torch_cuda_tensor_goes_through_from_dlpack_without_a_copy() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    source = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    tensor = pb_utils.Tensor.from_dlpack("Y", source)
    assert not tensor.is_cpu() and tensor.shape() == [2, 3] and tensor.triton_dtype_name() == "FP32"
    again = torch.from_dlpack(tensor)
    assert again.data_ptr() == source.data_ptr()
    core = tensor_from_pb(tensor)
    assert core.is_device and core.device is not None and core.device.address == source.data_ptr()
    assert core.data.tolist() == [[0, 1, 2], [3, 4, 5]]
