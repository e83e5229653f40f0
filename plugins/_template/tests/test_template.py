from pathlib import Path

import numpy as np
import pytest
from tritonpy_backend_template import Scale as backend
from tritonpy_sdk import TritonError
from tritonpy_sdk.testing import BackendHarness

CONFIG = {
    "name": "scaled",
    "max_batch_size": 4,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
        {"name": "INPUT1", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    ],
}


def _model(tmp_path: Path, text: str) -> Path:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.json").write_text(text)
    return tmp_path


def test_scales_numbers_and_passes_bytes(tmp_path: Path) -> None:
    with BackendHarness(backend, _model(tmp_path, '{"scale": 3}'), config=CONFIG) as h:
        out = h.infer(
            {
                "INPUT0": np.array([[1, 2]], np.float32),
                "INPUT1": np.array([[b"x"]], dtype=object),
            }
        )
    np.testing.assert_array_equal(out["OUTPUT0"], [[3, 6]])
    assert out["OUTPUT0"].dtype == np.float32
    assert out["OUTPUT1"].tolist() == [[b"x"]]


def test_backend_config_gives_the_default_scale(tmp_path: Path) -> None:
    harness = BackendHarness(
        backend, _model(tmp_path, "{}"), config=CONFIG, backend_config={"default-scale": "5"}
    )
    with harness as h:
        assert h.infer({"INPUT0": np.array([[2]], np.int64)})["OUTPUT0"].tolist() == [[10]]


@pytest.mark.parametrize(
    ("text", "message"), [("{nope", "cannot read model file"), ('{"scale": "x"}', "must be a number")]
)
def test_bad_model_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TritonError, match=message):
        BackendHarness(backend, _model(tmp_path, text), config=CONFIG).start()


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(TritonError, match="cannot read model file .*No such file"):
        BackendHarness(backend, tmp_path, config=CONFIG).start()


def test_auto_complete_mirrors_inputs_and_keeps_user_outputs(tmp_path: Path) -> None:
    config = {
        "name": "scaled",
        "max_batch_size": 4,
        "input": [
            {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [2]},
            {"name": "INPUT1", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
        ],
        "output": [{"name": "OUTPUT1", "data_type": "TYPE_STRING", "dims": [-1]}],
    }
    with BackendHarness(backend, _model(tmp_path, "{}"), config=config) as h:
        outputs = [(o["name"], o["data_type"], o["dims"]) for o in h.model.config["output"]]
    assert outputs == [("OUTPUT1", "TYPE_STRING", [-1]), ("OUTPUT0", "TYPE_FP32", [2])]


def test_batched_requests_get_one_response_each(tmp_path: Path) -> None:
    config = {**CONFIG, "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}]}
    with BackendHarness(backend, _model(tmp_path, '{"scale": 2}'), config=config) as h:
        requests = [h.request({"INPUT0": np.full((n, 2), n, np.int32)}) for n in (1, 2)]
        responses = h.execute(requests)
    assert [r.outputs["OUTPUT0"].data.tolist() for r in responses] == [[[2, 2]], [[4, 4], [4, 4]]]
