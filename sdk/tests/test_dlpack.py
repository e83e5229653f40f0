"""The DLPack producer over a raw pointer, on host memory (kDLCPU): what numpy and
torch import must be the memory itself (no copy) with the right shape, dtype and
strides, and the owner of the memory must live exactly as long as they need it."""

from __future__ import annotations

import ctypes
import gc
import weakref
from typing import Any

import numpy as np
import pytest
from tritonpy_sdk import KDLCPU, KDLCUDA, DeviceArray
from tritonpy_sdk._dlpack import capsule, live_count


class Owner:
    """Host memory that says when it is freed."""

    def __init__(self, nbytes: int) -> None:
        self.buffer = ctypes.create_string_buffer(nbytes)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.buffer)


def _host_array(values: np.ndarray[Any, Any]) -> tuple[DeviceArray, weakref.ref[Owner]]:
    owner = Owner(max(values.nbytes, 1))
    ctypes.memmove(owner.address, values.ctypes.data, values.nbytes)
    array = DeviceArray(owner.address, values.shape, values.dtype, owner=owner, device_type=KDLCPU)
    return array, weakref.ref(owner)


@pytest.mark.parametrize(
    "values",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 7,
        np.array([1, 255, 7], dtype=np.uint8),
        np.array([[True, False], [False, True]]),
        np.arange(5, dtype=np.float16),
        np.array(3.5, dtype=np.float64),
        np.zeros((0, 4), dtype=np.int32),
    ],
    ids=["f32", "i64", "u8", "bool", "f16", "scalar", "empty"],
)
def test_numpy_sees_the_memory_with_its_shape_dtype_and_strides(values: np.ndarray[Any, Any]) -> None:
    array, _ = _host_array(values)
    seen = np.from_dlpack(array)
    assert seen.dtype == values.dtype
    assert seen.shape == values.shape
    np.testing.assert_array_equal(seen, values)
    if values.size:  # (an empty array's strides mean nothing; numpy gives it zeros)
        assert seen.strides == values.strides  # C order
        assert seen.ctypes.data == array.address  # the memory itself, not a copy


def test_torch_sees_the_memory_with_its_shape_dtype_and_strides() -> None:
    torch = pytest.importorskip("torch")
    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    array, _ = _host_array(values)
    seen = torch.from_dlpack(array)
    assert seen.dtype == torch.int32
    assert tuple(seen.shape) == (3, 4)
    assert seen.stride() == (4, 1)
    assert seen.data_ptr() == array.address
    assert seen.tolist() == values.tolist()
    ctypes.c_int32.from_address(array.address).value = 99  # the same memory, seen at once
    assert int(seen[0, 0]) == 99


def test_strides_given_in_elements_reach_the_consumer() -> None:
    owner = Owner(6 * 4)
    base = np.frombuffer(owner.buffer, dtype=np.float32, count=6)
    base[:] = np.arange(6)
    # The transpose of a C-ordered [2, 3]: shape [3, 2], strides [1, 3] elements.
    made = capsule(owner.address, (3, 2), np.dtype(np.float32), (KDLCPU, 0), owner, (1, 3))
    seen = np.from_dlpack(_Capsule(made))
    assert seen.strides == (4, 12)
    np.testing.assert_array_equal(seen, np.arange(6, dtype=np.float32).reshape(2, 3).T)


class _Capsule:
    """A producer handing out one ready-made capsule (to test ``capsule`` alone)."""

    def __init__(self, made: Any) -> None:
        self.made = made

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.made

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDLCPU, 0)


def test_the_owner_lives_as_long_as_any_consumer() -> None:
    gc.collect()
    before = live_count()
    array, owner = _host_array(np.arange(4, dtype=np.float64))
    first = np.from_dlpack(array)
    second = np.from_dlpack(array)
    del array
    gc.collect()
    assert owner() is not None and live_count() == before + 2
    del first
    gc.collect()
    assert owner() is not None and live_count() == before + 1
    np.testing.assert_array_equal(second, np.arange(4, dtype=np.float64))  # still readable
    del second
    gc.collect()
    assert owner() is None
    assert live_count() == before


def test_a_capsule_never_consumed_releases_the_owner() -> None:
    gc.collect()
    before = live_count()
    array, owner = _host_array(np.arange(3, dtype=np.int16))
    made = array.__dlpack__()
    del array
    gc.collect()
    assert owner() is not None and live_count() == before + 1
    del made
    gc.collect()
    assert owner() is None and live_count() == before


def test_device_arrays_say_where_they_are_and_refuse_what_they_cannot_do() -> None:
    gpu = DeviceArray(0x1000, (2, 2), np.float32, device_id=3)
    assert gpu.__dlpack_device__() == (KDLCUDA, 3)
    assert (gpu.memory_type, gpu.nbytes, gpu.size) == ("GPU", 16, 4)
    with pytest.raises(BufferError, match="cannot move"):
        gpu.__dlpack__(dl_device=(KDLCPU, 0))
    with pytest.raises(BufferError, match="without copying"):
        gpu.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="no way to be copied"):
        gpu.to_host()
    with pytest.raises(ValueError, match="DLPack cannot carry"):
        DeviceArray(0x1000, (1,), np.object_)


def test_reshape_is_the_same_memory_and_keeps_the_owner() -> None:
    array, owner = _host_array(np.arange(6, dtype=np.int32))
    flat = array.reshape((2, 3))
    del array
    gc.collect()
    assert owner() is not None
    assert np.from_dlpack(flat).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert flat.to_host().shape == (2, 3)
    with pytest.raises(ValueError, match="cannot reshape"):
        flat.reshape((4,))


def test_from_dlpack_wraps_a_producers_memory_and_keeps_the_producer_alive() -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    array = DeviceArray.from_dlpack(source)
    assert (array.address, array.shape, array.dtype) == (source.data_ptr(), (2, 3), np.dtype(np.int64))
    assert array.__dlpack_device__() == (KDLCPU, 0)
    producer = weakref.ref(source)
    del source
    gc.collect()
    assert producer() is not None  # held by the array
    assert np.from_dlpack(array).tolist() == [[0, 1, 2], [3, 4, 5]]
    del array
    gc.collect()
    assert producer() is None


def test_from_dlpack_refuses_what_it_cannot_wrap_in_place() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match="C-contiguous"):
        DeviceArray.from_dlpack(torch.arange(6.0).reshape(2, 3).T)
    offset = DeviceArray.from_dlpack(np.arange(5, dtype=np.int16)[2:])  # a view: its offset is kept
    assert np.from_dlpack(offset).tolist() == [2, 3, 4]


def test_the_producer_works_beside_tritonclients_dlpack() -> None:
    # tritonclient sets the argtypes of ctypes.pythonapi's capsule calls for the whole
    # process; the producer must not depend on them (it once did, in its destructor).
    pytest.importorskip("tritonclient.utils._dlpack")
    gc.collect()
    before = live_count()
    array, owner = _host_array(np.arange(3, dtype=np.float32))
    made = array.__dlpack__()
    del made, array
    gc.collect()
    assert owner() is None and live_count() == before
    again, _ = _host_array(np.arange(3, dtype=np.float32))
    assert np.from_dlpack(again).tolist() == [0.0, 1.0, 2.0]
