"""The JSON form of a config, as Triton reports it and gives it to backends.

Field names as in the proto, enums by name, fields without presence printed
with their defaults (unset messages left out), and 64-bit integers as JSON
numbers: protobuf's JSON mapping prints them as strings and Triton turns them
back into numbers, field by field, from a fixed list. The few 64-bit fields
that list misses stay strings in Triton's JSON (seen on Triton 2.51:
``"dim": ["4"]``, ``"device_id": "3"``), and so they do here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ._errors import ConfigError
from .model_config_pb2 import ModelConfig

_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}

_FLOAT = {FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE}

#: 64-bit fields Triton leaves as JSON strings.
_TRITON_STRINGS = {
    "inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim",
    "inference.ModelInstanceGroup.SecondaryDevice.device_id",
    # Triton looks for initial_state beside, not inside, each sequence state.
    "inference.ModelSequenceBatching.InitialState.dims",
}


def config_to_dict(config: ModelConfig) -> dict[str, Any]:
    """``config`` as Triton's JSON (what ``GET /v2/models/<m>/config`` returns)."""
    data: dict[str, Any] = json_format.MessageToDict(
        config,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    _numbers(config.DESCRIPTOR, data)
    return _ordered(config.DESCRIPTOR, data)


def _ordered(descriptor: Descriptor, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its fields in the order the proto declares them, as Triton's JSON lists
    them (protobuf's Python printer lists the fields a message holds before the defaults).
    Map entries keep their order; Triton's follows its hash map."""
    ordered: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            message = message.fields_by_name["value"].message_type
            if message is not None:
                value = {key: _ordered(message, item) for key, item in value.items()}
        elif message is not None:
            value = (
                [_ordered(message, v) for v in value] if isinstance(value, list) else _ordered(message, value)
            )
        ordered[field.name] = value
    return ordered


def _numbers(descriptor: Descriptor, data: dict[str, Any]) -> None:
    """Turn int64 strings into ints, recursively, guided by the descriptor."""
    for name, value in data.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key, item in value.items():
                if value_field.message_type is not None:
                    _numbers(value_field.message_type, item)
                elif value_field.type in _INT64:
                    value[key] = int(item)
        elif field.message_type is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                _numbers(field.message_type, item)
        elif field.type in _INT64 and field.full_name not in _TRITON_STRINGS:
            data[name] = [int(v) for v in value] if isinstance(value, list) else int(value)
        elif field.type in _FLOAT:
            data[name] = [_float(v) for v in value] if isinstance(value, list) else _float(value)


def _float(value: Any) -> Any:
    """A whole float as Triton's JSON prints it (``0``, not ``0.0``; seen on Triton 2.51
    for ``minimum_slot_utilization`` and ``fp32_false_true``)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def config_from_dict(data: dict[str, Any], source: str = "model configuration") -> ModelConfig:
    """The ``ModelConfig`` for a JSON dict; ConfigError naming the bad field."""
    config = ModelConfig()
    try:
        json_format.ParseDict(data, config)
    except json_format.ParseError as exc:
        raise ConfigError(f"invalid {source}: {exc}") from None
    return config
