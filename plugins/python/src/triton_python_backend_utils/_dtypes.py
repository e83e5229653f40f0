"""Triton's data type codes (``TRITONSERVER_DataType``) and their numpy types."""

from __future__ import annotations

from typing import Any

import numpy as np

TRITONSERVER_TYPE_INVALID = 0
TRITONSERVER_TYPE_BOOL = 1
TRITONSERVER_TYPE_UINT8 = 2
TRITONSERVER_TYPE_UINT16 = 3
TRITONSERVER_TYPE_UINT32 = 4
TRITONSERVER_TYPE_UINT64 = 5
TRITONSERVER_TYPE_INT8 = 6
TRITONSERVER_TYPE_INT16 = 7
TRITONSERVER_TYPE_INT32 = 8
TRITONSERVER_TYPE_INT64 = 9
TRITONSERVER_TYPE_FP16 = 10
TRITONSERVER_TYPE_FP32 = 11
TRITONSERVER_TYPE_FP64 = 12
TRITONSERVER_TYPE_BYTES = 13
TRITONSERVER_TYPE_BF16 = 14

#: Protocol name ("FP32") → type code.
CODES = {
    "BOOL": 1,
    "UINT8": 2,
    "UINT16": 3,
    "UINT32": 4,
    "UINT64": 5,
    "INT8": 6,
    "INT16": 7,
    "INT32": 8,
    "INT64": 9,
    "FP16": 10,
    "FP32": 11,
    "FP64": 12,
    "BYTES": 13,
    "BF16": 14,
}
NAMES = {code: name for name, code in CODES.items()}

_NUMPY: dict[int, Any] = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}


#: Config type name → numpy type, as Triton's ``pb_utils.TRITON_STRING_TO_NUMPY`` has it
#: (``bool`` for ``TYPE_BOOL``; no ``TYPE_BF16``, which numpy lacks).
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of a ``TRITONSERVER_TYPE_*`` code (BYTES → ``numpy.object_``)."""
    if data_type == TRITONSERVER_TYPE_BF16:
        try:
            import ml_dtypes  # type: ignore[import-not-found,unused-ignore]

            return ml_dtypes.bfloat16
        except ImportError:
            return np.uint16
    return _NUMPY.get(data_type)


#: numpy dtype → type code, for the hot path (BYTES kinds and bfloat16 are handled apart).
_CODE_OF_DTYPE: dict[np.dtype[Any], int] = {
    np.dtype(t): code for code, t in _NUMPY.items() if code != TRITONSERVER_TYPE_BYTES
}


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The ``TRITONSERVER_TYPE_*`` code of a numpy type; strings and bytes are BYTES."""
    dtype = data_type if isinstance(data_type, np.dtype) else np.dtype(data_type)
    code = _CODE_OF_DTYPE.get(dtype)
    if code is not None:
        return code
    if dtype.kind in ("O", "S", "U"):
        return TRITONSERVER_TYPE_BYTES
    if dtype.name == "bfloat16":
        return TRITONSERVER_TYPE_BF16
    return None


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """``"TYPE_FP32"`` (config name) → ``numpy.float32``; ``TYPE_STRING`` → ``numpy.object_``."""
    name = triton_type_string.removeprefix("TYPE_")
    code = CODES.get("BYTES" if name == "STRING" else name)
    return None if code is None else triton_to_numpy_type(code)
