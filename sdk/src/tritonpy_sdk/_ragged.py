"""Ragged batches: inputs whose shapes differ between the requests of a batch.

``allow_ragged_batch: true`` on an input lets the batcher combine requests
whatever that input's shape; the backend then gathers it flat with
:func:`gather_ragged` and describes the batch to the model with the config's
``batch_input`` entries, computed by :func:`batch_input_array` (Triton's
kinds: BATCH_ELEMENT_COUNT, BATCH_ACCUMULATED_ELEMENT_COUNT,
BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO, BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
BATCH_ITEM_SHAPE, BATCH_ITEM_SHAPE_FLATTEN). Counts are per batch item: a
request carrying a batch of b counts as b items of its per-item shape. An
output the model writes flat for the whole batch (``batch_output``) is cut
back into each request's part by :class:`BatchOutputs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._batching import scatter_responses
from ._datatype import DataType
from ._errors import TritonError
from ._inference import InferenceRequest, InferenceResponse
from ._tensor import Tensor


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


@dataclass(frozen=True)
class BatchOutputs:
    """A config's ``batch_output`` entries (Triton's one kind, BATCH_SCATTER_WITH_INPUT_SHAPE):
    outputs a model writes flat for a whole (ragged) batch, which each request gets its
    part of in the shape of its own source input, each -1 of the output's dims (batch
    dimension first) taking the size of the same dimension of the request's input."""

    #: Output name → (source input, the output's full dims, -1 where the input's size goes).
    scatter: Mapping[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BatchOutputs:
        """From a config in Triton's JSON form (the core has checked the names)."""
        outputs = {str(o.get("name", "")): o for o in config.get("output", [])}
        batching = int(config.get("max_batch_size", 0) or 0) > 0
        scatter: dict[str, tuple[str, tuple[int, ...]]] = {}
        for entry in config.get("batch_output", []):
            source = str((entry.get("source_input") or [""])[0])
            for target in entry.get("target_name", []):
                output = outputs.get(str(target), {})
                reshape = output.get("reshape")
                dims = tuple(
                    int(d) for d in ((reshape or {}).get("shape") if reshape else output.get("dims")) or ()
                )
                scatter[str(target)] = (source, (-1, *dims) if batching else dims)
        return cls(scatter)

    def __bool__(self) -> bool:
        return bool(self.scatter)

    def __contains__(self, name: object) -> bool:
        return name in self.scatter

    def responses(
        self,
        requests: Sequence[InferenceRequest],
        arrays: Mapping[str, np.ndarray[Any, Any]],
        datatypes: Mapping[str, DataType],
    ) -> list[InferenceResponse]:
        """One response per request from the batch's host output ``arrays`` (by name): the
        batch outputs cut by each request's input shape, the others split along the batch
        dimension (``scatter_responses``), typed by ``datatypes``."""
        if not self.scatter:
            return scatter_responses(requests, arrays, datatypes)
        rest = {n: a for n, a in arrays.items() if n not in self.scatter}
        responses = scatter_responses(requests, rest, datatypes)
        flat = {n: a for n, a in arrays.items() if n in self.scatter}
        self.scatter_outputs(requests, responses, flat, datatypes)
        return responses

    def scatter_outputs(
        self,
        requests: Sequence[InferenceRequest],
        responses: Sequence[InferenceResponse],
        arrays: Mapping[str, np.ndarray[Any, Any]],
        datatypes: Mapping[str, DataType],
    ) -> None:
        """Give each response its part of every batch output in ``arrays`` (the batch's
        flat outputs, by name), in the shape of its request's source input."""
        for name, flat in arrays.items():
            source, dims = self.scatter[name]
            values = flat.reshape(-1)
            offset = 0
            for request, response in zip(requests, responses):
                given = request.inputs.get(source)
                if given is None:
                    raise TritonError.invalid_arg(
                        f"batch_output '{name}' needs input '{source}', which a request lacks"
                    )
                shape = _scattered_shape(dims, given.data.shape)
                count = int(np.prod(shape, dtype=np.int64))
                if offset + count > values.size:
                    raise TritonError.internal(
                        f"batch output '{name}' has {values.size} elements, fewer than the batch's "
                        f"'{source}' inputs need"
                    )
                response.outputs[name] = Tensor(
                    name, values[offset : offset + count].reshape(shape), datatypes[name]
                )
                offset += count


def _scattered_shape(dims: Sequence[int], input_shape: Sequence[int]) -> tuple[int, ...]:
    """``dims`` with each -1 replaced by the size of the same dimension of ``input_shape``."""
    shape = []
    for i, d in enumerate(dims):
        if d == -1:
            if i >= len(input_shape):
                raise TritonError.invalid_arg(
                    f"batch output dims {list(dims)} have more dimensions than its source input's "
                    f"shape {list(input_shape)}"
                )
            d = int(input_shape[i])
        shape.append(int(d))
    return tuple(shape)
