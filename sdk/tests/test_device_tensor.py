"""Device-resident tensors and batching on the device, with host memory behind
the ``DeviceMemory`` interface (the same calls the core makes on a GPU)."""

from __future__ import annotations

import ctypes
import gc
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from tritonpy_sdk import (
    KDLCPU,
    KDLCUDA,
    DataType,
    DeviceArray,
    InferenceRequest,
    Tensor,
    TritonError,
    gather_tensor,
)


class HostDeviceMemory:
    """``DeviceMemory`` on ctypes buffers: arrays are labelled CUDA device
    ``device_id`` but live in host memory, so tests can read them."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}  # address -> bytes, of arrays not yet freed
        self.copies: list[tuple[int, int, int]] = []

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        buffer = ctypes.create_string_buffer(max(nbytes, 1))
        address = ctypes.addressof(buffer)
        self.live[address] = nbytes
        weakref.finalize(buffer, self.live.pop, address)
        return device_array(address, shape, dt, device_id, buffer)

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        self.copies.append((dst, src, nbytes))
        ctypes.memmove(dst, src, nbytes)


def device_array(address: int, shape: Sequence[int], dtype: Any, device_id: int, owner: Any) -> DeviceArray:
    """A "device" array over host memory whose host copy counts how often it is made."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))

    def to_host() -> np.ndarray[Any, Any]:
        reads.append(address)
        buffer = (ctypes.c_char * (count * dt.itemsize)).from_address(address)
        return np.frombuffer(bytes(buffer), dtype=dt).reshape(shape).copy()

    return DeviceArray(address, shape, dt, device_id=device_id, owner=owner, to_host=to_host)


reads: list[int] = []


def _on_device(values: np.ndarray[Any, Any], device_id: int = 0) -> Tensor:
    buffer = ctypes.create_string_buffer(values.tobytes(), max(values.nbytes, 1))
    array = device_array(ctypes.addressof(buffer), values.shape, values.dtype, device_id, buffer)
    return Tensor.on_device("X", array, DataType.from_numpy(values.dtype))


def _request(tensor: Tensor) -> InferenceRequest:
    return InferenceRequest("m", 1, {"X": tensor}, batch_size=tensor.shape[0])


def test_a_device_tensor_keeps_its_memory_until_its_data_is_read_once() -> None:
    reads.clear()
    tensor = _on_device(np.arange(6, dtype=np.float32).reshape(2, 3), device_id=1)
    assert (tensor.is_device, tensor.memory_type, tensor.device_id) == (True, "GPU", 1)
    assert tensor.shape == (2, 3) and tensor.__dlpack_device__() == (KDLCUDA, 1)
    assert reads == []  # shape and place are known without a copy
    np.testing.assert_array_equal(tensor.data, np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(tensor.as_numpy(), tensor.data)
    assert len(reads) == 1  # copied once, then kept
    host = tensor.to_host()
    assert (host.is_device, host.memory_type, host.device) == (False, "CPU", None)
    assert host.data is tensor.data


def test_renaming_a_device_tensor_keeps_it_on_the_device() -> None:
    tensor = _on_device(np.ones((1, 2), np.int32))
    renamed = tensor.renamed("Y")
    assert renamed.name == "Y" and renamed.device is tensor.device and renamed.is_device
    host = Tensor.from_numpy("X", np.ones(2, np.int8)).renamed("Z")
    assert (host.name, host.device, host.is_device) == ("Z", None, False)


def test_assigning_data_makes_a_host_tensor() -> None:
    tensor = _on_device(np.ones((1, 2), np.int32))
    tensor.data = np.zeros((1, 2), np.int32)
    assert tensor.device is None and tensor.memory_type == "CPU"


def test_a_single_request_is_handed_over_as_it_is() -> None:
    tensor = _on_device(np.ones((2, 2), np.float32))
    assert gather_tensor([_request(tensor)], "X", device_memory=HostDeviceMemory()) is tensor


def test_a_batch_on_one_gpu_is_gathered_on_the_device() -> None:
    reads.clear()
    memory = HostDeviceMemory()
    a = _on_device(np.arange(6, dtype=np.float32).reshape(2, 3), device_id=1)
    b = _on_device(np.arange(6, 9, dtype=np.float32).reshape(1, 3), device_id=1)
    batch = gather_tensor([_request(a), _request(b)], "X", device_memory=memory)
    assert batch.is_device and batch.device_id == 1 and batch.shape == (3, 3)
    assert batch.device is not None
    assert [c[2] for c in memory.copies] == [24, 12]  # device to device, one copy each
    assert reads == []  # nothing went through the host
    np.testing.assert_array_equal(np.from_dlpack(_as_host(batch.device)), np.arange(9).reshape(3, 3))
    assert list(memory.live.values()) == [36]
    del batch
    gc.collect()
    assert memory.live == {}  # the buffer goes back once the batch is gone


def _as_host(array: DeviceArray) -> DeviceArray:
    """The same host memory labelled as host, so numpy may read it through DLPack."""
    return DeviceArray(array.address, array.shape, array.dtype, owner=array, device_type=KDLCPU)


def test_a_mixed_batch_or_no_device_memory_gathers_on_the_host() -> None:
    memory = HostDeviceMemory()
    a = _on_device(np.ones((1, 2), np.int64), device_id=0)
    b = _on_device(np.full((1, 2), 2, np.int64), device_id=1)
    host = Tensor.from_numpy("X", np.full((1, 2), 3, np.int64))
    for batch in ([a, b], [a, host]):
        out = gather_tensor([_request(t) for t in batch], "X", device_memory=memory)
        assert not out.is_device
        assert out.data.shape == (2, 2)
    out = gather_tensor([_request(a), _request(a)], "X")  # no device memory given
    assert not out.is_device and out.data.tolist() == [[1, 1], [1, 1]]
    assert memory.copies == []


def test_a_device_batch_of_different_shapes_is_refused() -> None:
    a = _on_device(np.ones((1, 2), np.float32))
    b = _on_device(np.ones((1, 3), np.float32))
    with pytest.raises(TritonError, match="cannot batch input 'X'"):
        gather_tensor([_request(a), _request(b)], "X", device_memory=HostDeviceMemory())
    with pytest.raises(TritonError, match="missing"):
        gather_tensor([_request(a), _request(b)], "Y", device_memory=HostDeviceMemory())
