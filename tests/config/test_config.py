"""config.pbtxt parsing, validation, JSON form and defaults.

Bad configs are folders under bad/: ``config.pbtxt`` plus ``expected.txt``
holding a substring of the error; adding a case is adding a folder.
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
    parse_config_text,
    platform_backend,
    validate_config,
)

HERE = Path(__file__).parent
BAD = sorted(p for p in (HERE / "bad").iterdir() if p.is_dir())
GOOD = sorted(p for p in (HERE / "good").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", BAD, ids=lambda p: p.name)
def test_bad_configs_name_file_and_field(case: Path) -> None:
    expected = (case / "expected.txt").read_text().strip()
    path = case / "config.pbtxt"
    with pytest.raises(ConfigError) as info:
        validate_config(load_config_file(path), source=str(path), folder_name=case.name)
    assert expected in info.value.message
    assert str(path) in info.value.message
    assert info.value.code.name == "INVALID_ARG"


@pytest.mark.parametrize("case", GOOD, ids=lambda p: p.name)
def test_good_configs_validate_and_round_trip(case: Path) -> None:
    path = case / "config.pbtxt"
    config = load_config_file(path)
    validate_config(config, source=str(path), folder_name=case.name)
    fill_defaults(config)
    data = config_to_dict(config)
    json.dumps(data)  # plain JSON, no protobuf objects
    assert config_from_dict(data) == config


def test_json_form_matches_triton() -> None:
    config = parse_config_text(
        """
        name: "m"
        max_batch_size: 8
        input [ { name: "X" data_type: TYPE_STRING dims: [ -1, 16 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] label_filename: "l.txt" } ]
        version_policy: { specific: { versions: [ 2 ] } }
        dynamic_batching { max_queue_delay_microseconds: 500 }
        parameters { key: "k" value: { string_value: "v" } }
        """,
        "inline",
    )
    data = config_to_dict(config)
    assert data["input"][0]["dims"] == [-1, 16]  # int64 as numbers, as Triton prints them
    assert data["input"][0]["data_type"] == "TYPE_STRING"
    assert data["input"][0]["format"] == "FORMAT_NONE"  # defaults are printed
    assert data["output"][0]["label_filename"] == "l.txt"
    assert data["version_policy"] == {"specific": {"versions": [2]}}
    assert data["dynamic_batching"]["max_queue_delay_microseconds"] == 500
    assert data["parameters"] == {"k": {"string_value": "v"}}
    assert data["max_batch_size"] == 8 and data["backend"] == "" and data["platform"] == ""


def test_fill_defaults() -> None:
    config = ModelConfig(name="m")
    fill_defaults(config, default_kind="KIND_AUTO", default_count=2, gpu_count=0)
    data = config_to_dict(config)
    assert data["version_policy"] == {"latest": {"num_versions": 1}}
    (group,) = data["instance_group"]
    assert (group["name"], group["kind"], group["count"]) == ("m_0", "KIND_CPU", 2)
    assert data["optimization"]["input_pinned_memory"] == {"enable": True}

    gpu = ModelConfig(name="g")
    gpu.instance_group.add(count=0)
    fill_defaults(gpu, gpu_count=2)
    assert config_to_dict(gpu)["instance_group"][0]["gpus"] == [0, 1]
    assert gpu.instance_group[0].count == 1


def test_kind_gpu_without_gpu() -> None:
    config = ModelConfig(name="m")
    config.instance_group.add(kind=ModelConfig().instance_group.add().KIND_GPU)
    with pytest.raises(ConfigError, match="has kind KIND_GPU but this host has no GPU"):
        fill_defaults(config, gpu_count=0)


def test_config_from_dict_names_bad_field() -> None:
    with pytest.raises(ConfigError, match="max_batch"):
        config_from_dict({"name": "m", "max_batch": 3})


def test_platforms() -> None:
    assert platform_backend("onnxruntime_onnx") == "onnxruntime"
    assert platform_backend("pytorch_libtorch") == "pytorch"
    assert platform_backend("tensorrt_plan") == "tensorrt"
    assert platform_backend("nope") is None
