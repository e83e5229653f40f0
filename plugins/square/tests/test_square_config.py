"""Config rules checked at load, with square.cc's messages: each folder of ``bad_configs/`` is a
model's ``config.pbtxt`` and the message its load fails with (``expected_message``); adding a
case is adding a folder. What square.cc does not check loads: batching, a model that is not
decoupled, parameters that are not numbers (logged, left at 0). The parameters are read as
square.cc reads them."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonpy
from tritonpy_backend_square._config import Parameters, Result, read_parameters, shape_to_string

CASES = Path(__file__).resolve().parent / "bad_configs"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir())

GOOD = {
    "batching_not_decoupled": """
backend: "square"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching {}
""",
    "parameters_not_numbers": """
backend: "square"
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
parameters [
  { key: "CUSTOM_INFER_DELAY_NS" value { string_value: "-5" } },
  { key: "CUSTOM_FAIL_COUNT" value { string_value: "1e3" } }
]
""",
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], set[str]]]:
    """Every case and good model loaded by one server: the reasons of the models that
    failed, and the names of those that are ready."""
    repo = tmp_path_factory.mktemp("square_configs")
    for name in NAMES:
        (repo / name / "1").mkdir(parents=True)
        shutil.copy(CASES / name / "config.pbtxt", repo / name / "config.pbtxt")
    for name, text in GOOD.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(text)
    with tritonpy.Server(model_repository=repo, exit_on_error=False) as server:
        failed = {name: reason for name, _, reason in server.failed_models()}
        ready = {name for name in GOOD if server.model_ready(name)}
        yield failed, ready


@pytest.mark.parametrize("case", NAMES)
def test_a_bad_config_fails_the_load_with_square_ccs_message(
    loaded: tuple[dict[str, str], set[str]], case: str
) -> None:
    expected = (CASES / case / "expected_message").read_text().strip()
    assert loaded[0][case] == f"Invalid argument: {expected}"


def test_no_bad_case_loads_and_every_good_one_does(loaded: tuple[dict[str, str], set[str]]) -> None:
    failed, ready = loaded
    assert sorted(failed) == NAMES
    assert ready == set(GOOD)


def test_shapes_are_written_as_tritons_shape_to_string() -> None:
    assert shape_to_string([1, 2]) == "[1,2]"
    assert shape_to_string([-1]) == "[-1]"


def _config(**parameters: object) -> dict[str, object]:
    return {"parameters": {k: {"string_value": v} for k, v in parameters.items()}}


def test_parameters_are_read_as_square_cc_reads_them(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.square")
    got = read_parameters(
        _config(
            CUSTOM_INFER_DELAY_NS="400000000",
            CUSTOM_OUTPUT_DELAY_NS="0200",
            CUSTOM_CANCEL_DELAY_NS="2147483647",
            CUSTOM_FAIL_COUNT="2",
            CUSTOM_EMPTY_COUNT="1",
            SOMETHING_ELSE="x",
        ),
        logger,
    )
    assert got == Parameters(400000000, 200, 2147483647, 2, 1)
    with caplog.at_level(logging.INFO, logger="test.square"):
        got = read_parameters(
            _config(CUSTOM_INFER_DELAY_NS=" 5", CUSTOM_FAIL_COUNT="-1", CUSTOM_EMPTY_COUNT="٣"), logger
        )
    assert got == Parameters()  # left at their defaults
    assert caplog.messages == [
        " 5 string_value from CUSTOM_INFER_DELAY_NS parameter is not a number",
        "-1 string_value from CUSTOM_FAIL_COUNT parameter is not a number",
        "٣ string_value from CUSTOM_EMPTY_COUNT parameter is not a number",  # ASCII digits only
    ]
    with caplog.at_level(logging.INFO, logger="test.square"):
        assert read_parameters({"parameters": {"CUSTOM_FAIL_COUNT": {}}}, logger) == Parameters()
    assert caplog.messages[-1] == "string_value cannot be parsed from CUSTOM_FAIL_COUNT parameter"


def test_the_last_responses_are_empty_and_the_ones_before_them_fail() -> None:
    """square.cc's InferResult: of N, [0, N-E-F) succeed, [N-E-F, N-E) fail, [N-E, N) are empty."""
    params = Parameters(fail_count=2, empty_count=1)
    assert [params.result(i, 5) for i in range(5)] == [
        Result.SUCCESS,
        Result.SUCCESS,
        Result.FAIL,
        Result.FAIL,
        Result.EMPTY,
    ]
    assert [params.result(i, 2) for i in range(2)] == [Result.FAIL, Result.EMPTY]
    assert [Parameters().result(i, 3) for i in range(3)] == [Result.SUCCESS] * 3
