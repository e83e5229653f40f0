"""Reading config.pbtxt: Triton's text format, errors naming file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonpy.config import ConfigError, ModelConfig, load_config_file, parse_config_text

EXAMPLE = """
# comments and both list spellings are Triton's text format
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1, 16 ] } ]
output { name: "Y" data_type: TYPE_STRING dims: 16 }
output { name: "Z" data_type: TYPE_INT64 dims: [ 1 ] reshape: { shape: [ ] } }
instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
parameters { key: "k" value: { string_value: "v" } }
"""


def test_parse_text() -> None:
    config = parse_config_text(EXAMPLE, "inline")
    assert isinstance(config, ModelConfig)
    assert config.name == "m" and config.max_batch_size == 8
    assert list(config.input[0].dims) == [-1, 16]
    assert [o.name for o in config.output] == ["Y", "Z"]
    assert list(config.output[0].dims) == [16]
    assert config.output[1].HasField("reshape") and list(config.output[1].reshape.shape) == []
    assert list(config.instance_group[0].gpus) == [0, 1]
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.parameters["k"].string_value == "v"


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text(EXAMPLE)
    assert load_config_file(path) == parse_config_text(EXAMPLE, "other")


def test_parse_error_names_source_line_and_column() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text('name: "m"\ninput [ { name: "X" data_type: TYPE_FLOAT } ]', "models/m/config.pbtxt")
    message = info.value.message
    assert message.startswith("failed to read text proto from models/m/config.pbtxt: 2:")
    assert "TYPE_FLOAT" in message
    assert info.value.code.name == "INVALID_ARG"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("-5", "Expected integer, got: -"),
        ('"invalid_value"', 'Expected integer, got: "invalid_value"'),
        ("12345678901", "Integer out of range (12345678901)"),
    ],
)
def test_a_bad_integer_is_worded_as_triton_s_parser_words_it(value: str, problem: str) -> None:
    # NVIDIA's L0_simple_ensemble greps these (a uint32 field: max_inflight_requests).
    with pytest.raises(ConfigError) as info:
        parse_config_text(f"ensemble_scheduling {{ max_inflight_requests: {value} }}", "m/config.pbtxt")
    assert info.value.message.endswith(problem)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="failed to read"):
        load_config_file(tmp_path / "missing.pbtxt")
    bad = tmp_path / "config.pbtxt"
    bad.write_bytes(b'name: "\xff\xfe"')
    with pytest.raises(ConfigError, match=str(bad)):
        load_config_file(bad)
