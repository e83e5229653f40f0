"""Which requests may share a batch: ``EqualInputs`` (Triton's RequiredEqualInputs)."""

from __future__ import annotations

import numpy as np
from tritonpy.config import parse_config_text
from tritonpy.scheduler._equal_inputs import EqualInputs
from tritonpy_sdk import InferenceRequest, Tensor


def _rule(inputs: str) -> EqualInputs:
    return EqualInputs.from_config(parse_config_text(f"max_batch_size: 8 input [ {inputs} ]", "inline"))


def _key(rule: EqualInputs, **arrays: np.ndarray) -> tuple[object, ...]:
    return rule.key(InferenceRequest("m", 1, {n: Tensor.from_numpy(n, a) for n, a in arrays.items()}))


def test_fixed_sizes_batch_anything_without_a_key() -> None:
    rule = _rule('{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }')
    assert not rule.matters
    assert _key(rule, X=np.zeros((1, 4), np.float32)) == _key(rule, X=np.zeros((3, 4), np.float32)) == ()


def test_variable_sizes_batch_only_with_equal_shapes_unless_ragged() -> None:
    rule = _rule(
        '{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "L" data_type: TYPE_INT32 dims: [ 1 ] }'
    )
    assert rule.matters
    two, three = np.zeros((1, 2), np.float32), np.zeros((1, 3), np.float32)
    label = np.zeros((1, 1), np.int32)
    assert _key(rule, X=two, L=label) == _key(
        rule, X=np.ones((5, 2), np.float32), L=np.ones((5, 1), np.int32)
    )
    assert _key(rule, X=two, L=label) != _key(rule, X=three, L=label)
    # what the core adds (a sequence's controls and states, there once a request ran) counts not
    control = np.ones((1, 1), np.int32)
    assert _key(rule, X=two, L=label) == _key(rule, X=two, L=label, START=control)
    ragged = _rule('{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }')
    assert not ragged.matters


def test_optional_inputs_batch_only_with_the_same_inputs_given() -> None:
    rule = _rule(
        '{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }, '
        '{ name: "O" data_type: TYPE_FP32 dims: [ 2 ] optional: true }'
    )
    x = np.zeros((1, 2), np.float32)
    assert rule.matters and _key(rule, X=x) != _key(rule, X=x, O=x)


def test_shape_tensors_batch_only_with_equal_values() -> None:
    rule = _rule(
        '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, '
        '{ name: "S" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true }'
    )
    x = np.zeros((1, 4), np.float32)
    same = _key(rule, X=x, S=np.array([4, 4], np.int32))
    assert rule.matters and rule.shape_tensors == {"S"}
    assert same == _key(rule, X=np.zeros((6, 4), np.float32), S=np.array([4, 4], np.int32))
    assert same != _key(rule, X=x, S=np.array([2, 2], np.int32))
