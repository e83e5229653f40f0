"""Auto-complete and config checks against engines described as plain data (no TensorRT, no GPU)."""

from __future__ import annotations

from typing import Any

import pytest
from tritonpy.config import config_to_dict, parse_config_text
from tritonpy_backend_tensorrt._config import (
    check_config,
    complete_config,
    engine_max_batch_size,
    instance_group,
    instance_profiles,
)
from tritonpy_backend_tensorrt._engine import EngineInfo, TensorInfo
from tritonpy_backend_tensorrt._types import config_type
from tritonpy_sdk import TritonError
from trt_engines import add_engine, profile, shape_tensor_engine, static_engine, tensor, two_profile_engine


def config(text: str = "") -> dict[str, Any]:
    """A config dict as the server hands it to a backend (Triton's JSON form, defaults included)."""
    return config_to_dict(parse_config_text('name: "m"\n' + text, "config.pbtxt"))


@pytest.mark.parametrize(
    ("trt", "triton"),
    [
        ("FLOAT", "TYPE_FP32"),
        ("HALF", "TYPE_FP16"),
        ("BF16", "TYPE_BF16"),
        ("INT8", "TYPE_INT8"),
        ("INT32", "TYPE_INT32"),
        ("INT64", "TYPE_INT64"),
        ("BOOL", "TYPE_BOOL"),
        ("UINT8", "TYPE_UINT8"),
        ("FP8", None),
        ("INT4", None),
    ],
)
def test_data_types_map_as_tritons(trt: str, triton: str | None) -> None:
    assert config_type(trt) == triton


def test_an_empty_config_gets_every_tensor_and_the_profiles_batch_limit() -> None:
    cfg = config()
    assert complete_config("m", cfg, add_engine(max_batch=8)) == []
    assert cfg["max_batch_size"] == 8
    assert cfg["dynamic_batching"] == {}
    assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [(o["name"], o["data_type"], o["dims"]) for o in cfg["output"]] == [("OUTPUT0", "TYPE_FP32", [4])]
    check_config("m", cfg, add_engine(max_batch=8))


def test_a_batch_limit_of_one_gets_no_dynamic_batcher() -> None:
    cfg = config()
    complete_config("m", cfg, add_engine(max_batch=1))
    assert cfg["max_batch_size"] == 1
    assert "dynamic_batching" not in cfg


def test_the_batch_limit_is_the_largest_of_the_groups_profiles() -> None:
    engine = two_profile_engine()
    assert engine_max_batch_size(engine, [0]) == 4
    assert engine_max_batch_size(engine, [1]) == 16
    assert engine_max_batch_size(engine, [0, 1]) == 16
    cfg = config('instance_group [ { kind: KIND_GPU profile: ["1"] } ]')
    complete_config("m", cfg, engine)
    assert cfg["max_batch_size"] == 16
    assert cfg["input"][0]["dims"] == [-1]


def test_the_smallest_input_max_limits_a_profile() -> None:
    engine = EngineInfo(
        (tensor("A", (-1, 2)), tensor("B", (-1, 2)), tensor("C", (-1, 2), is_input=False)),
        (profile(0, A=((1, 2), (1, 2), (8, 2)), B=((1, 2), (1, 2), (3, 2))),),
    )
    assert engine_max_batch_size(engine, [0]) == 3


def test_an_engine_without_a_dynamic_leading_dim_does_not_batch() -> None:
    cfg = config()
    complete_config("m", cfg, static_engine())
    assert cfg["max_batch_size"] == 0
    assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [("X", "TYPE_INT32", [2, 3])]
    assert "dynamic_batching" not in cfg


def test_a_scalar_gets_dims_1_reshaped_to_nothing() -> None:
    engine = EngineInfo((tensor("S", ()), tensor("T", (), is_input=False)), (profile(0, S=((), (), ())),))
    cfg = config()
    complete_config("m", cfg, engine)
    assert cfg["input"][0]["dims"] == [1] and cfg["input"][0]["reshape"] == {"shape": []}
    check_config("m", cfg, engine)


def test_config_dims_with_the_full_shape_hint_no_batching() -> None:
    cfg = config('input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]')
    warnings = complete_config("m", cfg, add_engine())
    assert warnings == ["The specified dimensions in model config for m hints that batching is unavailable"]
    assert cfg["max_batch_size"] == 0
    # Only what the config names is completed; the missing tensor is reported at load, as in Triton.
    assert [i["name"] for i in cfg["input"]] == ["INPUT0"]
    with pytest.raises(TritonError, match="expected configuration for input 'INPUT1' for m"):
        check_config("m", cfg, add_engine())


def test_contradicting_dims_hints_fail() -> None:
    cfg = config(
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]'
    )
    with pytest.raises(TritonError) as err:
        complete_config("m", cfg, add_engine())
    assert str(err.value) == (
        "unable to autofill for 'm', model tensor configurations are contradicting each other in "
        "terms of whether batching is supported"
    )


def test_a_batching_hint_on_an_engine_that_cannot_batch_fails() -> None:
    cfg = config('input [ { name: "X" data_type: TYPE_INT32 dims: [ 3 ] } ]')
    with pytest.raises(TritonError) as err:
        complete_config("m", cfg, static_engine())
    assert str(err.value) == (
        "autofill failed for model 'm': model tensor shape configuration hints for dynamic batching "
        "but the underlying engine doesn't support batching."
    )


def test_a_max_batch_size_above_the_engines_fails_with_tritons_message() -> None:
    cfg = config("max_batch_size: 16")
    with pytest.raises(TritonError) as err:
        complete_config("m", cfg, add_engine(max_batch=8))
    assert str(err.value) == (
        "autofill failed for model 'm': configuration specified max-batch 16 but TensorRT engine "
        "only supports max-batch 8"
    )


def test_a_smaller_max_batch_size_is_kept_and_types_are_filled() -> None:
    cfg = config('max_batch_size: 2 input [ { name: "INPUT0" dims: [ 4 ] }, { name: "INPUT1" } ]')
    complete_config("m", cfg, add_engine())
    assert cfg["max_batch_size"] == 2
    assert [(i["data_type"], i["dims"]) for i in cfg["input"]] == [("TYPE_FP32", [4]), ("TYPE_FP32", [4])]


def test_an_unknown_tensor_in_the_config_fails_auto_complete() -> None:
    cfg = config('input [ { name: "NOPE" data_type: TYPE_FP32 dims: [ 4 ] } ]')
    with pytest.raises(TritonError) as err:
        complete_config("m", cfg, add_engine())
    assert str(err.value) == "unexpected inference input 'NOPE', allowed inputs are: INPUT0, INPUT1"


def test_an_invalid_group_profile_fails_auto_complete() -> None:
    cfg = config('instance_group [ { kind: KIND_GPU profile: ["2"] } ]')
    with pytest.raises(TritonError) as err:
        complete_config("m", cfg, two_profile_engine())
    assert str(err.value) == (
        "unable to autofill for 'm', configuration specified invalid profile 2 . Number of profiles "
        "supported by TensorRT engine: 2"
    )


def test_sequence_inputs_and_states_are_left_to_the_core() -> None:
    engine = EngineInfo(
        (
            tensor("X", (-1, 4)),
            tensor("START", (-1, 1), "INT32"),
            tensor("Y", (-1, 4), is_input=False),
        ),
        (profile(0, X=((1, 4), (1, 4), (4, 4)), START=((1, 1), (1, 1), (4, 1))),),
    )
    cfg = config(
        'sequence_batching { control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START'
        " int32_false_true: [ 0, 1 ] } ] } ] }"
    )
    complete_config("m", cfg, engine)
    assert [i["name"] for i in cfg["input"]] == ["X"]
    check_config("m", cfg, engine)


# ---- strict checks (--disable-auto-complete-config, and every instance) -----------------------


def full(text: str) -> dict[str, Any]:
    return config(
        "max_batch_size: 8\n"
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + text
    )


def test_a_complete_config_passes() -> None:
    check_config("m", full(""), add_engine())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c["input"][0].update(data_type="TYPE_FP16"),
            "unexpected datatype TYPE_FP32 for inference input 'INPUT0', expecting TYPE_FP16 for m_0",
        ),
        (
            lambda c: c["output"][0].update(data_type="TYPE_INT32"),
            "unexpected datatype TYPE_FP32 for inference output 'OUTPUT0', expecting TYPE_INT32 for m_0",
        ),
        (
            lambda c: c["input"][0].update(dims=[5]),
            "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model "
            "configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 "
            "followed by the explicit tensor shape, making complete shape [-1,5])",
        ),
        (
            lambda c: c.update(max_batch_size=0),
            "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model "
            "configuration specifies 1 dimensions (shape [4])",
        ),
        (
            lambda c: c["input"].append({"name": "EXTRA", "data_type": "TYPE_FP32", "dims": [4]}),
            "unable to load model 'm', configuration expects 3 inputs, model provides at most 2",
        ),
        (lambda c: c["output"][0].update(name="Z"), "'Z' does not map to an input or output tensor"),
        (
            lambda c: c["output"].append({"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]}),
            "output 'INPUT1' has already appeared as an input or output for m_0",
        ),
        (lambda c: c["input"].pop(), "expected configuration for input 'INPUT1' for m_0"),
    ],
)
def test_config_contradicting_the_engine_fails_with_tritons_message(edit: Any, message: str) -> None:
    cfg = full("")
    edit(cfg)
    with pytest.raises(TritonError) as err:
        check_config("m", cfg, add_engine(), where="m_0")
    assert str(err.value) == message


def test_fixed_config_dims_outside_the_profile_fail() -> None:
    cfg = config(
        'max_batch_size: 4 input [ { name: "X" data_type: TYPE_FP32 dims: [ 16 ] } ]'
        ' output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]'
    )
    with pytest.raises(TritonError) as err:
        check_config("m", cfg, two_profile_engine(), [0])
    assert str(err.value) == (
        "model configuration specified invalid shape for input 'X' for model m. Error details: "
        "model expected the shape of dimension 1 to be between 1 and 8 but received 16"
    )


def test_a_type_triton_lacks_is_unsupported() -> None:
    engine = EngineInfo(
        (tensor("X", (-1, 4), "FP8"), tensor("Y", (-1, 4), is_input=False)),
        (profile(0, X=((1, 4), (1, 4), (2, 4))),),
    )
    with pytest.raises(TritonError) as err:
        complete_config("m", config(), engine)
    assert err.value.code.name == "UNSUPPORTED"
    assert "has TensorRT data type FP8, which Triton has no data type for" in str(err.value)


def test_shape_tensors_are_completed_and_checked_as_triton_does() -> None:
    engine = shape_tensor_engine()
    cfg = config()
    assert complete_config("m", cfg, engine) == []
    assert cfg["max_batch_size"] == 8
    shape_input = {"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2], "is_shape_tensor": True}
    shape_output = {"name": "OUTPUT0", "data_type": "TYPE_INT64", "dims": [2], "is_shape_tensor": True}
    assert shape_input.items() <= cfg["input"][1].items()
    assert shape_output.items() <= cfg["output"][1].items()
    check_config("m", cfg, engine)
    # a config that names the tensor but does not mark it gets the mark, as Triton's autofill gives it
    partial = config(
        'max_batch_size: 8 input [ { name: "DUMMY_INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] }, '
        '{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]'
    )
    complete_config("m", partial, engine)
    assert partial["input"][1]["is_shape_tensor"] is True


def test_the_batch_limit_counts_a_shape_tensors_batch_value() -> None:
    # The shape tensor allows batches of up to 4, the dummy input 8: 4 it is, as Triton's
    # GetProfileMaxBatchSize takes the first max value of a shape tensor.
    engine = shape_tensor_engine()
    low, opt, high = engine.profiles[0].values["INPUT0"]
    engine = EngineInfo(
        engine.tensors,
        (
            profile(
                0,
                {"INPUT0": (low, opt, (4, *high[1:]))},
                DUMMY_INPUT0=engine.profiles[0].shapes["DUMMY_INPUT0"],
            ),
        ),
    )
    assert engine_max_batch_size(engine, [0]) == 4


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (
            lambda c: c["input"][1].update(is_shape_tensor=False),
            "INTERNAL",
            "input 'INPUT0' for model 'm' is a shape tensor but the model configuration doesn't mark it as a "
            "shape tensor.",
        ),
        (
            lambda c: c["output"][0].update(is_shape_tensor=True),
            "INTERNAL",
            "output 'DUMMY_OUTPUT0' for model 'm' is incorrectly marked as a shape tensor in the model "
            "configuration.",
        ),
        (
            lambda c: c["input"][1].update(data_type="TYPE_FP32"),
            "INVALID_ARG",
            "unexpected datatype TYPE_FP32 in model configuration for shape input 'INPUT0', expecting "
            "TYPE_INT32 or TYPE_INT64 for m_0",
        ),
        (
            lambda c: c["input"][1].update(data_type="TYPE_INT64"),
            "INVALID_ARG",
            "unexpected datatype TYPE_INT32 in engine for shape input 'INPUT0', expecting TYPE_INT64 for m_0",
        ),
        (
            lambda c: c["output"][1].update(data_type="TYPE_INT32"),
            "INVALID_ARG",
            "unexpected datatype 'TYPE_INT32 in model configuration for shape output 'OUTPUT0', expecting "
            "TYPE_INT64 for m_0",
        ),
        (
            lambda c: c["input"][1].update(dims=[3]),
            "INTERNAL",
            "unable to load model 'm', binding 'INPUT0' shape expected by framework [3] doesn't match model "
            "configuration shape [3]",
        ),
    ],
)
def test_shape_tensor_mistakes_in_tritons_words(change: Any, code: str, message: str) -> None:
    engine = shape_tensor_engine()
    cfg = config()
    complete_config("m", cfg, engine)
    change(cfg)
    with pytest.raises(TritonError) as err:
        check_config("m", cfg, engine, where="m_0")
    assert (err.value.code.name, err.value.message) == (code, message)


def test_marking_a_plain_tensor_as_a_shape_tensor_fails_autofill() -> None:
    cfg = config(
        'max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] '
        "is_shape_tensor: true } ]"
    )
    with pytest.raises(TritonError, match="^'INPUT0' is incorrectly specified as a shape tensor.$"):
        complete_config("m", cfg, add_engine())


def _vectorized_engine() -> EngineInfo:
    """X [-1,3,8,8] half in TensorRT's CHW32 layout (C padded to 32 in memory) -> linear Y."""
    return EngineInfo(
        (
            TensorInfo("X", True, "HALF", (-1, 3, 8, 8), io_format="CHW32"),
            tensor("Y", (-1, 3, 8, 8), "HALF", is_input=False),
        ),
        (profile(0, X=((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))),),
    )


def test_non_linear_io_formats_are_marked_as_triton_marks_them_then_refused() -> None:
    engine = _vectorized_engine()
    cfg = config()
    complete_config("m", cfg, engine)
    assert cfg["input"][0]["is_non_linear_format_io"] is True
    assert "is_non_linear_format_io" not in cfg["output"][0]
    given = config(
        "max_batch_size: 4\n"
        'input [ { name: "X" data_type: TYPE_FP16 dims: [ 3, 8, 8 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP16 dims: [ 3, 8, 8 ] } ]\n'
    )
    complete_config("m", given, engine)  # a config that leaves it out gets it set
    assert given["input"][0]["is_non_linear_format_io"] is True
    with pytest.raises(TritonError) as err:
        check_config("m", given, engine)
    assert err.value.code.name == "UNSUPPORTED"
    assert (
        "input 'X' of model 'm' uses TensorRT's non-linear IO format CHW32, which the tritonpy "
        "TensorRT backend does not serve" in str(err.value)
    )


def test_is_non_linear_format_io_contradicting_the_engine_fails_with_tritons_message() -> None:
    marked_linear = config(
        "max_batch_size: 8\n"
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] is_non_linear_format_io: true } ]\n'
    )
    with pytest.raises(TritonError) as err:
        complete_config("m", marked_linear, add_engine(max_batch=8))
    assert err.value.code.name == "INVALID_ARG"
    assert str(err.value) == (
        "'INPUT0' uses a linear IO format, but 'is_non_linear_format_io' is incorrectly set to true "
        "in the model configuration."
    )
    cfg = config()
    complete_config("m", cfg, add_engine(max_batch=8))
    cfg["output"][0]["is_non_linear_format_io"] = True  # without auto-complete, as loaded
    with pytest.raises(TritonError) as err:
        check_config("m", cfg, add_engine(max_batch=8))
    assert err.value.code.name == "INTERNAL"
    assert str(err.value) == (
        "output 'OUTPUT0' for model 'm' uses a linear IO format, but 'is_non_linear_format_io' is "
        "incorrectly set to true in the model configuration."
    )
    engine = _vectorized_engine()
    cfg = config()
    complete_config("m", cfg, engine)
    cfg["input"][0]["is_non_linear_format_io"] = False
    with pytest.raises(TritonError) as err:
        check_config("m", cfg, engine)
    assert str(err.value) == (
        "input 'X' for model 'm' uses a non-linear IO format, but 'is_non_linear_format_io' is "
        "incorrectly set to false in the model configuration."
    )


# ---- instance groups and profiles -----------------------------------------------------------


def test_an_instance_finds_its_group_and_profiles() -> None:
    cfg = config(
        'instance_group [ { name: "a" kind: KIND_GPU }, { name: "b" kind: KIND_GPU profile: ["1", "0"] } ]'
    )
    assert instance_group(cfg, "b_3")["name"] == "b"
    assert instance_profiles("m", "a_0", instance_group(cfg, "a_0"), 2) == [("default", 0)]
    assert instance_profiles("m", "b_0", instance_group(cfg, "b_0"), 2) == [("1", 1), ("0", 0)]
    with pytest.raises(TritonError) as err:
        instance_profiles("m", "b_0", {"profile": ["3"]}, 2)
    assert str(err.value) == (
        "Can not set the specified optimization profile 3[3] for b_0. Expected optimization profile "
        "index range 0-1"
    )
    with pytest.raises(TritonError, match="unable to parse 'x'"):
        instance_profiles("m", "b_0", {"profile": ["x"]}, 2)
