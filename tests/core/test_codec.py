import numpy as np
import pytest
from tritonpy.codec import (
    ByteSizeMismatch,
    array_from_buffer,
    array_from_json,
    array_to_buffer,
    array_to_json,
    strings_mismatch,
)
from tritonpy_sdk import DataType, ErrorCode, TritonError, serialize_bytes_tensor

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


def _strings(*items: bytes) -> bytes:
    return serialize_bytes_tensor(np.array(items, dtype=object))


# Triton 2.51's words, asked (the reference server, both protocols); the model and the
# request id come in once the request is checked against its model (validation.py).
@pytest.mark.parametrize(
    ("data", "count", "message"),
    [
        (_strings(b"a"), 2, "expected 2 string elements for inference input 'S', got 1"),
        (b"", 1, "expected 1 string elements for inference input 'S', got 0"),
        (
            _strings(b"a", b"b", b"c"),
            2,
            "unexpected number of string elements 3 for inference input 'S', expecting 2",
        ),
        (
            _strings(b"abc") + b"\x01\x00",
            2,
            "incomplete string length indicator for inference input 'S', expecting 4 bytes but only 2 "
            "bytes available. Please make sure the string length indicator is in one buffer.",
        ),
        (
            _strings(b"abc") + b"\x0a\x00\x00\x00x",
            2,
            "incomplete string data for inference input 'S', expecting string of length 10 but only 1 "
            "bytes available",
        ),
        (
            _strings(b"abc") + b"\x0a\x00\x00\x00x",
            3,
            "expected 3 string elements for inference input 'S', got 2",
        ),
    ],
)
def test_bytes_that_do_not_fit_their_shape(data: bytes, count: int, message: str) -> None:
    with pytest.raises(TritonError) as info:
        array_from_buffer("S", DataType.BYTES, [count], data)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message == message


def test_bytes_faults_name_the_model_once_it_is_known() -> None:
    found: list[ByteSizeMismatch] = []
    array_from_buffer("S", DataType.BYTES, [2], _strings(b"a"), found)
    array_from_json("J", DataType.BYTES, [1], ["x", "y"], found)
    assert [m.fault("m", "[request id: 7] ") for m in found] == [
        "[request id: 7] expected 2 string elements for inference input 'S' for model 'm', got 1",
        "[request id: 7] unexpected number of string elements 2 for inference input 'J' for model 'm', "
        "expecting 1",
    ]
    truncated = strings_mismatch("S", _strings(b"abc")[:-1], 1)
    assert truncated.fault("m", "[request id: 7] ") == (
        "incomplete string data for inference input 'S', expecting string of length 3 but only 2 bytes "
        "available"
    )


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
        (
            DataType.INT32,
            [1, 2, 3],
            r"Shape does not match true shape of 'data' field \(input 'X' of shape \[4\] needs 4 "
            r"elements, got 3\)",
        ),
        (DataType.INT32, [1, 2, 3, "x"], "non-signed-integer as signed-integer"),
        (DataType.INT8, [1, 2, 3, 300], "out of range"),
        (DataType.INT32, [1, 2, 3, 4.5], "non-signed-integer as signed-integer"),
        (DataType.BOOL, [1, 0, 1, 0], "non-boolean as boolean"),
        (DataType.BYTES, [1, 2, 3, None], "non-string as string"),
        (DataType.BF16, [1, 2, 3, "x"], "non-number as double"),
    ],
)
def test_json_errors_are_client_errors(dt: DataType, data: list, message: str) -> None:
    with pytest.raises(TritonError, match=message) as info:
        array_from_json("X", dt, [4], data)
    assert info.value.code.name == "INVALID_ARG"


@pytest.mark.parametrize(
    ("dt", "data", "message"),
    [  # Triton 2.51's answers on its infer and generate routes (observed)
        (DataType.UINT8, [1, 2, 3, -2], "non-unsigned-integer as unsigned-integer"),
        (DataType.UINT8, [1, 2, 3, 2.0], "non-unsigned-integer as unsigned-integer"),
        (DataType.UINT8, [1, 2, 3, True], "non-unsigned-integer as unsigned-integer"),
        (DataType.INT32, [1, 2, 3, 2.0], "non-signed-integer as signed-integer"),
        (DataType.INT32, [1, 2, 3, None], "non-signed-integer as signed-integer"),
        (DataType.INT32, [1, 2, 3, 1 << 63], "non-signed-integer as signed-integer"),
        (DataType.BOOL, [True, True, True, 1], "non-boolean as boolean"),
        (DataType.FP64, [1.5, 1.5, 1.5, True], "non-number as double"),
        (DataType.FP32, [1.5, 1.5, 1.5, "x"], "non-number as double"),
        # a type fault comes before a count fault ...
        (DataType.INT32, [1, "x"], "non-signed-integer as signed-integer"),
        # ... except past the count, where Triton stops first
        (DataType.INT32, [1, 2, 3, 4, "x"], "Shape does not match true shape"),
        # BYTES elements are all read (for their size) before the count is checked
        (
            DataType.BYTES,
            ["a", "b", "c", "d", 5],
            r"^Unable to parse JSON bytes array: .*non-string as string$",
        ),
        # what Triton wraps silently (300 as an UINT8 is 44) is refused here
        (DataType.UINT8, [1, 2, 3, 300], "out of range for UINT8"),
    ],
)
def test_json_elements_in_tritons_words(dt: DataType, data: list, message: str) -> None:
    with pytest.raises(TritonError, match=message) as info:
        array_from_json("X", dt, [4], data)
    assert info.value.code.name == "INVALID_ARG"


def test_json_takes_what_triton_takes() -> None:
    assert array_from_json("X", DataType.FP32, [2], [1, 2.5]).tolist() == [1.0, 2.5]
    assert array_from_json("X", DataType.INT64, [2], [-(1 << 63), 5]).tolist() == [-(1 << 63), 5]
    assert array_from_json("X", DataType.BYTES, [1, 1], [["é"]]).tolist() == [["é".encode()]]
    assert array_from_json("X", DataType.BYTES, [2], ["a\u0000", ""]).tolist() == [b"a\x00", b""]
    assert array_from_json("X", DataType.BF16, [2], [1, 2.5]).dtype == DataType.BF16.numpy_dtype
    assert array_from_json("X", DataType.UINT64, [1], 5).tolist() == [5]  # one value (generate's way)


def test_json_out() -> None:
    assert array_to_json(np.array([[1.5, 2]], np.float16), DataType.FP16) == [1.5, 2.0]
    assert array_to_json(np.array([b"hi", "é".encode()], dtype=object), DataType.BYTES) == ["hi", "é"]
    with pytest.raises(TritonError, match="output 'Y' holds bytes that are not UTF-8 text"):
        array_to_json(np.array([b"hi", b"\xff"], dtype=object), DataType.BYTES, "Y")
    assert array_to_json(np.array([True, False]), DataType.BOOL) == [True, False]


def test_json_data_nests_at_most_as_deep_as_triton_reads_it() -> None:
    """Triton's limit (its HTTP_MAX_JSON_NESTING_DEPTH, NVIDIA's L0_http
    test_json_recursion_depth_limit): an element 100 arrays deep is refused."""
    value: object = 7
    for _ in range(99):
        value = [value]
    assert array_from_json("A", DataType.INT64, [1, 1], value).tolist() == [[7]]
    with pytest.raises(TritonError) as info:
        array_from_json("A", DataType.INT64, [1, 1], [value])
    assert info.value.message == "JSON nesting depth exceeds maximum allowed limit (100)"


def test_counts_past_int64_are_refused_in_tritons_words() -> None:
    with pytest.raises(TritonError) as info:
        array_from_json("A", DataType.FP32, [2**4, 2**60 + 2], [1.0])
    assert info.value.message == (
        "invalid shape for input 'A': shape [16,1152921504606846978] causes total element count to "
        "exceed maximum size of 9223372036854775807"
    )
    with pytest.raises(TritonError) as info:
        array_from_json("A", DataType.FP32, [2**2, 2**60 + 2], [1.0])
    assert info.value.message == (
        "byte size overflow for input 'A': element count (4611686018427387912) * data type size (4) "
        "exceeds maximum allowed size (9223372036854775807)"
    )
