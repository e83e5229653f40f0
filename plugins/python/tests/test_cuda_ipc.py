"""GPU tensors between server and stub through CUDA IPC: the wire descriptors both ways,
the blocks' lifetimes, the fallback to host data, and when IPC is used.

The descriptor and lifetime tests run on the CPU with ``HostCuda``: the five CUDA
calls done in host memory (an "IPC handle" names a buffer of this process). That
exercises exactly this code's bookkeeping, never CUDA; the real path runs in
``tests/integration/test_cuda_ipc_served.py`` (``gpu``).
"""

from __future__ import annotations

import ctypes
import gc
import socket
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _cuda
from triton_python_backend_utils._api import GpuTensor
from triton_python_backend_utils._convert import bls_request_to_wire, tensor_from_wire, tensor_to_wire
from triton_python_backend_utils._convert import response_from_wire as stub_response_from_wire
from triton_python_backend_utils._device import DeviceLink
from triton_python_backend_utils._gpu_memory import KDLCUDA, GpuView, gpu_source
from triton_python_backend_utils._stub import _device_link
from triton_python_backend_utils._wire import Arena, Link
from tritonpy_backend_python import uses_cuda_ipc
from tritonpy_backend_python._convert import (
    _device_tensor,
    bls_request_from_pb,
    bls_request_from_wire,
    response_from_wire,
)
from tritonpy_backend_python._convert import response_to_wire as server_response_to_wire
from tritonpy_backend_python._convert import tensor_from_wire as server_tensor_from_wire
from tritonpy_sdk import Backend, DataType, DeviceArray, InferenceResponse, Model, ModelInstance, Tensor


class HostCuda:
    """``_cuda.Cuda``'s calls on host memory, for the bookkeeping tests only."""

    def __init__(self) -> None:
        self.buffers: dict[int, Any] = {}
        self.opened: list[bytes] = []
        self.closed: list[int] = []

    def malloc(self, device: int, nbytes: int) -> int:
        buffer = ctypes.create_string_buffer(nbytes)
        self.buffers[ctypes.addressof(buffer)] = buffer
        return ctypes.addressof(buffer)

    def free(self, device: int, address: int) -> None:
        del self.buffers[address]

    def ipc_handle(self, device: int, address: int) -> bytes:
        return address.to_bytes(8, "little") * 8

    def ipc_open(self, device: int, handle: bytes) -> int:
        self.opened.append(handle)
        return int.from_bytes(handle[:8], "little")

    def ipc_close(self, device: int, address: int) -> None:
        self.closed.append(address)

    def copy(self, device: int, dst: int, src: int, nbytes: int, wait_device: bool = True) -> None:
        ctypes.memmove(dst, src, nbytes)

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)


@pytest.fixture
def links(tmp_path: Path) -> Iterator[tuple[Link, Link, HostCuda]]:
    """(server, stub, cuda): both ends of a link with device arenas of 1 MiB."""
    ours, theirs = socket.socketpair()
    p2c = Arena(str(tmp_path / "p2c"), 1 << 20, create=True)
    c2p = Arena(str(tmp_path / "c2p"), 1 << 20, create=True)
    server = Link(Connection(ours.detach()), mine=p2c, theirs=c2p)
    stub = Link(Connection(theirs.detach()), mine=c2p, theirs=p2c)
    cuda = HostCuda()
    server.device = DeviceLink(server, cuda, 1 << 20)  # type: ignore[arg-type]
    stub.device = DeviceLink(stub, cuda, 1 << 20)  # type: ignore[arg-type]
    yield server, stub, cuda
    server.conn.close()
    stub.conn.close()


def _on_gpu(values: np.ndarray[Any, Any], device: int = 0) -> tuple[DeviceArray, Any]:
    """Host memory labelled as memory of GPU ``device`` (what the core hands the backend)."""
    buffer = ctypes.create_string_buffer(values.tobytes(), values.nbytes)

    def to_host() -> np.ndarray[Any, Any]:
        copy: np.ndarray[Any, Any] = np.frombuffer(bytes(buffer), dtype=values.dtype)
        return copy.reshape(values.shape)

    array = DeviceArray(
        ctypes.addressof(buffer), values.shape, values.dtype, device_id=device, owner=buffer, to_host=to_host
    )
    return array, buffer


def _in_use(link: Link, device: int = 0) -> int:
    assert link.device is not None
    arena = link.device._mine.get(device)
    return 0 if arena is None else arena.in_use


def test_a_gpu_input_crosses_as_a_handle_and_comes_back_as_a_gpu_tensor(links: Any) -> None:
    server, stub, cuda = links
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    array, source = _on_gpu(values, device=1)
    desc = _device_tensor(server, "X", Tensor.on_device("X", array, DataType.FP32))
    name, datatype, shape, where, place, nbytes = desc
    assert (name, datatype, shape, where, nbytes) == ("X", "FP32", (3, 4), "g", 48)
    device, handle, offset = place
    assert device == 1 and len(handle) == _cuda.IPC_HANDLE_SIZE and offset == 0
    source.raw = bytes(48)  # the source may go: the block holds a copy

    server.send({"i": [desc]})
    (got,) = stub.recv()["i"]
    tensor = tensor_from_wire(stub, got)
    assert isinstance(tensor, GpuTensor) and not tensor.is_cpu()
    assert tensor.memory_type() == pb_utils.TRITONSERVER_MEMORY_GPU
    assert tensor.shape() == [3, 4] and tensor.triton_dtype_name() == "FP32"
    assert tensor.__dlpack_device__() == (KDLCUDA, 1)
    np.testing.assert_array_equal(tensor.to_host(), values)
    with pytest.raises(pb_utils.TritonModelException, match="stored in GPU"):
        tensor.as_numpy()
    assert cuda.opened == [handle]  # the server's arena, opened once

    # The block stays the stub's until its last user is gone; then it goes back
    # with the stub's next message.
    capsule = tensor.to_dlpack()
    del tensor
    gc.collect()
    assert _in_use(server, 1) == 64 and not stub._releases
    del capsule
    gc.collect()
    assert list(stub._releases) == [(1, 0)]
    stub.send({"op": "x"})
    server.recv()
    assert _in_use(server, 1) == 0


def test_the_arena_is_opened_once_for_many_tensors(links: Any) -> None:
    server, stub, cuda = links
    received = []
    for i in range(5):
        array, _ = _on_gpu(np.full(8, i, np.int32))
        server.send({"i": [_device_tensor(server, "X", Tensor.on_device("X", array, DataType.INT32))]})
        received.append(tensor_from_wire(stub, stub.recv()["i"][0]))
    assert [t.to_host().tolist() for t in received] == [[i] * 8 for i in range(5)]  # type: ignore[attr-defined]
    assert len(cuda.opened) == 1
    assert _in_use(server) == 5 * 64


def test_a_gpu_output_crosses_and_the_server_copies_it_out(links: Any) -> None:
    server, stub, _ = links
    values = np.arange(6, dtype=np.int64)
    array, _keep = _on_gpu(values)
    view = GpuView(array.address, values.shape, values.dtype, 0, _keep, lambda: values)
    desc = tensor_to_wire(stub, GpuTensor("Y", view, pb_utils.TRITONSERVER_TYPE_INT64))
    assert desc[3] == "g" and desc[2] == (6,)
    stub.send({"o": [desc]})
    (got,) = server.recv()["o"]
    response = response_from_wire(server, ([got], None, {}))  # no device memory: to the host
    out = response.outputs["Y"]
    assert not out.is_device and out.data.tolist() == list(range(6))
    assert list(server._releases) == [(0, 0)]  # copied: handed back at once
    server.send({"op": "x"})
    stub.recv()
    assert _in_use(stub) == 0


class HostDeviceMemory:
    """The core's ``DeviceMemory`` protocol on host memory labelled as GPU memory."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        array, buffer = _on_gpu(np.zeros(shape, dtype), device_id)
        self.kept.append(buffer)
        return array

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)


def test_a_gpu_output_lands_in_the_instances_device_memory(links: Any) -> None:
    server, stub, _ = links
    values = np.arange(4, dtype=np.float32)
    array, keep = _on_gpu(values)
    view = GpuView(array.address, values.shape, values.dtype, 0, keep, lambda: values)
    stub.send({"o": [tensor_to_wire(stub, GpuTensor("Y", view, pb_utils.TRITONSERVER_TYPE_FP32))]})
    (got,) = server.recv()["o"]
    memory = HostDeviceMemory()
    tensor = server_tensor_from_wire(server, got, memory)
    assert tensor.is_device and tensor.device is not None and tensor.device.device_id == 0
    assert np.frombuffer(memory.kept[0].raw, np.float32).tolist() == [0, 1, 2, 3]


def test_a_gpu_input_passed_back_as_an_output_is_copied_from_the_servers_arena(links: Any) -> None:
    server, stub, _ = links
    array, _keep = _on_gpu(np.arange(4, dtype=np.int32))
    server.send({"i": [_device_tensor(server, "X", Tensor.on_device("X", array, DataType.INT32))]})
    tensor = tensor_from_wire(stub, stub.recv()["i"][0])
    out = pb_utils.Tensor.from_dlpack("Y", tensor)
    desc = tensor_to_wire(stub, out)
    assert desc[3] == "g"
    stub.send({"o": [desc]})
    got = server_tensor_from_wire(server, server.recv()["o"][0], None)
    assert got.data.tolist() == [0, 1, 2, 3]


def test_without_cuda_ipc_gpu_tensors_cross_as_host_data(links: Any) -> None:
    server, stub, _ = links
    server.device = stub.device = None
    array, _keep = _on_gpu(np.arange(3, dtype=np.float64))
    desc = _device_tensor(server, "X", Tensor.on_device("X", array, DataType.FP64))
    assert desc[3] in ("i", "s")
    view = GpuView(array.address, (3,), np.float64, 0, _keep, lambda: np.arange(3, dtype=np.float64))
    desc = tensor_to_wire(stub, GpuTensor("Y", view, pb_utils.TRITONSERVER_TYPE_FP64))
    assert desc[3] in ("i", "s") and stub.get(desc).tolist() == [0.0, 1.0, 2.0]


def test_a_bls_request_asks_for_its_outputs_where_its_preferred_memory_says(links: Any) -> None:
    """Triton's ``PreferredMemory``: GPU asks the called model for its outputs on that GPU
    (a request naming none names them all); CPU, or none, keeps them in host memory."""
    server, stub, _ = links
    outputs_of = {("m", -1): ["Y", "Z"]}

    def request(preferred: pb_utils.PreferredMemory | None, names: list[str]) -> list[tuple[str, int | None]]:
        pb_request = pb_utils.InferenceRequest(
            model_name="m", requested_output_names=names, inputs=[], preferred_memory=preferred
        )
        desc = bls_request_to_wire(stub, pb_request)
        made = bls_request_from_wire(server, desc, None, lambda m, v: outputs_of[(m, v)])
        return [(o.name, o.device_id) for o in made.requested_outputs]

    gpu1 = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 1)
    assert request(gpu1, ["Z"]) == [("Z", 1)]
    assert request(gpu1, []) == [("Y", 1), ("Z", 1)]
    assert request(pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0), ["Z"]) == [("Z", None)]
    assert request(None, []) == []
    server.device = None  # no CUDA IPC to this stub: its outputs come as host data
    assert request(gpu1, ["Z"]) == [("Z", None)]


def test_a_bls_output_on_the_gpu_reaches_the_stub_as_a_gpu_tensor(links: Any) -> None:
    """Where the called model put it, as Triton hands BLS outputs over without a
    ``PreferredMemory``; one that prefers the CPU gets host data."""
    server, stub, _ = links
    values = np.arange(6, dtype=np.int32).reshape(2, 3)
    array, _keep = _on_gpu(values, device=1)
    on_host = np.ones(2, np.float32)
    response = InferenceResponse(
        {"Y": Tensor.on_device("Y", array, DataType.INT32), "H": Tensor.from_numpy("H", on_host)}
    )
    server.send({"r": server_response_to_wire(server, response)})
    got = stub_response_from_wire(stub, stub.recv()["r"])
    y = pb_utils.get_output_tensor_by_name(got, "Y")
    assert isinstance(y, GpuTensor) and not y.is_cpu() and y.__dlpack_device__() == (KDLCUDA, 1)
    np.testing.assert_array_equal(y.to_host(), values)
    h = pb_utils.get_output_tensor_by_name(got, "H")
    assert h.is_cpu() and h.as_numpy().tolist() == [1.0, 1.0]
    server.send({"r": server_response_to_wire(server, response, to_host=True)})  # preferred the CPU
    got = stub_response_from_wire(stub, stub.recv()["r"])
    assert pb_utils.get_output_tensor_by_name(got, "Y").as_numpy().tolist() == values.tolist()
    server.device = None  # without CUDA IPC: host data, as before
    server.send({"r": server_response_to_wire(server, response)})
    got = stub_response_from_wire(stub, stub.recv()["r"])
    assert pb_utils.get_output_tensor_by_name(got, "Y").as_numpy().tolist() == values.tolist()


def test_a_tensor_larger_than_the_arena_crosses_as_host_data(links: Any) -> None:
    server, _, _ = links
    values = np.zeros((1 << 20) // 4 + 1, np.float32)
    array, _keep = _on_gpu(values)
    desc = _device_tensor(server, "X", Tensor.on_device("X", array, DataType.FP32))
    assert desc[3] in ("i", "s", "f")  # as host data (here past the host arena too: a file)


def test_the_servers_arenas_are_freed_and_the_stubs_closed_when_the_link_ends(links: Any) -> None:
    server, stub, cuda = links
    array, _keep = _on_gpu(np.arange(4, dtype=np.int32))
    stub.send({"o": [tensor_to_wire(stub, GpuTensor("Y", _view(array), pb_utils.TRITONSERVER_TYPE_INT32))]})
    server_tensor_from_wire(server, server.recv()["o"][0], None)
    server.send({"i": [_device_tensor(server, "X", Tensor.on_device("X", array, DataType.INT32))]})
    before = len(cuda.buffers)
    server.device.close()
    assert len(cuda.closed) == 1 and len(cuda.buffers) == before - 1
    assert _device_tensor(server, "X", Tensor.on_device("X", array, DataType.INT32))[3] != "g"


def _view(array: DeviceArray) -> GpuView:
    return GpuView(array.address, array.shape, array.dtype, array.device_id, array, array.to_host)


class _Cai:
    """A producer of the CUDA array interface (as torch and cupy are)."""

    def __init__(self, strides: tuple[int, ...] | None, device: int = 2) -> None:
        self.__cuda_array_interface__ = {
            "shape": (2, 3),
            "typestr": "<f4",
            "data": (0x1000, False),
            "strides": strides,
            "version": 3,
        }
        self._device = device

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDLCUDA, self._device)


def test_a_models_gpu_tensor_is_read_through_the_cuda_array_interface() -> None:
    assert gpu_source(_Cai(None)) == (2, 0x1000, (2, 3), 24)
    assert gpu_source(_Cai((12, 4))) == (2, 0x1000, (2, 3), 24)
    assert gpu_source(_Cai((4, 8))) is None  # a transposed view: by host
    assert gpu_source(object()) is None


@pytest.mark.parametrize(
    ("kind", "value", "link_has_it", "used"),
    [
        ("KIND_GPU", "no", True, True),
        ("KIND_GPU", "no", False, False),  # no GPU or cuda-python on a side
        ("KIND_GPU", "yes", True, False),
        ("KIND_GPU", None, True, False),  # Triton's default: CPU inputs
        ("KIND_CPU", "no", True, False),
    ],
)
def test_when_a_stub_takes_gpu_inputs_through_cuda_ipc(
    kind: str, value: str | None, link_has_it: bool, used: bool
) -> None:
    config: dict[str, Any] = {"name": "m"}
    if value is not None:
        config["parameters"] = {"FORCE_CPU_ONLY_INPUT_TENSORS": {"string_value": value}}
    model = Model("m", 1, config, Path("."), Backend("python"))
    assert uses_cuda_ipc(ModelInstance("m_0", kind, 0, model), link_has_it) is used


def test_the_stub_declines_cuda_ipc_without_a_gpu_or_cuda_python(tmp_path: Path) -> None:
    if _cuda.load() is not None:
        pytest.skip("this host has a GPU and cuda-python")
    ours, theirs = socket.socketpair()
    arena = Arena(str(tmp_path / "a"), 1 << 20, create=True)
    link = Link(Connection(theirs.detach()), mine=arena, theirs=arena)
    try:
        assert _device_link(link, 64 << 20) is False and link.device is None
        assert _device_link(link, 0) is False
    finally:
        link.conn.close()
        ours.close()


def test_an_in_process_bls_request_reads_its_preferred_memory_too() -> None:
    gpu0 = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 0)
    request = pb_utils.InferenceRequest(
        model_name="m", requested_output_names=[], inputs=[], preferred_memory=gpu0
    )
    made = bls_request_from_pb(request, lambda m, v: ["Y"])
    assert [(o.name, o.device_id) for o in made.requested_outputs] == [("Y", 0)]
    plain = pb_utils.InferenceRequest(model_name="m", requested_output_names=["Y"], inputs=[])
    assert [(o.name, o.device_id) for o in bls_request_from_pb(plain).requested_outputs] == [("Y", None)]
