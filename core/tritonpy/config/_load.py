"""Read ``config.pbtxt`` with protobuf's text format."""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import text_format

from ._errors import ConfigError
from .model_config_pb2 import ModelConfig


def parse_config_text(text: str, source: str) -> ModelConfig:
    """Parse protobuf text ``text``; ConfigError naming ``source``, line and column.

    The message starts as Triton's does ("failed to read text proto from ..."),
    followed by protobuf's ``line:column : problem``.
    """
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigError(f"failed to read text proto from {source}: {_cpp_words(str(exc))}") from None
    return config


#: Python's protobuf words for a bad integer, and the C++ parser's (Triton's log has those).
_INTEGER_PROBLEMS = (
    (re.compile(r"Couldn't parse integer: (.*)$"), r"Expected integer, got: \1"),
    (re.compile(r"Value out of range: -\d+$"), "Expected integer, got: -"),  # for an unsigned field
    (re.compile(r"Value out of range: (\d+)$"), r"Integer out of range (\1)"),
)


def _cpp_words(problem: str) -> str:
    for pattern, words in _INTEGER_PROBLEMS:
        problem, count = pattern.subn(words, problem)
        if count:
            break
    return problem


def load_config_file(path: Path) -> ModelConfig:
    """Parse the ``config.pbtxt`` at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"failed to read {path}: {exc}") from None
    return parse_config_text(text, str(path))


def copy_config(config: ModelConfig) -> ModelConfig:
    """A copy of ``config`` to change without changing it."""
    copied = ModelConfig()
    copied.CopyFrom(config)
    return copied
