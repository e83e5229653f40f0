"""The config as written: top-level fields read from the text, explicit defaults kept."""

from __future__ import annotations

from tritonpy.config import config_from_dict, json_fields, parse_config_text, text_fields, user_config

TEXT = """
# a comment naming max_batch_size
name: "m{x" # a brace in a string
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
input { name: "y" data_type: TYPE_STRING dims: -1 }
dynamic_batching { }
instance_group < kind: KIND_CPU count: 0 >
parameters { key: "max_batch_size" value: { string_value: "b" } }
"""


def test_top_level_fields_of_the_text_in_order() -> None:
    assert text_fields(TEXT) == [
        "name",
        "max_batch_size",
        "input",
        "dynamic_batching",
        "instance_group",
        "parameters",
    ]
    assert text_fields("") == []


def test_the_user_config_keeps_explicit_defaults_at_the_top_and_nothing_unwritten() -> None:
    config = parse_config_text(TEXT, "test")
    written = user_config(config, text_fields(TEXT))
    assert written == {
        "name": "m{x",
        "max_batch_size": 0,
        "input": [
            {"name": "x", "data_type": "TYPE_FP32", "dims": [4]},
            {"name": "y", "data_type": "TYPE_STRING", "dims": [-1]},
        ],
        "dynamic_batching": {},
        "instance_group": [{"kind": "KIND_CPU"}],
        "parameters": {"max_batch_size": {"string_value": "b"}},
    }
    unwritten = parse_config_text('name: "m"', "test")
    assert user_config(unwritten, text_fields('name: "m"')) == {"name": "m"}


def test_a_json_config_names_its_keys() -> None:
    text = '{"max_batch_size": 0, "backend": "b"}'
    assert json_fields(text) == ["max_batch_size", "backend"]
    config = config_from_dict({"max_batch_size": 0, "backend": "b"})
    assert user_config(config, json_fields(text)) == {"max_batch_size": 0, "backend": "b"}
    assert json_fields("") == []
