"""Data-dependent outputs (``_outputs.py``): what TensorRT's output allocator hands out and
takes back, on host memory labelled as a GPU's (the calls TensorRT makes, made here)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tritonpy_backend_tensorrt._outputs import OutputBuffers
from tritonpy_hostcuda import HostDeviceMemory
from tritonpy_sdk import TritonError


def test_an_output_gets_aligned_memory_and_comes_back_in_its_reported_shape() -> None:
    memory = HostDeviceMemory()
    buffers = OutputBuffers(memory, device=0)
    values = np.array([[3, 1], [4, 1], [5, 9]], np.int64)
    address = buffers.reallocate("IDX", values.nbytes, 256)
    assert address % 256 == 0
    assert buffers.reallocate("IDX", 8, 256) == address  # asked again, smaller: the same memory
    ctypes.memmove(address, values.ctypes.data, values.nbytes)  # what the engine writes
    buffers.notify("IDX", (3, 2))
    out = buffers.take("IDX", np.int64, "m_0")
    assert (out.address, out.shape, out.device_id) == (address, (3, 2), 0)
    np.testing.assert_array_equal(out.to_host(), values)
    assert not buffers.buffers and not buffers.shapes  # the next execution gets new memory
    assert buffers.reallocate("IDX", values.nbytes, 256) != 0 and len(memory.allocated) == 2


def test_an_empty_output_is_an_empty_array() -> None:
    buffers = OutputBuffers(HostDeviceMemory(), device=1)
    assert buffers.reallocate("IDX", 0, 16) != 0  # TensorRT asks for at least a byte
    buffers.notify("IDX", (0, 2))
    out = buffers.take("IDX", np.int64, "m_0")
    assert out.shape == (0, 2) and out.to_host().shape == (0, 2)


def test_failures_inside_tensorrts_calls_surface_when_the_output_is_taken() -> None:
    memory = HostDeviceMemory()
    memory.fail = True
    buffers = OutputBuffers(memory, device=0)
    assert buffers.reallocate("IDX", 64, 256) == 0  # null: TensorRT fails the execution
    buffers.notify("IDX", object())  # not a shape: kept as an error, not raised into TensorRT
    with pytest.raises(TritonError) as err:
        buffers.take("IDX", np.int64, "m_0")
    assert err.value.code.name == "INTERNAL"
    assert "output 'IDX' of m_0: failed to allocate 64 bytes on GPU 0: the pool is exhausted" in str(
        err.value
    )


def test_a_shape_never_reported_or_larger_than_the_memory_fails_the_request() -> None:
    buffers = OutputBuffers(HostDeviceMemory(), device=0)
    buffers.reallocate("IDX", 16, 1)
    with pytest.raises(TritonError, match="TensorRT gave no memory or no shape"):
        buffers.take("IDX", np.int64, "m_0")
    buffers.reallocate("IDX", 16, 1)
    buffers.notify("IDX", (4,))
    with pytest.raises(TritonError, match="TensorRT wrote 32 bytes of output 'IDX' of m_0 into 16"):
        buffers.take("IDX", np.int64, "m_0")
    buffers.reallocate("IDX", 16, 1)
    buffers.clear()  # a failed execution's leftovers
    assert not buffers.buffers
