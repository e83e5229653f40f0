import numpy as np
import pytest
from tritonpy.runtime.responses import classify, finish_response
from tritonpy.runtime.spec import IOSpec
from tritonpy.runtime.validation import validate_request
from tritonpy_sdk import (
    DataType,
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


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            {"A": np.zeros((1, 4), np.float32)},
            r"expected 3 inputs but got 1 inputs for model 'm'. Got input\(s\) \['A'\], but missing "
            r"required input\(s\) \['B'\]",
        ),
        ({**_ok(), "C": np.zeros((3, 1), np.float32)}, "unexpected inference input 'C' for model 'm'"),
        (
            {**_ok(), "A": np.zeros((3, 4), np.float64)},
            "inference input 'A' data-type is 'FP64', but model 'm' expects 'FP32'",
        ),
        (
            {**_ok(), "A": np.zeros((3, 5), np.float32)},
            r"unexpected shape for input 'A' for model 'm'. Expected \[-1,4\], got \[3,5\]",
        ),
        (
            {"A": np.zeros((3, 4), np.float32), "B": np.zeros((2, 5, 2), np.int32)},
            "input 'B' batch size does not match other inputs for 'm'",
        ),
        (
            {"A": np.zeros((9, 4), np.float32), "B": np.zeros((9, 1, 2), np.int32)},
            "inference request batch-size must be <= 8 for 'm'",
        ),
        (
            {"A": np.zeros(4, np.float32), "B": np.zeros((1, 1, 2), np.int32)},
            r"Expected \[-1,4\], got \[\]|Expected \[-1,4\], got \[4\]",
        ),
    ],
)
def test_invalid_requests(arrays: dict, message: str) -> None:
    with pytest.raises(TritonError, match=message) as info:
        validate_request(SPEC, _req(**arrays))
    assert info.value.code.name == "INVALID_ARG"


def test_unknown_requested_output() -> None:
    req = _req(**_ok())
    req.requested_outputs = [RequestedOutput("NOPE")]
    with pytest.raises(TritonError, match="unexpected inference output 'NOPE' for model 'm'"):
        validate_request(SPEC, req)


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
    out = classify(t, 2, ["cat", "dog", "bird"])
    assert out.datatype is DataType.BYTES and out.shape == (2, 2)
    assert out.data.tolist() == [
        [b"0.700000:1:dog", b"0.200000:2:bird"],
        [b"0.500000:0:cat", b"0.400000:2:bird"],
    ]
    assert classify(t, 9, None).shape == (2, 3)
