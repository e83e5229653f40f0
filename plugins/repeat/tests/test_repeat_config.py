"""Config rules checked at load, with repeat.cc's messages: each folder of ``bad_configs/`` is a
model's ``config.pbtxt`` and the message its load fails with (``expected_message``); adding a
case is adding a folder. What repeat.cc does not check loads: a model that is not decoupled,
optional inputs, any instance kind."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonpy
from tritonpy_backend_repeat._config import shape_to_string

CASES = Path(__file__).resolve().parent / "bad_configs"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir())

GOOD = {
    "not_decoupled": """
backend: "repeat"
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ 3 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ 3 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] optional: true }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
""",
    "two_instances": """
backend: "repeat"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
instance_group [ { kind: KIND_MODEL count: 2 } ]
""",
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], set[str]]]:
    """Every case and good model loaded by one server: the reasons of the models that
    failed, and the names of those that are ready."""
    repo = tmp_path_factory.mktemp("repeat_configs")
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
def test_a_bad_config_fails_the_load_with_repeat_ccs_message(
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
    assert shape_to_string([]) == "[]"
