import numpy as np
import pytest
from tritonpy_sdk import InferenceRequest, Tensor, TritonError, batch_input_array, gather_ragged


def _req(x: np.ndarray) -> InferenceRequest:
    return InferenceRequest("m", 1, {"X": Tensor.from_numpy("X", x)}, batch_size=x.shape[0])


REQS = [
    _req(np.ones((1, 3), np.float32)),
    _req(np.ones((1, 1), np.float32)),
    _req(np.ones((2, 2), np.float32)),
]


def test_gather_ragged_flattens_and_concatenates() -> None:
    assert gather_ragged(REQS, "X").shape == (3 + 1 + 4,)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("BATCH_ELEMENT_COUNT", [3, 1, 2, 2]),
        ("BATCH_ACCUMULATED_ELEMENT_COUNT", [3, 4, 6, 8]),
        ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", [0, 3, 4, 6, 8]),
        ("BATCH_ITEM_SHAPE", [[3], [1], [2], [2]]),
        ("BATCH_ITEM_SHAPE_FLATTEN", [3, 1, 2, 2]),
    ],
)
def test_batch_input_kinds(kind: str, expected: list) -> None:
    out = batch_input_array(kind, REQS, ["X"], np.float32)
    assert out.dtype == np.float32 and out.tolist() == expected


def test_max_element_count_is_a_shape() -> None:
    assert batch_input_array("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", REQS, ["X"], np.int32).shape == (3,)


def test_errors() -> None:
    with pytest.raises(TritonError, match="needs input 'Y'"):
        batch_input_array("BATCH_ELEMENT_COUNT", REQS, ["Y"], np.int32)
    with pytest.raises(TritonError, match="not supported"):
        batch_input_array("BATCH_SOMETHING", REQS, ["X"], np.int32)
