"""Inputs used in place in CUDA shared memory, batches gathered on the device in
the per-GPU pool, and outputs copied device to device — the core's side, on a
host-memory stand-in for the CUDA runtime (the bookkeeping runs everywhere; the
real runtime is exercised by the ``gpu``-marked tests)."""

from __future__ import annotations

import ctypes
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonpy.codec import serialize_bytes_tensor
from tritonpy.http.tensors import decode_request, encode_response
from tritonpy.memory import DevicePool, PooledDeviceMemory, SystemSharedMemory
from tritonpy.memory.manager import MemoryManager
from tritonpy.memory.placement import place_inputs
from tritonpy.memory.pool import MIN_CLASS, Allocator
from tritonpy_hostcuda import HostRuntime
from tritonpy_sdk import (
    Backend,
    DataType,
    DeviceArray,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    Tensor,
    TritonError,
    gather_tensor,
)


@pytest.fixture
def runtime() -> HostRuntime:
    return HostRuntime(device_count=2)


@pytest.fixture
def memory(runtime: HostRuntime) -> Iterator[SystemSharedMemory]:
    made = SystemSharedMemory(runtime)
    yield made
    made.unregister_cuda()


def _params(region: str, byte_size: int, offset: int = 0) -> dict[str, Any]:
    return {
        "shared_memory_region": region,
        "shared_memory_byte_size": byte_size,
        "shared_memory_offset": offset,
    }


def _region(
    memory: SystemSharedMemory, runtime: HostRuntime, name: str, values: np.ndarray[Any, Any], device: int = 0
) -> ctypes.Array[ctypes.c_char]:
    handle, buffer = runtime.export(256)
    ctypes.memmove(ctypes.addressof(buffer) + 64, values.ctypes.data, values.nbytes)
    memory.register_cuda(name, handle, device, 256)
    return buffer


def _instance(kind: str = "KIND_GPU", device_id: int = 0, device_inputs: bool = True) -> ModelInstance:
    model = Model("m", 1, {}, Path("/nowhere"), Backend("test"))
    return ModelInstance("m_0", kind, device_id, model, device_inputs=device_inputs)


def test_a_cuda_region_input_is_a_device_view_not_a_copy(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    values = np.arange(16, dtype=np.int32)
    buffer = _region(memory, runtime, "c", values, device=1)
    runtime.fail_copies = True  # any copy would raise: there must be none
    tensor = memory.input_tensor("IN", DataType.INT32, [1, 16], _params("c", 64, offset=64))
    assert (tensor.is_device, tensor.memory_type, tensor.device_id, tensor.shape) == (True, "GPU", 1, (1, 16))
    assert tensor.device is not None and tensor.device.address == ctypes.addressof(buffer) + 64
    runtime.fail_copies = False
    np.testing.assert_array_equal(tensor.data, values.reshape(1, 16))  # host copy on demand


def test_device_inputs_keep_every_check_of_regions(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    _region(memory, runtime, "c", np.zeros(4, np.int32))
    with pytest.raises(TritonError) as info:
        memory.input_tensor("IN", DataType.INT32, [2], _params("c", 64, offset=224))
    assert info.value.message == "Invalid offset + byte size for shared memory region: 'c'"
    with pytest.raises(TritonError) as info:
        memory.input_tensor("IN", DataType.INT32, [2], _params("c", 12))
    assert (info.value.code, info.value.message) == (
        ErrorCode.INVALID_ARG,
        "input byte size mismatch for input 'IN'. Expected 8, got 12",
    )


def test_bytes_and_system_region_inputs_are_host_tensors(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    words = np.array([b"one", b"three"], dtype=object)
    wire = np.frombuffer(serialize_bytes_tensor(words), dtype=np.uint8)
    _region(memory, runtime, "c", wire)
    tensor = memory.input_tensor("S", DataType.BYTES, [2], _params("c", len(wire), offset=64))
    assert not tensor.is_device and tensor.data.tolist() == [b"one", b"three"]


@pytest.mark.parametrize(
    ("kind", "device_id", "accepts", "stays"),
    [
        ("KIND_GPU", 1, True, True),  # accepts device inputs on the input's GPU
        ("KIND_GPU", 0, True, False),  # another GPU
        ("KIND_GPU", 1, False, False),  # did not declare device inputs
        ("KIND_CPU", 0, True, False),  # a CPU instance
    ],
)
def test_place_inputs_copies_to_host_unless_the_instance_takes_them_there(
    memory: SystemSharedMemory, runtime: HostRuntime, kind: str, device_id: int, accepts: bool, stays: bool
) -> None:
    values = np.arange(8, dtype=np.float32)
    _region(memory, runtime, "c", values, device=1)
    device_input = memory.input_tensor("IN", DataType.FP32, [8], _params("c", 32, offset=64))
    host_input = Tensor.from_numpy("H", np.ones(2, np.int8))
    request = InferenceRequest("m", 1, {"IN": device_input, "H": host_input})
    place_inputs(_instance(kind, device_id, accepts), [request])
    assert request.inputs["H"] is host_input
    placed = request.inputs["IN"]
    assert placed.is_device is stays
    assert (placed is device_input) is stays
    np.testing.assert_array_equal(placed.data, values)


def test_outputs_on_the_regions_gpu_are_copied_device_to_device(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    source = _region(memory, runtime, "in", np.arange(8, dtype=np.float64), device=1)
    out_handle, out = runtime.export(128)
    memory.register_cuda("out", out_handle, 1, 128)
    result = memory.input_tensor("X", DataType.FP64, [8], _params("in", 64, offset=64))
    slot = memory.output_slot("OUT", _params("out", 64, offset=32))
    slot.write_tensor(result)
    assert runtime.device_copies == 1
    assert out.raw[32:96] == source.raw[64:128]
    small = memory.output_slot("OUT", _params("out", 32))
    with pytest.raises(TritonError, match="should be at least 64 bytes"):
        small.write_tensor(result)


def test_outputs_elsewhere_go_through_the_host(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    _region(memory, runtime, "in", np.arange(4, dtype=np.int32), device=0)
    out_handle, out = runtime.export(64)
    memory.register_cuda("out", out_handle, 1, 64)
    result = memory.input_tensor("X", DataType.INT32, [4], _params("in", 16, offset=64))
    memory.output_slot("OUT", _params("out", 16)).write_tensor(result)  # another GPU
    assert runtime.device_copies == 0
    assert np.frombuffer(out.raw[:16], np.int32).tolist() == [0, 1, 2, 3]
    host = Tensor.from_numpy("Y", np.array([7, 8, 9, 10], np.int32))
    memory.output_slot("OUT", _params("out", 16)).write_tensor(host)
    assert np.frombuffer(out.raw[:16], np.int32).tolist() == [7, 8, 9, 10]


def _pool(runtime: HostRuntime, device: int, total: int) -> DevicePool:
    allocator = Allocator(lambda n: runtime.malloc(device, n), lambda a: runtime.free(device, a))
    return DevicePool(allocator, device, total)


def test_a_batch_is_gathered_in_the_gpus_pool_and_given_back(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    pool = _pool(runtime, 1, 1 << 20)
    device_memory = PooledDeviceMemory(runtime, {1: pool})
    _region(memory, runtime, "a", np.arange(6, dtype=np.float32), device=1)
    _region(memory, runtime, "b", np.arange(6, 9, dtype=np.float32), device=1)
    a = memory.input_tensor("X", DataType.FP32, [2, 3], _params("a", 24, 64))
    b = memory.input_tensor("X", DataType.FP32, [1, 3], _params("b", 12, 64))
    requests = [InferenceRequest("m", 1, {"X": t}) for t in (a, b)]
    batch = gather_tensor(requests, "X", device_memory=device_memory)
    assert batch.is_device and batch.device_id == 1 and batch.shape == (3, 3)
    assert runtime.device_copies == 2
    assert (pool.pool.used_bytes, device_memory.fallbacks) == (MIN_CLASS, 0)
    np.testing.assert_array_equal(batch.data, np.arange(9, dtype=np.float32).reshape(3, 3))
    del batch
    gc.collect()
    assert pool.pool.used_bytes == 0  # back in the pool once the batch is gone


def test_past_the_pool_a_plain_allocation_is_made_and_freed(runtime: HostRuntime) -> None:
    pool = _pool(runtime, 0, MIN_CLASS)
    device_memory = PooledDeviceMemory(runtime, {0: pool})
    first = device_memory.allocate(0, (MIN_CLASS // 4,), np.float32)
    assert (pool.pool.used_bytes, device_memory.fallbacks) == (MIN_CLASS, 0)
    mallocs, frees = runtime.malloc_count, runtime.free_count
    second = device_memory.allocate(0, (16,), np.float32)  # the pool is spent
    assert (device_memory.fallbacks, pool.pool.fallbacks, runtime.malloc_count) == (1, 1, mallocs + 1)
    assert pool.pool.used_bytes == MIN_CLASS  # the fallback is not the pool's
    on_other_gpu = device_memory.allocate(1, (4,), np.int8)  # no pool on GPU 1
    assert device_memory.fallbacks == 2
    del second, on_other_gpu
    gc.collect()
    assert runtime.free_count == frees + 2
    del first
    gc.collect()
    assert pool.pool.used_bytes == 0


def test_an_empty_allocation_takes_no_memory(runtime: HostRuntime) -> None:
    device_memory = PooledDeviceMemory(runtime, {})
    empty = device_memory.allocate(0, (0, 4), np.float32)
    assert (empty.nbytes, runtime.malloc_count, empty.to_host().shape) == (0, 0, (0, 4))


def test_the_manager_lends_device_memory_only_with_a_runtime(runtime: HostRuntime) -> None:
    with_gpu = MemoryManager(runtime, cuda_bytes={1: 0})
    assert isinstance(with_gpu.device_memory, PooledDeviceMemory)
    assert set(with_gpu.device_pools) == {0}  # GPU 1's pool is off: its batches are plain allocations
    with_gpu.close()
    assert MemoryManager(None).device_memory is None


def test_http_decodes_a_cuda_input_in_place_and_writes_a_device_output_device_to_device(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    values = np.arange(4, dtype=np.int64)
    _region(memory, runtime, "in", values, device=0)
    out_handle, out = runtime.export(64)
    memory.register_cuda("out", out_handle, 0, 64)
    header = json.dumps(
        {
            "inputs": [{"name": "X", "datatype": "INT64", "shape": [4], "parameters": _params("in", 32, 64)}],
            "outputs": [{"name": "Y", "parameters": _params("out", 32)}],
        }
    ).encode()
    request, binary_output, flags = decode_request("m", "", header, memoryview(b""), memory)
    tensor = request.inputs["X"]
    assert tensor.is_device and isinstance(tensor.device, DeviceArray)
    response = InferenceResponse({"Y": tensor.renamed("Y")})
    encode_response(response, binary_output, flags)
    assert runtime.device_copies == 1
    assert np.frombuffer(out.raw[:32], np.int64).tolist() == [0, 1, 2, 3]
