"""Ragged batches: inputs whose shapes differ between the requests of a batch.

``allow_ragged_batch: true`` on an input lets the batcher combine requests
whatever that input's shape; the backend then gathers it flat with
:func:`gather_ragged` and describes the batch to the model with the config's
``batch_input`` entries, computed by :func:`batch_input_array` (Triton's
kinds: BATCH_ELEMENT_COUNT, BATCH_ACCUMULATED_ELEMENT_COUNT,
BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO, BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
BATCH_ITEM_SHAPE, BATCH_ITEM_SHAPE_FLATTEN). Counts are per batch item: a
request carrying a batch of b counts as b items of its per-item shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import TritonError
from ._inference import InferenceRequest


def gather_ragged(requests: Sequence[InferenceRequest], name: str) -> np.ndarray[Any, Any]:
    """Input ``name`` of every request, flattened and concatenated (one copy)."""
    arrays = [r.inputs[name].data.reshape(-1) for r in requests]
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _items(requests: Sequence[InferenceRequest], source: str) -> list[tuple[int, ...]]:
    """The per-item shape of ``source`` for every batch item, in order."""
    shapes: list[tuple[int, ...]] = []
    for r in requests:
        tensor = r.inputs.get(source)
        if tensor is None:
            raise TritonError.invalid_arg(f"batch_input needs input '{source}', which a request lacks")
        item = tuple(tensor.data.shape[1:])
        shapes += [item] * max(1, r.batch_size)
    return shapes


def batch_input_array(
    kind: str, requests: Sequence[InferenceRequest], source_inputs: Sequence[str], dtype: Any
) -> np.ndarray[Any, Any]:
    """The tensor Triton's ``batch_input`` of ``kind`` gives the model for this batch."""
    if not source_inputs:
        raise TritonError.invalid_arg(f"batch_input {kind} needs a source_input")
    items = _items(requests, source_inputs[0])
    counts = [int(np.prod(shape, dtype=np.int64)) for shape in items]
    dt = np.dtype(dtype)
    if kind == "BATCH_ELEMENT_COUNT":
        return np.array(counts, dtype=dt)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT":
        return np.cumsum(counts).astype(dt)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO":
        return np.concatenate([[0], np.cumsum(counts)]).astype(dt)
    if kind == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":
        return np.zeros(max(counts), dtype=dt)
    if kind in ("BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN"):
        ranks = {len(s) for s in items}
        if len(ranks) != 1:
            raise TritonError.invalid_arg(f"batch_input {kind}: items of '{source_inputs[0]}' differ in rank")
        shape = np.array(items, dtype=dt).reshape(len(items), ranks.pop())
        return shape.reshape(-1) if kind == "BATCH_ITEM_SHAPE_FLATTEN" else shape
    raise TritonError.unsupported(f"batch_input kind '{kind}' is not supported")
