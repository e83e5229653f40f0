"""Outputs handed back on the device: where a request's consumer wants each output
(``output_device``), how many requests of a batch want it there, and each request's
rows of a batched device array, in place. Device memory is host memory labelled
CUDA here, so the rows can be read back; the addresses are what a GPU would get."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from tritonpy_sdk import (
    KDLCUDA,
    DataType,
    DeviceArray,
    InferenceRequest,
    RequestedOutput,
    Tensor,
    TritonError,
    scatter_device,
    scatter_device_outputs,
    scatter_responses,
    wanted_on_device,
)


def _labelled_cuda(values: np.ndarray[Any, Any], device_id: int = 0) -> DeviceArray:
    """``values`` copied into a ctypes buffer that a ``DeviceArray`` calls GPU memory."""
    buffer = ctypes.create_string_buffer(values.nbytes)
    ctypes.memmove(buffer, values.ctypes.data, values.nbytes)

    def to_host() -> np.ndarray[Any, Any]:
        return np.frombuffer(bytes(buffer), values.dtype).reshape(values.shape)

    return DeviceArray(
        ctypes.addressof(buffer),
        values.shape,
        values.dtype,
        device_id=device_id,
        owner=buffer,
        to_host=to_host,
    )


def _request(rows: int, *outputs: RequestedOutput) -> InferenceRequest:
    request = InferenceRequest("m", 1, {}, list(outputs))
    request.batch_size = rows
    return request


def test_output_device_is_none_unless_the_core_set_it() -> None:
    plain = _request(1)
    assert plain.output_device("Y") is None  # no outputs named: every output, on the host
    named = _request(1, RequestedOutput("Y"), RequestedOutput("Z", device_id=1))
    assert (named.output_device("Y"), named.output_device("Z"), named.output_device("W")) == (None, 1, None)
    assert RequestedOutput("Y").device_id is None  # the default costs nothing per request


def test_wanted_on_device_counts_the_requests_that_want_the_output_on_that_gpu() -> None:
    batch = [
        _request(1, RequestedOutput("Y", device_id=0)),
        _request(1, RequestedOutput("Y", device_id=1), RequestedOutput("Z", device_id=0)),
        _request(1),
        _request(1, RequestedOutput("Y", device_id=0)),
    ]
    assert wanted_on_device(batch, "Y", 0) == 2
    assert wanted_on_device(batch, "Y", 1) == 1
    assert wanted_on_device(batch, "Z", 0) == 1
    assert wanted_on_device(batch, "Z", 1) == 0


def test_rows_are_in_place_and_read_back_their_own_values() -> None:
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    array = _labelled_cuda(values, device_id=1)
    part = array.rows(1, 2)
    assert (part.address, part.shape, part.device_id, part.device_type) == (
        array.address + 12,
        (2, 3),
        1,
        KDLCUDA,
    )
    assert part.owner is array
    np.testing.assert_array_equal(part.to_host(), values[1:3])
    assert array.rows(4, 0).shape == (0, 3)
    with pytest.raises(ValueError, match="rows 3:5 are not rows of an array of shape"):
        array.rows(3, 2)


def test_scatter_device_splits_a_batch_by_sizes() -> None:
    values = np.arange(10, dtype=np.int64).reshape(5, 2)
    array = _labelled_cuda(values)
    assert scatter_device(array, [5]) == [array]
    parts = scatter_device(array, [2, 0, 3])
    assert [p.shape for p in parts] == [(2, 2), (0, 2), (3, 2)]
    np.testing.assert_array_equal(parts[2].to_host(), values[2:])
    with pytest.raises(TritonError, match="expected first dimension 4"):
        scatter_device(array, [2, 2])


def test_a_mixed_batch_gets_device_rows_where_wanted_and_host_rows_elsewhere() -> None:
    values = np.arange(8, dtype=np.float32).reshape(4, 2)
    requests = [
        _request(1, RequestedOutput("Y", device_id=0)),
        _request(2, RequestedOutput("Y")),
        _request(1, RequestedOutput("Y", device_id=1)),  # another GPU: the host rows
    ]
    types = {"Y": DataType.FP32}
    responses = scatter_responses(requests, {"Y": values}, types)
    given = scatter_device_outputs(requests, responses, {"Y": _labelled_cuda(values)}, types)
    assert given == 1
    first, second, third = (r.outputs["Y"] for r in responses)
    assert (first.is_device, first.memory_type, first.shape) == (True, "GPU", (1, 2))
    np.testing.assert_array_equal(first.data, values[:1])  # read back through to_host
    assert not second.is_device and not third.is_device
    np.testing.assert_array_equal(second.data, values[1:3])
    np.testing.assert_array_equal(third.data, values[3:])


def test_a_batch_wanting_the_output_on_the_device_needs_no_host_rows() -> None:
    values = np.arange(6, dtype=np.int32).reshape(3, 2)
    requests = [
        _request(1, RequestedOutput("Y", device_id=0)),
        _request(2, RequestedOutput("Y", device_id=0)),
    ]
    types = {"Y": DataType.INT32}
    responses = scatter_responses(requests, {}, types)  # nothing went to the host
    array = _labelled_cuda(values)
    assert scatter_device_outputs(requests, responses, {"Y": array}, types) == 2
    tensors = [r.outputs["Y"] for r in responses]
    assert all(isinstance(t, Tensor) and t.is_device for t in tensors)
    assert [t.device.address for t in tensors if t.device is not None] == [array.address, array.address + 8]
