"""Torch dtypes and Triton's config data types.

Triton's PyTorch backend maps BOOL, UINT8, INT8, INT16, INT32, INT64, FP16,
FP32 and FP64; tritonpy adds BF16 (numpy has no bfloat16, so it crosses as
16-bit words, reinterpreted without a copy). STRING is not a tensor type in
torch: it travels as a ``List[str]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Config TYPE_* name → torch dtype attribute name.
CONFIG_TO_TORCH = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
    "TYPE_BF16": "bfloat16",
}
TORCH_TO_CONFIG = {v: k for k, v in CONFIG_TO_TORCH.items()}


def torch_dtype(torch: Any, config_type: str) -> Any | None:
    """The torch dtype of a config ``TYPE_*`` name, None if torch has none (STRING, UINT16 ...)."""
    name = CONFIG_TO_TORCH.get(config_type)
    return getattr(torch, name) if name else None


def config_type(dtype: Any) -> str:
    """The config ``TYPE_*`` name of a torch dtype (``TYPE_INVALID`` for one Triton has no type for)."""
    return TORCH_TO_CONFIG.get(str(dtype).removeprefix("torch."), "TYPE_INVALID")


def to_torch(torch: Any, array: np.ndarray[Any, Any], bf16: bool = False) -> Any:
    """A numpy array as a torch tensor sharing its memory (DLPack; read-only arrays too).

    ``torch.from_numpy`` warns on read-only arrays (request bodies are read-only
    bytes) and would copy nothing either way; DLPack hands the buffer over as is.
    """
    if bf16:
        return torch.from_dlpack(np.ascontiguousarray(array).view(np.uint16)).view(torch.bfloat16)
    if array.ndim and not array.flags.c_contiguous and not array.flags.f_contiguous:
        array = np.ascontiguousarray(array)
    if array.dtype == np.bool_:  # DLPack's bool support varies between numpy and torch versions
        return torch.from_numpy(array) if array.flags.writeable else torch.from_numpy(array.copy())
    return torch.from_dlpack(array)


def to_numpy(torch: Any, tensor: Any, bf16_dtype: np.dtype[Any] | None = None) -> np.ndarray[Any, Any]:
    """A CPU tensor as a numpy array: a view of its memory when contiguous, else one copy."""
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:
        words: np.ndarray[Any, Any] = tensor.view(torch.int16).numpy().view(np.uint16)
        return words.view(bf16_dtype) if bf16_dtype is not None else words
    array: np.ndarray[Any, Any] = tensor.numpy()
    return array
