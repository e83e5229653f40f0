"""The JSON form of a config against what a real Triton server returned.

``triton/<model>/config.pbtxt`` was loaded by Triton 2.51 (the 24.10 release,
python backend, a host without GPUs) and ``triton/<model>/triton.json`` is
its ``GET /v2/models/<model>/config`` answer, saved with curl and indented.
Our loader's steps (name from the folder, defaults, the backend's default
model file) must give exactly the same JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor
from tritonpy.config import (
    ConfigError,
    ModelConfig,
    config_from_dict,
    config_to_dict,
    fill_defaults,
    load_config_file,
    parse_config_text,
    validate_config,
)

HERE = Path(__file__).parent
OBSERVED = sorted(p for p in (HERE / "triton").iterdir() if p.is_dir())

#: Fields our schema has that Triton 2.51's did not yet (added later upstream).
NEWER_FIELDS = {("ensemble_scheduling", "max_inflight_requests")}


def _drop_newer(data: dict[str, Any]) -> dict[str, Any]:
    for parent, field in NEWER_FIELDS:
        data.get(parent, {}).pop(field, None)
    return data


@pytest.mark.parametrize("case", OBSERVED, ids=lambda p: p.name)
def test_same_json_as_triton(case: Path) -> None:
    path = case / "config.pbtxt"
    config = load_config_file(path)
    if not config.name:
        config.name = case.name
    fill_defaults(config, default_kind="KIND_CPU", default_count=1, gpu_count=0)
    validate_config(config, source=str(path), folder_name=case.name)
    if config.backend == "python":
        config.default_model_filename = "model.py"  # the backend's default model file
    expected = json.loads((case / "triton.json").read_text())
    ours = _drop_newer(config_to_dict(config))
    assert ours == expected
    # As text too: 0 == 0.0 in Python, but Triton prints a whole float as 0.
    assert json.dumps(ours, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert config_from_dict(expected) == config
    # And with each object's fields in Triton's order, the proto's (a map's entries
    # follow Triton's hash map, which nobody can rely on). One exception: Triton
    # rewrites a sequence state's initial_state after printing, moving its
    # `zero_data` behind `name`.
    theirs = _field_orders(ModelConfig.DESCRIPTOR, expected)
    for path, fields in theirs.items():
        if ".initial_state[" in path and fields[-1] == "zero_data":
            fields.insert(fields.index("name"), fields.pop())
    assert _field_orders(ModelConfig.DESCRIPTOR, ours) == theirs


def _field_orders(descriptor: Descriptor, data: dict[str, Any], path: str = "") -> dict[str, list[str]]:
    """The order of the fields of every message in ``data``, by its path."""
    orders = {path: list(data)}
    for name, value in data.items():
        message = descriptor.fields_by_name[name].message_type
        if message is None:
            continue
        if message.GetOptions().map_entry:
            message = message.fields_by_name["value"].message_type
            items = sorted(value.items()) if message is not None else []
        else:
            items = list(enumerate(value)) if isinstance(value, list) else [("", value)]
        for key, item in items:
            orders.update(_field_orders(message, item, f"{path}.{name}[{key}]"))
    return orders


def test_numbers_and_defaults() -> None:
    config = parse_config_text(
        """
        name: "m"
        max_batch_size: 8
        input [ { name: "X" data_type: TYPE_STRING dims: [ -1, 16 ] } ]
        output [ { name: "Y" data_type: TYPE_FP32 dims: [ 16 ] reshape: { shape: [ 4, 4 ] } } ]
        version_policy: { specific: { versions: [ 2 ] } }
        dynamic_batching {
          max_queue_delay_microseconds: 500
          default_queue_policy { default_timeout_microseconds: 7 }
          priority_queue_policy { key: 1 value: { default_timeout_microseconds: 9 } }
        }
        model_warmup [
          { name: "w" inputs { key: "X" value: { data_type: TYPE_STRING dims: [ 3 ] zero_data: true } } }
        ]
        instance_group [ { secondary_devices [ { device_id: 3 } ] } ]
        """,
        "inline",
    )
    data = config_to_dict(config)
    # 64-bit integers are JSON numbers, as Triton prints them ...
    assert data["input"][0]["dims"] == [-1, 16]
    assert data["output"][0]["reshape"] == {"shape": [4, 4]}
    assert data["version_policy"] == {"specific": {"versions": [2]}}
    batching = data["dynamic_batching"]
    assert batching["max_queue_delay_microseconds"] == 500
    assert batching["default_queue_policy"]["default_timeout_microseconds"] == 7
    assert batching["priority_queue_policy"] == {
        "1": {
            "timeout_action": "REJECT",
            "default_timeout_microseconds": 9,
            "allow_timeout_override": False,
            "max_queue_size": 0,
        }
    }
    assert data["model_warmup"][0]["inputs"]["X"]["dims"] == [3]
    # ... except where Triton leaves them strings.
    assert data["instance_group"][0]["secondary_devices"] == [{"kind": "KIND_NVDLA", "device_id": "3"}]
    # Fields without presence are printed with their defaults; unset messages are not.
    assert data["input"][0]["format"] == "FORMAT_NONE"
    assert data["output"][0]["label_filename"] == ""
    assert data["backend"] == "" and data["platform"] == "" and data["batch_input"] == []
    assert "sequence_batching" not in data and "response_cache" not in data
    assert config_from_dict(data) == config


def test_config_from_dict_names_the_bad_field() -> None:
    with pytest.raises(ConfigError, match="max_batch"):
        config_from_dict({"name": "m", "max_batch": 3})
    with pytest.raises(ConfigError, match="data_type"):
        config_from_dict({"name": "m", "input": [{"name": "X", "data_type": "TYPE_FLOAT"}]})
