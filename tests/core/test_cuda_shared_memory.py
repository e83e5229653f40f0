"""CUDA shared-memory regions: registration, status, bounds, copies and deferred
close, on a host-memory stand-in for the CUDA runtime (this bookkeeping runs on
every machine); the registration errors of a host without a GPU, as Triton 2.51
answers them. The real runtime is exercised by the served tests marked ``gpu``."""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonpy.codec import serialize_bytes_tensor
from tritonpy.memory import SystemSharedMemory
from tritonpy.memory.cuda import IPC_HANDLE_SIZE
from tritonpy.memory.cuda_shared import REGISTER_FAILED
from tritonpy_hostcuda import HostRuntime
from tritonpy_sdk import DataType, ErrorCode, TritonError


@pytest.fixture
def runtime() -> HostRuntime:
    return HostRuntime(device_count=2)


@pytest.fixture
def memory(runtime: HostRuntime) -> Iterator[SystemSharedMemory]:
    made = SystemSharedMemory(runtime)
    yield made
    made.unregister_cuda()
    made.unregister()


def _params(region: str, byte_size: int, offset: int = 0) -> dict[str, Any]:
    return {
        "shared_memory_region": region,
        "shared_memory_byte_size": byte_size,
        "shared_memory_offset": offset,
    }


def _error(call: Any) -> TritonError:
    with pytest.raises(TritonError) as info:
        call()
    return info.value


def test_register_lists_the_region_in_the_cuda_status_only(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    handle, _ = runtime.export(64)
    memory.register_cuda("c", handle, 1, 64)
    assert memory.cuda_status() == [{"name": "c", "device_id": 1, "byte_size": 64}]
    assert memory.cuda_status("c") == [{"name": "c", "device_id": 1, "byte_size": 64}]
    assert memory.status() == []
    error = _error(lambda: memory.status("c"))
    assert (error.code, error.message) == (
        ErrorCode.NOT_FOUND,
        "Unable to find system shared memory region: 'c'",
    )
    assert list(runtime.opened.values()) == [1]  # opened on the device it was registered for


def test_system_and_cuda_regions_share_one_namespace(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    key = f"/tritonpy-cuda-ns-{os.getpid()}"
    region = shm.create_shared_memory_region(key, key, 4096)
    try:
        memory.register("s", key, 0, 4096)
        handle, _ = runtime.export(64)
        error = _error(lambda: memory.register_cuda("s", handle, 0, 64))
        assert (error.code, error.message) == (
            ErrorCode.ALREADY_EXISTS,
            "shared memory region 's' already in manager",
        )
        memory.register_cuda("c", handle, 0, 64)
        error = _error(lambda: memory.register("c", key, 0, 4096))
        assert error.code == ErrorCode.ALREADY_EXISTS
        memory.unregister()  # system regions only
        assert [r["name"] for r in memory.cuda_status()] == ["c"]
        memory.register("s", key, 0, 4096)
        memory.unregister_cuda()  # CUDA regions only
        assert [r["name"] for r in memory.status()] == ["s"] and memory.cuda_status() == []
        memory.unregister_cuda("s")  # a system region's name: nothing happens
        assert [r["name"] for r in memory.status()] == ["s"]
    finally:
        memory.unregister()
        shm.destroy_shared_memory_region(region)


def test_registration_failures_answer_as_triton(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    handle, _ = runtime.export(64)
    for call in (
        lambda: memory.register_cuda("c", b"\0" * IPC_HANDLE_SIZE, 0, 64),  # not a handle the runtime knows
        lambda: memory.register_cuda("c", handle, 2, 64),  # no such GPU
        lambda: memory.register_cuda("c", handle, -1, 64),
    ):
        error = _error(call)
        assert (error.code, error.message) == (ErrorCode.INVALID_ARG, REGISTER_FAILED)
    assert memory.cuda_status() == [] and runtime.opened == {}
    error = _error(lambda: memory.cuda_status("c"))
    assert (error.code, error.message) == (
        ErrorCode.NOT_FOUND,
        "Unable to find cuda shared memory region: 'c'",
    )


def test_without_a_runtime_registering_fails_and_status_is_empty() -> None:
    memory = SystemSharedMemory()
    error = _error(lambda: memory.register_cuda("c", b"\0" * IPC_HANDLE_SIZE, 0, 16))
    assert (error.code, error.message) == (
        ErrorCode.INVALID_ARG,
        "failed to register shared memory region: invalid args",
    )
    assert memory.cuda_status() == []
    memory.unregister_cuda()
    memory.unregister_cuda("c")


def test_inputs_are_copied_from_the_device_at_their_offset(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    handle, device = runtime.export(256)
    data = np.arange(16, dtype=np.int32)
    ctypes.memmove(ctypes.addressof(device) + 64, data.ctypes.data, data.nbytes)
    memory.register_cuda("c", handle, 0, 256)
    array = memory.input_tensor("IN", DataType.INT32, [1, 16], _params("c", 64, offset=64)).data
    np.testing.assert_array_equal(array, data.reshape(1, 16))
    ctypes.memset(ctypes.addressof(device) + 64, 0, 64)
    np.testing.assert_array_equal(array, data.reshape(1, 16))  # a copy, not the device memory


def test_bytes_inputs_are_parsed_on_the_host(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    words = np.array([b"one", b"", b"three"], dtype=object)
    wire = serialize_bytes_tensor(words)
    handle, device = runtime.export(len(wire))
    ctypes.memmove(device, wire, len(wire))
    memory.register_cuda("c", handle, 0, len(wire))
    array = memory.input_tensor("S", DataType.BYTES, [3], _params("c", len(wire))).data
    assert list(array) == [b"one", b"", b"three"]


def test_slices_are_bounds_checked_like_system_regions(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    handle, _ = runtime.export(64)
    memory.register_cuda("c", handle, 0, 64)
    message = "Invalid offset + byte size for shared memory region: 'c'"
    for params in (_params("c", 65), _params("c", 8, offset=60), _params("c", 0)):
        error = _error(lambda params=params: memory.input_tensor("IN", DataType.INT32, [2], params).data)
        assert (error.code, error.message) == (ErrorCode.INVALID_ARG, message)


def test_outputs_are_copied_into_the_region(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    handle, device = runtime.export(128)
    memory.register_cuda("c", handle, 0, 128)
    slot = memory.output_slot("OUT", _params("c", 64, offset=32))
    values = np.frombuffer(np.arange(8, dtype=np.float64).tobytes(), dtype=np.float64)  # read-only
    slot.write(values, DataType.FP64)
    np.testing.assert_array_equal(np.frombuffer(device.raw[32:96], dtype=np.float64), values)
    slot.write(np.arange(16, dtype=np.float64)[::2], DataType.FP64)  # not contiguous
    np.testing.assert_array_equal(np.frombuffer(device.raw[32:96], dtype=np.float64), np.arange(0, 16, 2))
    words = np.array([b"ab", b"cde"], dtype=object)
    slot.write(words, DataType.BYTES)
    wire = serialize_bytes_tensor(words)
    assert device.raw[32 : 32 + len(wire)] == wire
    error = _error(lambda: slot.write(np.zeros(9, dtype=np.float64), DataType.FP64))
    assert error.code == ErrorCode.INTERNAL and "should be at least 72 bytes" in error.message


def test_unregister_closes_the_handle_once_requests_are_done(
    memory: SystemSharedMemory, runtime: HostRuntime
) -> None:
    handle, device = runtime.export(64)
    memory.register_cuda("c", handle, 0, 64)
    slot = memory.output_slot("OUT", _params("c", 16))
    memory.unregister_cuda("c")
    assert memory.cuda_status() == []
    assert runtime.closed == []  # a request still holds the region
    slot.write(np.ones(4, dtype=np.int32), DataType.INT32)  # and finishes on it
    assert np.frombuffer(device.raw[:16], dtype=np.int32).tolist() == [1, 1, 1, 1]
    del slot
    gc.collect()
    assert runtime.closed == [ctypes.addressof(device)] and runtime.opened == {}


def test_an_unused_region_closes_at_once(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    handle, device = runtime.export(64)
    memory.register_cuda("c", handle, 0, 64)
    _ = memory.input_tensor("IN", DataType.INT32, [4], _params("c", 16)).data  # read, then dropped
    memory.unregister_cuda()
    gc.collect()
    assert runtime.closed == [ctypes.addressof(device)]
    memory.register_cuda("c", handle, 0, 64)  # the name is free again
    assert [r["name"] for r in memory.cuda_status()] == ["c"]


def test_a_failed_copy_is_a_triton_error(memory: SystemSharedMemory, runtime: HostRuntime) -> None:
    handle, _ = runtime.export(64)
    memory.register_cuda("c", handle, 0, 64)
    slot = memory.output_slot("OUT", _params("c", 16))
    runtime.fail_copies = True
    error = _error(lambda: memory.input_tensor("IN", DataType.INT32, [4], _params("c", 16)).data)
    assert (error.code, error.message) == (
        ErrorCode.INTERNAL,
        "failed to copy from CUDA shared memory: an illegal memory access was encountered",
    )
    error = _error(lambda: slot.write(np.ones(4, dtype=np.int32), DataType.INT32))
    assert error.message == "failed to copy into CUDA shared memory: an illegal memory access was encountered"
