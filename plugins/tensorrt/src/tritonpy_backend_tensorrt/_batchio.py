"""Ragged batches for an engine: ``allow_ragged_batch`` inputs, ``batch_input`` and ``batch_output``.

As Triton's TensorRT backend does:

- an input with ``allow_ragged_batch: true`` (engine dims ``[-1]``) is fed the
  batch's values flat, each request's after the one before
  (``tritonpy_sdk.gather_ragged``); requests whose ragged inputs differ in
  shape still run as one batch;
- a ``batch_input`` target is an engine input the backend computes from the
  batch (``tritonpy_sdk.batch_input_array``: element counts, accumulated
  counts, item shapes...), of the entry's data type; clients never send it;
- a ``batch_output`` of kind ``BATCH_SCATTER_WITH_INPUT_SHAPE`` is an output
  the engine writes flat for the whole batch: each request gets the next
  elements of it, in the shape of its own source input (each -1 of the
  output's dims, batch dim first, takes the size of the same dimension of
  the request's input).

Plain data in and out: tested without TensorRT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonpy_sdk import (
    BatchOutputs,
    DataType,
    InferenceRequest,
    batch_input_array,
    gather_ragged,
)


@dataclass(frozen=True)
class BatchInput:
    """A ``batch_input`` target: what the backend feeds it."""

    kind: str
    sources: tuple[str, ...]
    datatype: DataType


@dataclass(frozen=True)
class BatchIO:
    """A model's ragged inputs, ``batch_input`` targets and ``batch_output`` scatters."""

    inputs: Mapping[str, BatchInput] = field(default_factory=dict)
    ragged: frozenset[str] = frozenset()
    #: The ``batch_output`` scatters (the SDK's, shared with the other backends).
    scatter: BatchOutputs = field(default_factory=BatchOutputs)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BatchIO:
        inputs = {}
        for entry in config.get("batch_input", []):
            kind = str(entry.get("kind", "BATCH_ELEMENT_COUNT"))
            datatype = DataType.from_config(str(entry.get("data_type", "TYPE_INT32")))
            for target in entry.get("target_name", []):
                inputs[str(target)] = BatchInput(kind, tuple(entry.get("source_input", [])), datatype)
        ragged = frozenset(str(i["name"]) for i in config.get("input", []) if i.get("allow_ragged_batch"))
        return cls(inputs, ragged, BatchOutputs.from_config(config))

    def __bool__(self) -> bool:
        return bool(self.inputs or self.ragged or self.scatter)

    def host_input(self, requests: Sequence[InferenceRequest], name: str) -> np.ndarray[Any, Any] | None:
        """The batch's array for engine input ``name`` when this object feeds it (a
        ``batch_input`` target or a ragged input); None for an input gathered as usual."""
        target = self.inputs.get(name)
        if target is not None:
            return batch_input_array(target.kind, requests, target.sources, target.datatype.numpy_dtype)
        if name in self.ragged:
            return gather_ragged(requests, name)
        return None
