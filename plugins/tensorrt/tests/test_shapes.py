"""Shape tensors on plain data: the values an engine gets, the profile that holds them, the
outputs each request gets back (no TensorRT, no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from tritonpy_backend_tensorrt._engine import EngineInfo
from tritonpy_backend_tensorrt._instance import _same_tails
from tritonpy_backend_tensorrt._profiles import choose_profile
from tritonpy_backend_tensorrt._shapes import shape_outputs, shape_values, values_problem
from tritonpy_sdk import InferenceRequest, Tensor, TritonError
from trt_engines import profile, shape_tensor_engine


def _request(batch: int, values: list[int], dtype: type = np.int32) -> InferenceRequest:
    request = InferenceRequest(
        "m",
        1,
        {
            "DUMMY_INPUT0": Tensor.from_numpy("DUMMY_INPUT0", np.zeros((batch, 4, 4), np.float32)),
            "INPUT0": Tensor.from_numpy("INPUT0", np.array(values, dtype)),
        },
    )
    request.batch_size = batch
    return request


def test_the_engine_gets_the_values_behind_the_batch_size_in_its_own_type() -> None:
    requests = [_request(3, [32, 32]), _request(5, [32, 32])]
    values = shape_values(requests, "INPUT0", 8, np.dtype(np.int64))
    assert values.dtype == np.int64 and values.tolist() == [8, 32, 32]
    assert values.flags.c_contiguous
    # a model that does not batch: the values as sent
    assert shape_values([_request(1, [4, 4])], "INPUT0", None, np.dtype(np.int32)).tolist() == [4, 4]


def test_values_outside_the_profile_fail_in_tritons_words() -> None:
    # The example of Triton's own test (L0_trt_shape_tensors, test_wrong_shape_values).
    engine = shape_tensor_engine()
    profiles = [("default", engine.profiles[0])]
    shapes = {"DUMMY_INPUT0": (8, 4, 4)}
    with pytest.raises(TritonError) as err:
        choose_profile("m_0", profiles, shapes, {"INPUT0": (8, 32, 33)})
    assert (err.value.code.name, err.value.message) == (
        "INVALID_ARG",
        "The shape value at index 2 is expected to be in range from 1 to 32, Got: 33",
    )
    assert values_problem((9, 4, 4), (1, 1, 1), (8, 32, 32)).startswith("The shape value at index 0 ")
    assert values_problem((4, 4), (1, 1, 1), (8, 32, 32)) == (
        "mismatch between the number of shape values. Expecting 3. Got 2"
    )
    assert choose_profile("m_0", profiles, shapes, {"INPUT0": (8, 32, 32)})[1] is engine.profiles[0]


def test_the_profile_nearest_to_the_values_is_chosen() -> None:
    tensors = shape_tensor_engine().tensors
    dims = ((1, 1, 1), (4, 8, 8), (8, 64, 64))
    small = profile(0, {"INPUT0": ((1, 1, 1), (4, 4, 4), (8, 64, 64))}, DUMMY_INPUT0=dims)
    large = profile(1, {"INPUT0": ((1, 1, 1), (4, 48, 48), (8, 64, 64))}, DUMMY_INPUT0=dims)
    engine = EngineInfo(tensors, (small, large))
    profiles = [("0", engine.profiles[0]), ("1", engine.profiles[1])]
    shapes = {"DUMMY_INPUT0": (4, 8, 8)}
    assert choose_profile("m_0", profiles, shapes, {"INPUT0": (4, 40, 40)})[0] == "1"
    assert choose_profile("m_0", profiles, shapes, {"INPUT0": (4, 6, 6)})[0] == "0"


def test_each_request_gets_its_rows_of_a_shape_output() -> None:
    requests = [_request(3, [8, 8]), _request(1, [8, 8])]
    first, second = shape_outputs(requests, "OUTPUT0", np.array([4, 8, 8], np.int64), True, "m_0")
    assert first.datatype.value == "INT64" and first.data.tolist() == [[8, 8]] * 3
    assert second.data.tolist() == [[8, 8]]
    with pytest.raises(TritonError, match="failed to retrieve the output shape values from binding 'm_0'"):
        shape_outputs(requests, "OUTPUT0", np.array([3, 8, 8], np.int64), True, "m_0")
    (alone,) = shape_outputs(requests[:1], "OUTPUT0", np.array([8, 8], np.int64), False, "m_0")
    assert alone.data.tolist() == [8, 8]


def test_requests_with_other_values_are_run_apart() -> None:
    shape_inputs = {"INPUT0": np.dtype(np.int32)}
    assert _same_tails([_request(1, [4, 4]), _request(2, [4, 4])], frozenset(), shape_inputs)
    assert not _same_tails([_request(1, [4, 4]), _request(2, [8, 8])], frozenset(), shape_inputs)
