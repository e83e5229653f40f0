import numpy as np
import pytest
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    RequestedOutput,
    Tensor,
    TritonError,
    batch_arrays,
    copy_rows,
    gather_inputs,
    outputs_to_compute,
    scatter_output,
    scatter_responses,
)


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


def test_scatter_responses_gives_each_request_its_rows_as_views() -> None:
    requests = [_request(np.ones((1, 2))), _request(np.ones((2, 2)))]
    y = np.arange(6, dtype=np.float32).reshape(3, 2)
    first, second = scatter_responses(requests, {"Y": y}, {"Y": DataType.FP32})
    np.testing.assert_array_equal(first.outputs["Y"].data, y[:1])
    np.testing.assert_array_equal(second.outputs["Y"].data, y[1:])
    assert second.outputs["Y"].datatype is DataType.FP32
    assert second.outputs["Y"].data.base is not None  # a view
    single = y[:1]
    (only,) = scatter_responses(requests[:1], {"Y": single}, {"Y": DataType.FP32})
    assert only.outputs["Y"].data is single  # one request: the array itself


def test_outputs_to_compute_is_the_union_requested_or_all() -> None:
    a, b = _request(np.ones((1, 2))), _request(np.ones((1, 2)))
    a.requested_outputs = [RequestedOutput("B")]
    b.requested_outputs = [RequestedOutput("A")]
    assert outputs_to_compute([a, b], ["A", "B", "C"]) == ["A", "B"]
    b.requested_outputs = []
    assert outputs_to_compute([a, b], ["A", "B", "C"]) == ["A", "B", "C"]


@pytest.mark.parametrize(
    "make",
    [
        lambda n: np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3),  # contiguous
        lambda n: np.arange(n * 12, dtype=np.int64).reshape(n, 2, 6)[:, :, ::2],  # strided
        lambda n: np.array([[b"a" * (i + 1)] for i in range(n)], dtype=np.object_),  # BYTES
        lambda n: np.ones((n, 4), dtype=np.bool_),
    ],
    ids=["contiguous", "strided", "object", "bool"],
)
def test_copy_rows_matches_concatenate(make) -> None:  # type: ignore[no-untyped-def]
    arrays = [make(1), make(2), make(3)]
    expected = np.concatenate(arrays, axis=0)
    target = np.empty(expected.shape, expected.dtype)
    copy_rows(target, arrays)
    np.testing.assert_array_equal(target, expected)
    read_only = [a.copy() for a in arrays]
    for a in read_only:
        a.flags.writeable = False
    gathered = gather_inputs([_request(a) for a in read_only], "X")
    np.testing.assert_array_equal(gathered, expected)


def test_copy_rows_of_one_array_fills_the_target_even_without_a_batch_axis() -> None:
    scalar = np.array(7.5, dtype=np.float64)
    target = np.empty((), np.float64)
    copy_rows(target, [scalar])
    assert target == 7.5


def test_batch_arrays_checks_the_batch() -> None:
    a, b = np.ones((1, 3), np.float32), np.ones((2, 3), np.float32)
    assert [x.shape for x in batch_arrays([_request(a), _request(b)], "X")] == [(1, 3), (2, 3)]
    with pytest.raises(TritonError, match="cannot batch input 'X'"):
        batch_arrays([_request(a), _request(np.ones((1, 4), np.float32))], "X")
    with pytest.raises(TritonError, match="input 'Y' is missing"):
        batch_arrays([_request(a)], "Y")
