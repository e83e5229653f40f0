"""Shape tensors (``is_shape_tensor``): an input whose *values* set shapes inside the
engine, and an output computed from shapes alone. TensorRT reads and writes both in
host memory, so they never touch the GPU. As Triton's TensorRT backend handles them:

- In a batching model a request sends a shape tensor input with its config dims
  alone (``[2]`` for ``dims: [ 2 ]``), and requests batch together only when its
  values are equal (the core's batchers see to that). The engine gets the batch's
  values behind the batch size, ``[batch, v0, v1]``, in its own type (INT32 or
  INT64); a model that does not batch, the values as sent.
- An optimization profile must hold the values: each between the profile's min
  and max values for that position (the batch size too), else Triton's ``The shape
  value at index i is expected to be in range from lo to hi, Got: v``; among the
  profiles that hold a batch, the distance of its values from the opt values counts
  as the dims' does.
- A shape tensor output (INT64) comes back as ``[batch, v0, v1]``; each request
  gets ``[its batch size, 2]``, every row the values after the batch size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tritonpy_sdk import DataType, InferenceRequest, Tensor, TritonError, batch_sizes

from ._engine import Ranges


def shape_values(
    requests: Sequence[InferenceRequest], name: str, batch: int | None, dtype: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """The values the engine gets for shape tensor input ``name``: the first request's
    (a batch's are equal), behind the batch size ``batch`` (None: the model does not
    batch), as ``dtype``. Contiguous host memory that TensorRT may read."""
    tensor = requests[0].inputs[name]
    if tensor.device is not None:
        raise TritonError.invalid_arg(
            f"shape tensor for input '{name}' must be in single contiguous buffer on CPU"
        )
    values = tensor.data.reshape(-1)
    if batch is not None:
        values = np.concatenate(([batch], values))
    return np.ascontiguousarray(values, dtype=dtype)


def values_problem(values: Sequence[int], low: Sequence[int], high: Sequence[int]) -> str:
    """Triton's ``ValidateShapeValues``: why ``values`` do not fit [``low``, ``high``]
    ("" when they do)."""
    if len(values) != len(high):
        return f"mismatch between the number of shape values. Expecting {len(high)}. Got {len(values)}"
    for i, v in enumerate(values):
        if not low[i] <= v <= high[i]:
            return (
                f"The shape value at index {i} is expected to be in range from {low[i]} to {high[i]}, "
                f"Got: {v}"
            )
    return ""


def values_distance(ranges: Ranges, values: Mapping[str, Sequence[int]]) -> int | None:
    """How far ``values`` lie from the opt values of ``ranges``; None when out of range."""
    distance = 0
    for name, given in values.items():
        if name not in ranges:
            continue
        low, opt, high = ranges[name]
        if values_problem(given, low, high):
            return None
        distance += sum(abs(o - v) for o, v in zip(opt, given))
    return distance


def shape_outputs(
    requests: Sequence[InferenceRequest], name: str, values: np.ndarray[Any, Any], batching: bool, where: str
) -> list[Tensor]:
    """Each request's tensor of shape tensor output ``name`` from the ``values`` the engine
    wrote (``[batch, v...]`` when ``batching``)."""
    if not batching:
        return [Tensor(name, values.astype(np.int64), DataType.INT64) for _ in requests]
    total = sum(batch_sizes(requests))
    if len(values) == 0 or int(values[0]) != total:
        raise TritonError.internal(f"failed to retrieve the output shape values from binding '{where}'")
    row = values[1:].astype(np.int64)
    rows = [np.broadcast_to(row, (size, len(row))).copy() for size in batch_sizes(requests)]
    return [Tensor(name, r, DataType.INT64) for r in rows]
