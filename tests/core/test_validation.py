import numpy as np
import pytest
from tritonpy.runtime.responses import classify, finish_response
from tritonpy.runtime.spec import IOSpec
from tritonpy.runtime.validation import validate_request
from tritonpy_sdk import (
    DataType,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    Tensor,
    TritonError,
)

CONFIG = {
    "name": "m",
    "max_batch_size": 8,
    "input": [
        {"name": "A", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "B", "data_type": "TYPE_INT32", "dims": [-1, 2]},
        {"name": "R", "data_type": "TYPE_FP32", "dims": [4], "reshape": {"shape": [2, 2]}, "optional": True},
    ],
    "output": [
        {"name": "Y", "data_type": "TYPE_FP32", "dims": [4], "reshape": {"shape": [2, 2]}},
        {"name": "Z", "data_type": "TYPE_FP32", "dims": [3]},
    ],
}
SPEC = IOSpec.from_config(CONFIG, 1)


def _req(**arrays: np.ndarray) -> InferenceRequest:
    return InferenceRequest("m", 1, {n: Tensor.from_numpy(n, a) for n, a in arrays.items()})


def _ok() -> dict[str, np.ndarray]:
    return {"A": np.zeros((3, 4), np.float32), "B": np.zeros((3, 5, 2), np.int32)}


def test_valid_request_gets_batch_size() -> None:
    req = _req(**_ok())
    validate_request(SPEC, req)
    assert req.batch_size == 3


def test_reshape_is_applied_before_execute() -> None:
    req = _req(**_ok(), R=np.arange(12, dtype=np.float32).reshape(3, 4))
    validate_request(SPEC, req)
    assert req.inputs["R"].shape == (3, 2, 2)


_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to "
    "be prepended to each input shape. If you want to specify the full shape including the batch "
    "dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size."
)
_ID = "[request id: <id_unknown>] "


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (  # a model with an optional input: Triton's "between" form
            {"A": np.zeros((1, 4), np.float32)},
            f"{_ID}expected number of inputs between 2 and 3 but got 1 inputs for model 'm'. Got input(s) "
            "['A'], but missing required input(s) ['B']. Please provide all required input(s).",
        ),
        (  # too many: the given ones last first; none missing is Triton's lone ']'
            {**_ok(), "R": np.zeros((3, 4), np.float32), "C": np.zeros((3, 1), np.float32)},
            f"{_ID}expected number of inputs between 2 and 3 but got 4 inputs for model 'm'. Got input(s) "
            "['C','R','B','A'], but missing required input(s) ]. Please provide all required input(s).",
        ),
        (  # a name is checked before anything else of the inputs, without the request id
            {"A": np.zeros((2, 4), np.float64), "C": np.zeros((3, 1), np.float32)},
            "unexpected inference input 'C' for model 'm'",
        ),
        (
            {**_ok(), "A": np.zeros((3, 4), np.float64)},
            f"{_ID}inference input 'A' data-type is 'FP64', but model 'm' expects 'FP32'",
        ),
        (
            {**_ok(), "A": np.zeros((3, 5), np.float32)},
            f"{_ID}unexpected shape for input 'A' for model 'm'. Expected [-1,4], got [3,5]. {_NOTE}",
        ),
        (  # inputs are visited last given first
            {"A": np.zeros((3, 4), np.float32), "B": np.zeros((2, 5, 2), np.int32)},
            f"{_ID}input 'A' batch size does not match other inputs for 'm'",
        ),
        (  # the batch before the data types
            {"A": np.zeros((9, 4), np.float64), "B": np.zeros((9, 1, 2), np.int32)},
            f"{_ID}inference request batch-size must be <= 8 for 'm'",
        ),
        (
            {"A": np.zeros((3, 4), np.float32), "B": np.zeros((), np.int32)},
            f"{_ID}input 'B' has no shape but model requires batch dimension for 'm'",
        ),
        (  # optional inputs in place of a required one: refused, in the count's words
            {"B": np.zeros((1, 1, 2), np.int32), "R": np.zeros((1, 4), np.float32)},
            f"{_ID}expected number of inputs between 2 and 3 but got 2 inputs for model 'm'. Got input(s) "
            "['R','B'], but missing required input(s) ['A']. Please provide all required input(s).",
        ),
    ],
)
def test_invalid_requests_get_tritons_words(arrays: dict, message: str) -> None:
    with pytest.raises(TritonError) as info:
        validate_request(SPEC, _req(**arrays))
    assert info.value.code.name == "INVALID_ARG"
    assert info.value.message == message


def test_every_input_required_and_the_request_id() -> None:
    spec = IOSpec.from_config({**CONFIG, "max_batch_size": 0, "input": CONFIG["input"][:2]}, 1)
    req = InferenceRequest("m", 1, {}, id="r7")
    with pytest.raises(TritonError) as info:
        validate_request(spec, req)
    assert info.value.message == (
        "[request id: r7] expected 2 inputs but got 0 inputs for model 'm'. Got input(s) [], but "
        "missing required input(s) ['A','B']. Please provide all required input(s)."
    )
    req = _req(A=np.zeros(4, np.float32), B=np.zeros((7, 3), np.int32))
    req.id = "r8"
    with pytest.raises(TritonError) as info:
        validate_request(spec, req)
    # Without a batch dimension Triton ends the sentence with a space and no note.
    assert info.value.message == (
        "[request id: r8] unexpected shape for input 'B' for model 'm'. Expected [-1,2], got [7,3]. "
    )


def test_an_unknown_requested_output_comes_first() -> None:
    req = _req(A=np.zeros((3, 4), np.float32))  # B missing too
    req.requested_outputs = [RequestedOutput("NOPE")]
    req.id = "x"
    with pytest.raises(TritonError) as info:
        validate_request(SPEC, req)
    assert info.value.message == "unexpected inference output 'NOPE' for model 'm'"


def test_an_output_parameter_is_checked_with_its_name_and_without_the_request_id() -> None:
    req = _req(A=np.zeros((3, 4), np.float32))  # B missing too: the parameter comes first
    req.requested_outputs = [RequestedOutput("Z", {"classification": -1})]
    with pytest.raises(TritonError) as info:
        validate_request(SPEC, req)
    assert info.value.message.startswith("Unable to set 'classification' of output 'Z'")


def test_non_batching_model_takes_full_shape() -> None:
    spec = IOSpec.from_config({**CONFIG, "max_batch_size": 0}, 1)
    req = _req(A=np.zeros(4, np.float32), B=np.zeros((7, 2), np.int32))
    validate_request(spec, req)
    assert req.batch_size == 1


def test_finish_response_filters_and_undoes_output_reshape() -> None:
    req = _req(**_ok())
    req.requested_outputs = [RequestedOutput("Y")]
    resp = InferenceResponse(
        {
            "Y": Tensor.from_numpy("Y", np.zeros((3, 2, 2), np.float32)),
            "Z": Tensor.from_numpy("Z", np.zeros((3, 3), np.float32)),
        }
    )
    out = finish_response(SPEC, {}, req, resp)
    assert list(out.outputs) == ["Y"]
    assert out.outputs["Y"].shape == (3, 4)
    assert (out.model_name, out.model_version) == ("m", 1)


def test_finish_response_without_requested_outputs_keeps_all_and_undoes_reshape() -> None:
    resp = InferenceResponse(
        {
            "Y": Tensor.from_numpy("Y", np.zeros((3, 2, 2), np.float32)),
            "Z": Tensor.from_numpy("Z", np.zeros((3, 3), np.float32)),
            "extra": Tensor.from_numpy("extra", np.zeros(2, np.float32)),
        }
    )
    out = finish_response(SPEC, {}, _req(**_ok()), resp)
    assert list(out.outputs) == ["Y", "Z", "extra"]
    assert out.outputs["Y"].shape == (3, 4)  # a config with an output reshape: still undone


def test_finish_response_of_a_config_without_output_reshape_names_the_response() -> None:
    spec = IOSpec.from_config({**CONFIG, "output": [{"name": "Z", "data_type": "TYPE_FP32", "dims": [3]}]}, 2)
    assert not spec.reshaped_outputs and SPEC.reshaped_outputs
    z = np.zeros((3, 3), np.float32)
    req = _req(**_ok())
    req.id = "r1"
    out = finish_response(spec, {}, req, InferenceResponse({"Z": Tensor.from_numpy("Z", z)}))
    assert (out.model_name, out.model_version, out.id) == ("m", 2, "r1")
    assert list(out.outputs) == ["Z"] and out.outputs["Z"].data is z


def test_classification_top_k_with_labels() -> None:
    t = Tensor.from_numpy("Z", np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4]], np.float32))
    out = classify(t, 2, ["cat", "dog", "bird"], batching=True)
    assert out.datatype is DataType.BYTES and out.shape == (2, 2)
    assert out.data.tolist() == [
        [b"0.700000:1:dog", b"0.200000:2:bird"],
        [b"0.500000:0:cat", b"0.400000:2:bird"],
    ]
    assert classify(t, 9, None, batching=True).shape == (2, 3)


def test_classification_ranks_each_batch_entry_flat_as_triton() -> None:
    """Answers recorded from Triton 2.51: a batch entry of several dims is one run of
    elements (``[B, 2, 3]`` → ``[B, k]``), a model that does not batch ranks its whole
    output (``[k]``); integers are written without a fraction."""
    x = np.array([[[1, 5, 3], [9, 2, 4]], [[0, 1, 2], [3, 4, 5]]], np.float32)
    out = classify(Tensor.from_numpy("Z", x), 2, None, batching=True)
    assert out.data.tolist() == [[b"9.000000:3", b"5.000000:1"], [b"5.000000:5", b"4.000000:4"]]
    assert classify(Tensor.from_numpy("Z", x[:1]), 10, None, batching=True).shape == (1, 6)
    ints = Tensor.from_numpy("Z", np.array([[1, 5, 3], [9, 2, 4]], np.int32))
    assert classify(ints, 2, None, batching=False).data.tolist() == [b"9:3", b"5:1"]
    for dtype in (np.float16, np.bool_):
        with pytest.raises(TritonError) as info:
            classify(Tensor.from_numpy("Z", np.ones(3, dtype)), 2, None, batching=False)
        assert info.value.code is ErrorCode.INVALID_ARG
        assert info.value.message.startswith("class result not available for output due to unsupported type")
    huge = Tensor.from_numpy("Z", np.zeros((1, 1_000_001), np.uint8))
    with pytest.raises(TritonError, match="classification output tensor too large"):
        classify(huge, 1, None, batching=True)


def test_a_shape_tensor_carries_no_batch_dimension() -> None:
    """As Triton takes one (its L0_trt_shape_tensors requests): in a batching model a
    shape tensor input is sent with its config dims alone, and the other inputs say the
    batch size."""
    config = {
        **CONFIG,
        "platform": "tensorrt_plan",
        "input": [
            {"name": "A", "data_type": "TYPE_FP32", "dims": [4]},
            {"name": "S", "data_type": "TYPE_INT32", "dims": [2], "is_shape_tensor": True},
        ],
    }
    spec = IOSpec.from_config(config, 1)
    req = _req(A=np.zeros((3, 4), np.float32), S=np.array([32, 32], np.int32))
    validate_request(spec, req)
    assert req.batch_size == 3 and req.inputs["S"].data.shape == (2,)
    with pytest.raises(TritonError) as err:  # a batch dimension on it is a shape mismatch
        validate_request(spec, _req(A=np.zeros((1, 4), np.float32), S=np.array([[32, 32]], np.int32)))
    assert err.value.message.startswith(
        "[request id: <id_unknown>] unexpected shape for input 'S' for model 'm'. "
        "Expected [-1,2], got [1,2]. NOTE: Setting a non-zero max_batch_size"
    )
