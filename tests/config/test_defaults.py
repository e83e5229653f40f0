"""Defaults Triton fills before serving and reporting a config.

The same defaults, seen on a real server, are pinned end to end by
``test_json.py``; these tests cover the cases that need GPUs or a backend's
preferred instance group.
"""

from __future__ import annotations

import pytest
from tritonpy.config import ConfigError, ModelConfig, config_to_dict, fill_defaults, parse_config_text
from tritonpy.config.model_config_pb2 import ModelInstanceGroup


def test_empty_config() -> None:
    config = ModelConfig(name="m")
    fill_defaults(config)
    data = config_to_dict(config)
    assert data["version_policy"] == {"latest": {"num_versions": 1}}
    assert [(g["name"], g["kind"], g["count"], g["gpus"]) for g in data["instance_group"]] == [
        ("m", "KIND_CPU", 1, [])  # the added group is named after the model, no index
    ]
    assert data["optimization"]["input_pinned_memory"] == {"enable": True}
    assert data["optimization"]["output_pinned_memory"] == {"enable": True}


def test_backend_preferred_group() -> None:
    config = ModelConfig(name="m")
    fill_defaults(config, default_kind="KIND_AUTO", default_count=2, gpu_count=0)
    (group,) = config.instance_group
    assert (group.kind, group.count) == (ModelInstanceGroup.KIND_CPU, 2)


def test_groups_on_a_gpu_host() -> None:
    config = parse_config_text(
        """
        name: "m"
        instance_group [
          { kind: KIND_AUTO },
          { kind: KIND_GPU count: 2 gpus: [ 1 ] },
          { name: "cpu" kind: KIND_CPU count: 0 },
          { kind: KIND_AUTO gpus: [ 5 ] }
        ]
        """,
        "inline",
    )
    fill_defaults(config, gpu_count=2)
    groups = config_to_dict(config)["instance_group"]
    assert [(g["name"], g["kind"], g["count"], g["gpus"]) for g in groups] == [
        ("m_0", "KIND_GPU", 1, [0, 1]),  # every GPU when none are listed
        ("m_1", "KIND_GPU", 2, [1]),
        ("cpu", "KIND_CPU", 1, []),
        ("m_3", "KIND_CPU", 1, [5]),  # AUTO listing a GPU the host lacks runs on the CPU
    ]


def test_gpu_group_needs_the_gpus_it_lists() -> None:
    config = parse_config_text('name: "m" instance_group [ { kind: KIND_GPU gpus: [ 3 ] } ]', "inline")
    with pytest.raises(ConfigError, match="specifies invalid or unsupported gpu id 3"):
        fill_defaults(config, gpu_count=2, source="models/m/config.pbtxt")
    config = parse_config_text('name: "m" instance_group [ { kind: KIND_GPU } ]', "inline")
    with pytest.raises(ConfigError, match="^models/m/config.pbtxt: instance group m_0 of model m has kind"):
        fill_defaults(config, gpu_count=0, source="models/m/config.pbtxt")


def test_existing_values_are_kept() -> None:
    config = parse_config_text(
        """
        name: "m"
        max_batch_size: 8
        version_policy: { latest: { num_versions: 0 } }
        optimization { input_pinned_memory { enable: false } }
        dynamic_batching { preferred_batch_size: [ 2 ] }
        """,
        "inline",
    )
    fill_defaults(config)
    data = config_to_dict(config)
    assert data["version_policy"] == {"latest": {"num_versions": 0}}  # Triton keeps it (and loads nothing)
    assert data["optimization"]["input_pinned_memory"] == {"enable": False}
    assert data["optimization"]["output_pinned_memory"] == {"enable": True}
    assert data["dynamic_batching"]["preferred_batch_size"] == [2]


def test_batching_defaults() -> None:
    config = parse_config_text('name: "m" max_batch_size: 8 dynamic_batching { }', "inline")
    fill_defaults(config)
    assert list(config.dynamic_batching.preferred_batch_size) == [8]
    config = parse_config_text('name: "m" max_batch_size: 4 sequence_batching { oldest { } }', "inline")
    fill_defaults(config)
    assert config.sequence_batching.max_sequence_idle_microseconds == 1_000_000
    assert list(config.sequence_batching.oldest.preferred_batch_size) == [4]


def test_ensemble_gets_no_instances_or_optimization() -> None:
    config = parse_config_text('name: "e" platform: "ensemble" ensemble_scheduling { }', "inline")
    fill_defaults(config, gpu_count=1)
    data = config_to_dict(config)
    assert data["instance_group"] == []
    assert "optimization" not in data
    assert data["model_transaction_policy"] == {"decoupled": False}
