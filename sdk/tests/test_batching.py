import numpy as np
import pytest
from tritonpy_sdk import InferenceRequest, Tensor, TritonError, gather_inputs, scatter_output


def _request(x: np.ndarray) -> InferenceRequest:
    return InferenceRequest("m", 1, {"X": Tensor.from_numpy("X", x)}, batch_size=x.shape[0])


def test_single_request_is_not_copied() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert gather_inputs([_request(x)], "X") is x


def test_gather_concatenates_on_batch_axis_and_scatter_gives_views() -> None:
    a = np.ones((1, 3), np.float32)
    b = np.full((2, 3), 2, np.float32)
    batched = gather_inputs([_request(a), _request(b)], "X")
    assert batched.shape == (3, 3)
    assert batched.flags.c_contiguous
    parts = scatter_output(batched * 10, [1, 2])
    np.testing.assert_array_equal(parts[0], a * 10)
    np.testing.assert_array_equal(parts[1], b * 10)
    assert all(p.base is not None for p in parts)  # views, not copies


def test_gather_uses_the_given_allocator() -> None:
    seen: list[tuple[int, ...]] = []

    def alloc(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        seen.append(shape)
        return np.empty(shape, dtype)

    gather_inputs([_request(np.ones((1, 2))), _request(np.ones((1, 2)))], "X", allocator=alloc)
    assert seen == [(2, 2)]


def test_mismatched_shapes_cannot_batch() -> None:
    with pytest.raises(TritonError, match="differ beyond the batch dimension"):
        gather_inputs([_request(np.ones((1, 2))), _request(np.ones((1, 3)))], "X")


def test_missing_input_and_wrong_output_size() -> None:
    with pytest.raises(TritonError, match="input 'Y' is missing"):
        gather_inputs([_request(np.ones((1, 2)))], "Y")
    with pytest.raises(TritonError, match="expected first dimension 3"):
        scatter_output(np.ones((4, 2)), [1, 2])
