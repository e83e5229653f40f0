"""The model config as Triton's repeat backend checks it: IN, DELAY, WAIT in, OUT, IDX out.

Checked once per model version, in ``model_initialize``, with the rules, the
order and the words of Triton's ``repeat.cc`` (``ValidateModelConfig``), each
failure INVALID_ARG:

1. ``max_batch_size`` 0 (the backend does not batch);
2. three inputs and two outputs;
3. named, in this order, ``IN``, ``DELAY``, ``WAIT`` and ``OUT``, ``IDX``
   (repeat.cc relies on the order);
4. ``dims`` (never ``reshape``): ``IN`` of one dimension, ``DELAY`` the same as
   ``IN``, ``WAIT``, ``OUT`` and ``IDX`` ``[1]``;
5. data types ``TYPE_INT32`` for ``IN`` and ``OUT``, ``TYPE_UINT32`` for
   ``DELAY``, ``WAIT`` and ``IDX``.

Nothing else is checked: a model that is not decoupled loads (a request whose
``IN`` has one element then gets its one response), instance groups of any kind
load, and ``optional`` inputs are taken as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tritonpy_sdk import TritonError

#: The inputs and outputs, in the order repeat.cc reads them, with their ordinals in its messages.
INPUTS = (("IN", "first"), ("DELAY", "second"), ("WAIT", "third"))
OUTPUTS = (("OUT", "first"), ("IDX", "second"))

#: The data type each tensor must have: its config name, and the word repeat.cc's message uses.
DATATYPES = {
    "IN": ("TYPE_INT32", "INT32"),
    "DELAY": ("TYPE_UINT32", "UINT32"),
    "WAIT": ("TYPE_UINT32", "UINT32"),
    "OUT": ("TYPE_INT32", "INT32"),
    "IDX": ("TYPE_UINT32", "UINT32"),
}


def shape_to_string(shape: Sequence[int]) -> str:
    """A shape as Triton's ``backend::ShapeToString`` writes it: ``[1,2]``, no spaces."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _dims(entry: dict[str, Any]) -> list[int]:
    return [int(d) for d in entry.get("dims") or []]


def validate(config: dict[str, Any]) -> None:
    """Raise INVALID_ARG, in repeat.cc's words, for the first rule ``config`` breaks."""
    if int(config.get("max_batch_size") or 0) != 0:
        raise TritonError.invalid_arg("repeat backend only supports models with max_batch_size == 0")
    inputs: list[dict[str, Any]] = list(config.get("input") or [])
    outputs: list[dict[str, Any]] = list(config.get("output") or [])
    if len(inputs) != 3:
        raise TritonError.invalid_arg(f"expected 3 inputs, got {len(inputs)}")
    if len(outputs) != 2:
        raise TritonError.invalid_arg(f"expected 2 outputs, got {len(outputs)}")
    tensors = {}
    for entries, expected, kind in ((inputs, INPUTS, "input"), (outputs, OUTPUTS, "output")):
        for entry, (name, ordinal) in zip(entries, expected):
            got = str(entry.get("name", ""))
            if got != name:
                raise TritonError.invalid_arg(
                    f"expected {ordinal} {kind} tensor name to be {name}, got {got}"
                )
            tensors[name] = entry
    in_shape, delay_shape = _dims(tensors["IN"]), _dims(tensors["DELAY"])
    if len(in_shape) != 1:
        raise TritonError.invalid_arg(
            f"expected IN shape to have one dimension, got {shape_to_string(in_shape)}"
        )
    if in_shape != delay_shape:
        raise TritonError.invalid_arg(
            "expected IN and DELAY shape to match, got "
            f"{shape_to_string(in_shape)} and {shape_to_string(delay_shape)}"
        )
    for name in ("WAIT", "OUT", "IDX"):
        shape = _dims(tensors[name])
        if shape != [1]:
            raise TritonError.invalid_arg(f"expected {name} shape to be [1], got {shape_to_string(shape)}")
    for name, (config_type, word) in DATATYPES.items():
        got = str(tensors[name].get("data_type", ""))
        if got != config_type:
            raise TritonError.invalid_arg(f"expected {name} datatype to be {word}, got {got}")
