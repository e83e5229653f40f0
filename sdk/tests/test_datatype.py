import numpy as np
import pytest
from tritonpy_sdk import DataType


@pytest.mark.parametrize("member", list(DataType))
def test_names_round_trip(member: DataType) -> None:
    assert DataType.from_protocol(member.protocol_name) is member
    assert DataType.from_config(member.config_name) is member


def test_bytes_is_type_string_in_configs() -> None:
    assert DataType.BYTES.config_name == "TYPE_STRING"
    assert DataType.from_config("TYPE_STRING") is DataType.BYTES
    assert DataType.BYTES.numpy_dtype == np.dtype(object)
    assert DataType.BYTES.itemsize == 0


@pytest.mark.parametrize(
    ("dtype", "member"),
    [
        (np.float32, DataType.FP32),
        (np.float16, DataType.FP16),
        (np.int64, DataType.INT64),
        (np.uint16, DataType.UINT16),
        (np.bool_, DataType.BOOL),
        (np.object_, DataType.BYTES),
        ("S5", DataType.BYTES),
        ("U3", DataType.BYTES),
    ],
)
def test_from_numpy(dtype: object, member: DataType) -> None:
    assert DataType.from_numpy(dtype) is member


def test_bf16_has_two_byte_dtype() -> None:
    assert DataType.BF16.itemsize == 2
    assert DataType.from_numpy(DataType.BF16.numpy_dtype) in (DataType.BF16, DataType.UINT16)


def test_unknown_names_raise() -> None:
    with pytest.raises(ValueError, match="unknown data type 'FLOAT'"):
        DataType.from_protocol("FLOAT")
    with pytest.raises(ValueError, match="TYPE_FLOAT"):
        DataType.from_config("TYPE_FLOAT")
    with pytest.raises(ValueError, match="complex128"):
        DataType.from_numpy(np.complex128)
