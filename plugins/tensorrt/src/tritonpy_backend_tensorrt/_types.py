"""TensorRT data types as Triton's ``TYPE_*`` names, as Triton's TensorRT backend maps them."""

from __future__ import annotations

#: TensorRT ``DataType`` member names → model config data types. FP8, INT4, FP4 and the
#: other narrow types have no Triton data type: an engine tensor of one cannot be served.
_CONFIG_TYPES = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
    "UINT8": "TYPE_UINT8",
}


def config_type(trt_type: str) -> str | None:
    """The config data type of TensorRT type ``trt_type`` (``"FLOAT"`` → ``"TYPE_FP32"``),
    None for one Triton has no data type for."""
    return _CONFIG_TYPES.get(trt_type)


def type_text(trt_type: str) -> str:
    """How a message names an engine's data type: its config type, else TensorRT's name."""
    return config_type(trt_type) or f"TensorRT {trt_type}"
