"""Config rules checked at load, with Triton's messages: each folder of ``bad_configs/`` is a
model's ``config.pbtxt`` and the message its load fails with (``expected_message``); adding a
case is adding a folder. Parameters are read as identity.cc reads them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonpy
from tritonpy_backend_identity._config import read_settings, shape_to_string
from tritonpy_sdk import TritonError

CASES = Path(__file__).resolve().parent / "bad_configs"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir())

PAIR = {
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
}


@pytest.fixture(scope="module")
def reasons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every case loaded by one server: model name -> the reason it is UNAVAILABLE."""
    repo = tmp_path_factory.mktemp("bad_configs")
    for name in NAMES:
        (repo / name / "1").mkdir(parents=True)
        shutil.copy(CASES / name / "config.pbtxt", repo / name / "config.pbtxt")
    with tritonpy.Server(model_repository=repo, exit_on_error=False) as server:
        yield {name: reason for name, _, reason in server.failed_models()}


@pytest.mark.parametrize("case", NAMES)
def test_a_bad_config_fails_the_load_with_tritons_message(reasons: dict[str, str], case: str) -> None:
    expected = (CASES / case / "expected_message").read_text().strip()
    assert reasons[case] == f"Invalid argument: {expected}"


def test_no_case_loads(reasons: dict[str, str]) -> None:
    assert sorted(reasons) == NAMES


def test_shapes_are_written_as_tritons_shape_to_string() -> None:
    assert shape_to_string([1, 2]) == "[1,2]"
    assert shape_to_string([-1]) == "[-1]"
    assert shape_to_string([]) == "[]"


def _with(**parameters: str) -> dict[str, object]:
    return {**PAIR, "parameters": {k: {"string_value": v} for k, v in parameters.items()}}


def test_parameters_are_read_as_stoi_reads_them() -> None:
    settings = read_settings(_with(execute_delay_ms=" 25ms", creation_delay_sec="2"))
    assert (settings.execute_delay_ms, settings.creation_delay_sec) == (25, 2)
    # A negative creation delay sleeps no time, as sleep_for does.
    assert read_settings(_with(creation_delay_sec="-3")).creation_delay_sec == 0
    # The multiplier is read only beside execute_delay_ms.
    assert read_settings(_with(instance_wise_delay_multiplier="3")).delay_multiplier == 0


def test_the_delay_grows_with_the_instance_index() -> None:
    """identity.cc: execute_delay_ms * max(multiplier * index, 1); without a multiplier, the same
    delay on every instance."""
    scaled = read_settings(_with(execute_delay_ms="10", instance_wise_delay_multiplier="3"))
    assert [scaled.delay_ms(i) for i in range(4)] == [10, 30, 60, 90]
    flat = read_settings(_with(execute_delay_ms="10"))
    assert [flat.delay_ms(i) for i in range(3)] == [10, 10, 10]
    assert read_settings(PAIR).delay_ms(5) == 0


def test_optional_inputs_answer_their_shape_with_wildcards_as_one() -> None:
    config = {
        "input": [
            {"name": "INPUT0", "data_type": "TYPE_INT8", "dims": [-1, 3], "optional": True},
            {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4], "reshape": {"shape": [2, -1]}},
        ],
        "output": [
            {"name": "OUTPUT0", "data_type": "TYPE_INT8", "dims": [-1, 3]},
            {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4], "reshape": {"shape": [2, -1]}},
        ],
    }
    settings = read_settings(config)
    assert list(settings.optional) == ["0"]
    assert settings.optional["0"].shape == (1, 3)
    assert settings.outputs == ("OUTPUT0", "OUTPUT1")


def test_custom_tracing_parameters_are_read_as_identity_cc_reads_them() -> None:
    settings = read_settings(_with(enable_custom_tracing="true", nested_span_count="2"))
    assert (settings.custom_tracing, settings.nested_span_count, settings.single_activity_frequency) == (
        True,
        2,
        1,
    )
    # The span count only beside the switch; the frequency only beside the span count.
    assert read_settings(_with(nested_span_count="2")).nested_span_count == 0
    assert read_settings(_with(enable_custom_tracing="true", single_activity_frequency="3")) == read_settings(
        _with(enable_custom_tracing="true")
    )
    assert not read_settings(_with(enable_custom_tracing="yes")).custom_tracing
    with pytest.raises(TritonError, match="'single_activity_frequency' must be 1 or more"):
        read_settings(
            _with(enable_custom_tracing="true", nested_span_count="1", single_activity_frequency="0")
        )
