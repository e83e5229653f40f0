"""The config as the user wrote it: the fields ``config.pbtxt`` (or a load's JSON) sets.

Proto3 keeps no presence for scalars: once parsed, ``max_batch_size: 0`` and
no ``max_batch_size`` at all are the same message. Backends' auto-complete
needs the difference, so the top-level field names are read from the text
itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format, text_format

from ._json import _numbers, config_to_dict
from .model_config_pb2 import ModelConfig


def text_fields(text: str) -> list[str]:
    """The top-level field names written in protobuf text ``text`` (already parsed
    once, so well-formed), in order of first appearance."""
    tokenizer = text_format.Tokenizer(text.splitlines())
    names: list[str] = []
    depth = 0
    previous = ""
    while not tokenizer.AtEnd():
        token = tokenizer.token
        if token in ("{", "<", "["):
            depth += 1
        elif token in ("}", ">", "]"):
            depth -= 1
        elif depth == 0 and previous != ":" and (token[:1].isalpha() or token[:1] == "_"):
            if token not in names:
                names.append(token)
        previous = token
        tokenizer.NextToken()
    return names


def json_fields(text: str) -> list[str]:
    """The top-level keys of a config given as JSON (a load request's ``config``)."""
    data = json.loads(text) if text.strip() else {}
    return [str(k) for k in data] if isinstance(data, dict) else []


def user_config(config: ModelConfig, written: Iterable[str]) -> dict[str, Any]:
    """``config`` in Triton's JSON form with only the top-level fields named in
    ``written`` (in that order), a field at its default value included; inside
    them, fields at their defaults are left out."""
    data: dict[str, Any] = json_format.MessageToDict(config, preserving_proto_field_name=True)
    _numbers(config.DESCRIPTOR, data)
    full = config_to_dict(config)
    names = list(written)
    for name in names:
        if name not in data and name in full:
            data[name] = full[name]  # written with its default value: max_batch_size: 0
    # Only what was written: a load's config may have had its name filled in since.
    return {name: data[name] for name in names if name in data}
