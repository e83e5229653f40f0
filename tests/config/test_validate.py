"""Validation: golden folders of bad and good configs.

``bad/<case>/config.pbtxt`` must fail with a message containing
``bad/<case>/expected.txt`` (Triton's wording where Triton has the rule);
``good/<case>/config.pbtxt`` must pass. Adding a case is adding a folder. Each
config goes through what the loader does: parse, fill defaults (on a host
without GPUs), validate with the folder as the model's folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tritonpy.config import (
    ConfigError,
    ModelConfig,
    config_from_dict,
    config_to_dict,
    fill_defaults,
    load_config_file,
    validate_config,
)

HERE = Path(__file__).parent
BAD = sorted(p for p in (HERE / "bad").iterdir() if p.is_dir())
GOOD = sorted(p for p in (HERE / "good").iterdir() if p.is_dir())


def load_like_the_server(folder: Path) -> ModelConfig:
    path = folder / "config.pbtxt"
    config = load_config_file(path)
    if not config.name:
        config.name = folder.name
    fill_defaults(config, gpu_count=0, source=str(path))
    validate_config(config, source=str(path), folder_name=folder.name)
    return config


@pytest.mark.parametrize("case", BAD, ids=lambda p: p.name)
def test_bad_config_names_file_and_problem(case: Path) -> None:
    expected = (case / "expected.txt").read_text().strip()
    with pytest.raises(ConfigError) as info:
        load_like_the_server(case)
    assert expected in info.value.message
    assert str(case / "config.pbtxt") in info.value.message
    assert info.value.code.name == "INVALID_ARG"


@pytest.mark.parametrize("case", GOOD, ids=lambda p: p.name)
def test_good_config_validates_and_round_trips(case: Path) -> None:
    config = load_like_the_server(case)
    data = config_to_dict(config)
    assert json.loads(json.dumps(data)) == data  # plain JSON, no protobuf objects
    assert config_from_dict(data) == config


def test_validation_without_folder_skips_the_name_rule() -> None:
    validate_config(ModelConfig(name="anything"), source="inline")


def test_reshape_of_variable_dims_is_checked_piece_by_piece() -> None:
    config = ModelConfig(name="m", max_batch_size=2)
    config.input.add(name="X", data_type=11, dims=[2, 4, -1, 6]).reshape.shape.extend([8, -1, 1, 6])
    validate_config(config, source="inline")
    config.input[0].reshape.shape[:] = [8, -1, 2, 6]
    with pytest.raises(ConfigError, match="has different size for dims and reshape"):
        validate_config(config, source="inline")


def test_a_scalar_needs_a_batching_model() -> None:
    config = ModelConfig(name="m", max_batch_size=2)
    config.input.add(name="X", data_type=11, dims=[1]).reshape.SetInParent()
    validate_config(config, source="inline")
    config.max_batch_size = 0
    with pytest.raises(ConfigError, match="cannot have empty reshape for non-batching model"):
        validate_config(config, source="inline")


def test_shape_tensors_are_allowed_for_tensorrt() -> None:
    config = ModelConfig(name="m", backend="tensorrt")
    config.input.add(name="S", data_type=8, dims=[2], is_shape_tensor=True)
    validate_config(config, source="inline")
