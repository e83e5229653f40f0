"""``IOSpec``: what request validation needs from a model config, precomputed.

Built once when a model loads, so the hot path does dictionary look-ups
instead of walking the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import DataType


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """One input or output of the config. ``dims`` exclude the batch dimension."""

    name: str
    datatype: DataType
    dims: tuple[int, ...]
    reshape: tuple[int, ...] | None
    optional: bool = False
    label_filename: str = ""

    @property
    def fixed(self) -> bool:
        return all(d >= 0 for d in self.dims)

    def full_shape(self, batching: bool) -> list[int]:
        """The shape metadata reports: ``[-1, *dims]`` when the model batches."""
        return [-1, *self.dims] if batching else list(self.dims)


@dataclass(frozen=True, slots=True)
class IOSpec:
    name: str
    version: int
    max_batch_size: int
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    required_inputs: frozenset[str]
    #: Every input's name (one set check finds an unknown one).
    input_names: frozenset[str]
    #: Whether some output has a ``reshape`` (undone on every response when it has).
    reshaped_outputs: bool
    #: ``max_batch_size > 0``: inputs and outputs carry a batch dimension (a field, not
    #: a property: validation reads it for every request).
    batching: bool
    #: Inputs that are shape tensors (TensorRT): in a batching model they carry no batch
    #: dimension, their one copy holding for the whole batch.
    shape_tensors: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, config: dict[str, Any], version: int) -> IOSpec:
        """Build from the config in Triton's JSON form (as ``config_to_dict`` gives)."""
        inputs = {t.name: t for t in (_tensor(d) for d in config.get("input", []))}
        outputs = {t.name: t for t in (_tensor(d) for d in config.get("output", []))}
        shape_tensors = [d for d in config.get("input", []) if d.get("is_shape_tensor")]
        return cls(
            name=str(config["name"]),
            version=version,
            max_batch_size=int(config.get("max_batch_size", 0)),
            inputs=inputs,
            outputs=outputs,
            required_inputs=frozenset(n for n, t in inputs.items() if not t.optional),
            input_names=frozenset(inputs),
            reshaped_outputs=any(t.reshape is not None for t in outputs.values()),
            batching=int(config.get("max_batch_size", 0)) > 0,
            shape_tensors=frozenset(str(d["name"]) for d in shape_tensors),
        )


def _tensor(d: dict[str, Any]) -> TensorSpec:
    reshape = d.get("reshape")
    return TensorSpec(
        name=str(d["name"]),
        datatype=DataType.from_config(str(d.get("data_type", "TYPE_INVALID"))),
        dims=tuple(int(x) for x in d.get("dims", [])),
        reshape=tuple(int(x) for x in reshape.get("shape", [])) if reshape is not None else None,
        optional=bool(d.get("optional", False)),
        label_filename=str(d.get("label_filename", "")),
    )
