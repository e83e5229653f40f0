"""The SDK's errors and tensors under the names and with the helpers of ``tritonserver``
(Triton's in-process Python API)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from tritonpy_sdk import (
    AlreadyExistsError,
    CancelledError,
    DataType,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    Tensor,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)

CLASSES = {
    ErrorCode.UNKNOWN: UnknownError,
    ErrorCode.INTERNAL: InternalError,
    ErrorCode.NOT_FOUND: NotFoundError,
    ErrorCode.INVALID_ARG: InvalidArgumentError,
    ErrorCode.UNAVAILABLE: UnavailableError,
    ErrorCode.UNSUPPORTED: UnsupportedError,
    ErrorCode.ALREADY_EXISTS: AlreadyExistsError,
    ErrorCode.CANCELLED: CancelledError,
}


@pytest.mark.parametrize("code", list(ErrorCode))
def test_a_triton_error_is_an_instance_of_its_codes_class(code: ErrorCode) -> None:
    error = TritonError("what went wrong", code)
    assert type(error) is CLASSES[code] and isinstance(error, TritonError)
    assert (error.code, error.message, str(error)) == (code, "what went wrong", "what went wrong")
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.code, again.message) == (CLASSES[code], code, "what went wrong")
    made = CLASSES[code]("by its class")  # the message alone gives the class's code
    assert made.code is code


def test_the_shortcuts_raise_the_classes() -> None:
    with pytest.raises(InvalidArgumentError):
        raise TritonError.invalid_arg("bad")
    with pytest.raises(NotFoundError):
        raise TritonError.not_found("gone")
    assert type(TritonError("default")) is InternalError


def test_from_dlpack_shares_host_memory() -> None:
    array = np.arange(6, dtype=np.float32)
    tensor = Tensor.from_dlpack(array)
    assert (tensor.datatype, tensor.shape, tensor.memory_type) == (DataType.FP32, (6,), "CPU")
    assert tensor.data_ptr == array.ctypes.data and tensor.size == 24
    back = np.from_dlpack(tensor)
    back[0] = 42  # one memory: the array, the tensor and what came back
    assert array[0] == 42
    tensor.shape = [2, 3]
    assert np.from_dlpack(tensor).shape == (2, 3) and array.shape == (6,)
    with pytest.raises(ValueError):
        tensor.shape = [4, 4]


def test_from_dlpack_takes_a_torch_tensor() -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(4, dtype=torch.int64)
    tensor = Tensor.from_dlpack(source)
    assert tensor.datatype is DataType.INT64 and tensor.data_ptr == source.data_ptr()


def test_string_and_bytes_arrays() -> None:
    strings = Tensor.from_string_array([["hello", "wörld"]])
    assert (strings.datatype, strings.shape) == (DataType.BYTES, (1, 2))
    assert strings.to_string_array().tolist() == [["hello", "wörld"]]
    assert strings.size == 4 + 5 + 4 + len("wörld".encode())
    assert strings.data_ptr == 0  # no flat buffer for BYTES
    raw = Tensor.from_bytes_array([b"\xff\x00", b""])
    assert raw.to_bytes_array().tolist() == [b"\xff\x00", b""]
