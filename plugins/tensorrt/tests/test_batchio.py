"""Ragged batches (``_batchio.py`` and the config checks of ``batch_input`` targets), on plain
data: what a batch of requests feeds an engine's ragged inputs and ``batch_input`` targets,
and how a ``batch_output`` is split back among the requests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tritonpy.config import config_to_dict, parse_config_text
from tritonpy_backend_tensorrt._batchio import BatchIO
from tritonpy_backend_tensorrt._config import check_config
from tritonpy_backend_tensorrt._engine import EngineInfo
from tritonpy_backend_tensorrt._instance import _same_tails
from tritonpy_sdk import DataType, InferenceRequest, InferenceResponse, Tensor, TritonError
from trt_engines import profile, tensor

RAGGED = """
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "OFFSETS"
                data_type: TYPE_INT32 source_input: "X" } ]
batch_output [ { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]
"""


def config(text: str) -> dict[str, Any]:
    return config_to_dict(parse_config_text('name: "m"\nbackend: "tensorrt"\n' + text, "config.pbtxt"))


def engine(offsets_type: str = "INT32") -> EngineInfo:
    """X [-1] float (flat), OFFSETS [-1] -> Y [-1] float (flat)."""
    flat = ((1,), (8,), (64,))
    return EngineInfo(
        (tensor("X", (-1,)), tensor("OFFSETS", (-1,), offsets_type), tensor("Y", (-1,), is_input=False)),
        (profile(0, X=flat, OFFSETS=((1,), (4,), (8,))),),
    )


def _requests(*lengths: int) -> list[InferenceRequest]:
    out = []
    for i, n in enumerate(lengths):
        x = np.arange(n, dtype=np.float32).reshape(1, n) + 10 * i
        request = InferenceRequest("m", 1, {"X": Tensor("X", x, DataType.FP32)}, [])
        request.batch_size = 1
        out.append(request)
    return out


def test_ragged_inputs_are_fed_flat_with_their_batch_inputs() -> None:
    io = BatchIO.from_config(config(RAGGED))
    assert io and io.ragged == {"X"} and set(io.inputs) == {"OFFSETS"}
    requests = _requests(2, 3, 1)
    assert _same_tails(requests, io.ragged) and not _same_tails(requests)
    np.testing.assert_array_equal(io.host_input(requests, "X"), [0, 1, 10, 11, 12, 20])
    offsets = io.host_input(requests, "OFFSETS")
    assert offsets is not None and offsets.dtype == np.int32
    np.testing.assert_array_equal(offsets, [2, 5, 6])
    assert io.host_input(requests, "Z") is None  # gathered as usual


def test_a_batch_output_is_split_in_the_shape_of_each_requests_input() -> None:
    io = BatchIO.from_config(config(RAGGED))
    requests = _requests(2, 3, 1)
    responses = [InferenceResponse({}) for _ in requests]
    flat = np.arange(6, dtype=np.float32) * 2
    io.scatter.scatter_outputs(requests, responses, {"Y": flat}, {"Y": DataType.FP32})
    assert [r.outputs["Y"].data.shape for r in responses] == [(1, 2), (1, 3), (1, 1)]
    np.testing.assert_array_equal(responses[1].outputs["Y"].data, [[4, 6, 8]])
    with pytest.raises(TritonError) as err:
        io.scatter.scatter_outputs(requests, responses, {"Y": flat[:5]}, {"Y": DataType.FP32})
    assert err.value.code.name == "INTERNAL" and "has 5 elements" in str(err.value)


def test_a_model_without_ragged_batches_has_none() -> None:
    assert not BatchIO.from_config(config('input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]'))


def test_batch_input_targets_are_checked_against_the_engine() -> None:
    check_config("m", config(RAGGED), engine())  # the batch_output's dims are not the engine's [-1]+dims
    with pytest.raises(TritonError) as err:
        check_config("m", config(RAGGED), engine("FLOAT"))
    assert str(err.value) == (
        "unexpected datatype TYPE_FP32 for inference input 'OFFSETS', expecting TYPE_INT32 for m"
    )
    missing = config(RAGGED.replace('target_name: "OFFSETS"', 'target_name: "NOPE"'))
    with pytest.raises(TritonError, match="batch input 'NOPE' of model 'm' is not an input of the engine"):
        check_config("m", missing, engine())
