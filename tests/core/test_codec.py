import numpy as np
import pytest
from tritonpy.codec import array_from_buffer, array_from_json, array_to_buffer, array_to_json
from tritonpy_sdk import DataType, TritonError, serialize_bytes_tensor

NUMERIC = [d for d in DataType if d is not DataType.BYTES]


@pytest.mark.parametrize("dt", NUMERIC, ids=lambda d: d.value)
def test_binary_round_trip_is_a_view(dt: DataType) -> None:
    arr = (np.arange(6) % 2).astype(dt.numpy_dtype).reshape(2, 3)
    wire = array_to_buffer(arr, dt)
    assert isinstance(wire, memoryview)
    back = array_from_buffer("X", dt, [2, 3], wire)
    assert back.dtype == dt.numpy_dtype and back.shape == (2, 3)
    np.testing.assert_array_equal(back.astype(np.float64), arr.astype(np.float64))
    assert not back.flags.owndata  # frombuffer: no copy of the body


def test_bytes_binary_round_trip() -> None:
    arr = np.array([[b"a", b""], [b"xyz", "é".encode()]], dtype=object)
    back = array_from_buffer("S", DataType.BYTES, [2, 2], array_to_buffer(arr, DataType.BYTES))
    assert back.tolist() == arr.tolist()


def test_byte_size_mismatch_uses_triton_wording() -> None:
    with pytest.raises(TritonError, match=r"input byte size mismatch for input 'X'. Expected 64, got 60"):
        array_from_buffer("X", DataType.INT32, [1, 16], b"\0" * 60)


def test_bytes_element_count_mismatch() -> None:
    wire = serialize_bytes_tensor(np.array([b"a"], dtype=object))
    with pytest.raises(TritonError, match="unexpected number of string elements 1"):
        array_from_buffer("S", DataType.BYTES, [2], wire)


def test_negative_dims_are_rejected() -> None:
    with pytest.raises(TritonError, match="negative dimension"):
        array_from_buffer("X", DataType.FP32, [-1, 4], b"")


def test_json_nested_and_flat_data() -> None:
    flat = array_from_json("X", DataType.FP32, [2, 2], [1, 2, 3, 4])
    nested = array_from_json("X", DataType.FP32, [2, 2], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(flat, nested)
    assert flat.dtype == np.float32


@pytest.mark.parametrize(
    ("dt", "data", "message"),
    [
        (DataType.INT32, [1, 2, 3], "needs 4, got 3"),
        (DataType.INT32, [1, 2, 3, "x"], "expected INT32 numbers, got str"),
        (DataType.INT8, [1, 2, 3, 300], "out of range"),
        (DataType.INT32, [1, 2, 3, 4.5], "expected integers"),
        (DataType.BOOL, [1, 0, 1, 0], "expected true/false"),
        (DataType.BYTES, [1, 2, 3, None], "expected strings for BYTES"),
    ],
)
def test_json_errors_are_client_errors(dt: DataType, data: list, message: str) -> None:
    with pytest.raises(TritonError, match=message) as info:
        array_from_json("X", dt, [4], data)
    assert info.value.code.name == "INVALID_ARG"


def test_json_out() -> None:
    assert array_to_json(np.array([[1.5, 2]], np.float16), DataType.FP16) == [1.5, 2.0]
    assert array_to_json(np.array([b"hi", b"\xff"], dtype=object), DataType.BYTES) == ["hi", "\ufffd"]
    assert array_to_json(np.array([True, False]), DataType.BOOL) == [True, False]
