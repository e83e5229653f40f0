"""Defaults Triton fills before serving and reporting a config.

The same defaults, seen on a real server, are pinned end to end by
``test_json.py``; these tests cover the cases that need GPUs or a backend's
preferred instance group.
"""

from __future__ import annotations

import logging

import pytest
from tritonpy.config import ConfigError, ModelConfig, config_to_dict, fill_defaults, parse_config_text
from tritonpy.config.model_config_pb2 import ModelInstanceGroup
from tritonpy_sdk import GpuSupport


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


NO_CUDA = GpuSupport(
    usable=False, reason="onnxruntime here has no CUDAExecutionProvider: install onnxruntime-gpu"
)


def test_a_backend_that_cannot_use_the_gpu_defaults_to_the_cpu(caplog: pytest.LogCaptureFixture) -> None:
    """Triton picks KIND_GPU only for a backend that can run there (its preferred group)."""
    config = ModelConfig(name="m", backend="onnxruntime")
    with caplog.at_level(logging.INFO, logger="tritonpy.config"):
        fill_defaults(config, default_kind="KIND_AUTO", gpu_count=1, backend_gpu=NO_CUDA)
    (group,) = config.instance_group
    assert (group.name, group.kind, list(group.gpus)) == ("m", ModelInstanceGroup.KIND_CPU, [])
    assert (
        "model 'm': instance group 'm' defaults to KIND_CPU: onnxruntime here has no "
        "CUDAExecutionProvider: install onnxruntime-gpu"
    ) in caplog.messages


def test_a_backend_that_can_use_the_gpu_defaults_to_it(caplog: pytest.LogCaptureFixture) -> None:
    config = ModelConfig(name="m", backend="pytorch")
    with caplog.at_level(logging.INFO, logger="tritonpy.config"):
        fill_defaults(config, default_kind="KIND_AUTO", gpu_count=2, backend_gpu=GpuSupport(usable=True))
    (group,) = config.instance_group
    assert (group.kind, list(group.gpus)) == (ModelInstanceGroup.KIND_GPU, [0, 1])
    assert (
        "model 'm': instance group 'm' defaults to KIND_GPU: this host has 2 GPU(s) and backend "
        "'pytorch' can use them"
    ) in caplog.messages


def test_kind_auto_groups_follow_the_backend_too(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config_text('name: "m" instance_group [ { kind: KIND_AUTO count: 2 } ]', "inline")
    with caplog.at_level(logging.INFO, logger="tritonpy.config"):
        fill_defaults(config, gpu_count=1, backend_gpu=NO_CUDA)
    assert (config.instance_group[0].kind, config.instance_group[0].count) == (ModelInstanceGroup.KIND_CPU, 2)
    assert any(
        "instance group 'm_0' (KIND_AUTO) resolves to KIND_CPU: onnxruntime" in m for m in caplog.messages
    )


def test_without_a_gpu_the_choice_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tritonpy.config"):
        fill_defaults(ModelConfig(name="m"), default_kind="KIND_AUTO", gpu_count=0)
    (record,) = [r for r in caplog.records if "instance group" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == "model 'm': instance group 'm' defaults to KIND_CPU: this host has no GPU"


def test_kind_gpu_for_a_backend_that_cannot_use_the_gpu_is_a_clear_error() -> None:
    config = parse_config_text(
        'name: "m" backend: "onnxruntime" instance_group [ { kind: KIND_GPU } ]', "inline"
    )
    with pytest.raises(ConfigError) as raised:
        fill_defaults(config, gpu_count=1, backend_gpu=NO_CUDA, source="models/m/config.pbtxt")
    assert raised.value.message == (
        "models/m/config.pbtxt: instance group m_0 of model m has kind KIND_GPU but backend 'onnxruntime' "
        "cannot use a GPU here: onnxruntime here has no CUDAExecutionProvider: install onnxruntime-gpu; "
        "else use KIND_CPU, or KIND_AUTO to run on a GPU only where the backend can"
    )


def test_kind_gpu_loads_where_the_backend_runs_it_on_the_cpu() -> None:
    """A backend may keep explicit KIND_GPU groups loading (FIL: Triton repositories say KIND_GPU)."""
    config = parse_config_text('name: "m" instance_group [ { kind: KIND_GPU } ]', "inline")
    fallback = GpuSupport(usable=False, reason="lightgbm runs on the CPU here", kind_gpu_runs_on_cpu=True)
    fill_defaults(config, gpu_count=1, backend_gpu=fallback)
    assert (config.instance_group[0].kind, list(config.instance_group[0].gpus)) == (
        ModelInstanceGroup.KIND_GPU,
        [0],
    )


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
