"""Model configuration: the ModelConfig protobuf, ``config.pbtxt`` parsing,
the JSON form Triton reports, validation and Triton's default filling."""

from ._defaults import fill_defaults
from ._errors import ConfigError
from ._json import config_from_dict, config_to_dict
from ._load import copy_config, load_config_file, parse_config_text
from ._platforms import (
    FILE_PLATFORMS,
    PLATFORM_BACKENDS,
    backend_platform,
    platform_backend,
    platform_file,
    platform_pair_error,
)
from ._validate import validate_config
from ._written import json_fields, text_fields, user_config
from .model_config_pb2 import ModelConfig

__all__ = [
    "FILE_PLATFORMS",
    "PLATFORM_BACKENDS",
    "ConfigError",
    "ModelConfig",
    "config_from_dict",
    "copy_config",
    "config_to_dict",
    "fill_defaults",
    "backend_platform",
    "load_config_file",
    "parse_config_text",
    "platform_backend",
    "platform_pair_error",
    "platform_file",
    "validate_config",
    "json_fields",
    "text_fields",
    "user_config",
]
