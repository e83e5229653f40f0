import numpy as np
import pytest
from tritonpy_sdk import TritonError, deserialize_bytes_tensor, serialize_bytes_tensor


def test_round_trip_including_empty_and_binary() -> None:
    values = np.array([b"hello", b"", b"\x00\xff", "ünï".encode()], dtype=object)
    wire = serialize_bytes_tensor(values)
    assert wire[:4] == (5).to_bytes(4, "little")
    back = deserialize_bytes_tensor(wire, count=4)
    assert back.tolist() == values.tolist()


def test_str_elements_are_utf8_encoded() -> None:
    assert serialize_bytes_tensor(np.array(["é"], dtype=object)) == b"\x02\x00\x00\x00\xc3\xa9"


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"\x05\x00", "length is cut off"),
        (b"\x05\x00\x00\x00abc", "declares 5 bytes, 3 remain"),
    ],
)
def test_truncated_buffers_are_client_errors(wire: bytes, message: str) -> None:
    with pytest.raises(TritonError, match=message) as info:
        deserialize_bytes_tensor(wire)
    assert info.value.code.name == "INVALID_ARG"


def test_count_mismatch() -> None:
    wire = serialize_bytes_tensor(np.array([b"a", b"b"], dtype=object))
    with pytest.raises(TritonError, match="holds 2 elements, expected 3"):
        deserialize_bytes_tensor(wire, count=3)
