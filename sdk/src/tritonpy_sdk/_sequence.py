"""Sequence batching as backends see it: request flags, and the tensors the core feeds.

A model with ``sequence_batching`` gets its control inputs (``control_input``)
and its implicit state inputs (``state[].input_name``) filled in by the core
on every request, as ordinary input tensors; they are not in the config's
``input`` section. A model returns its next state as an ordinary output
tensor named ``state[].output_name``; the core keeps it for the sequence's
next request and drops it from the client's response unless the client asked
for it (it must then be listed under ``output``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``InferenceRequest.flags`` bit: the first request of a sequence (Triton's value).
SEQUENCE_START = 1
#: ``InferenceRequest.flags`` bit: the last request of a sequence (Triton's value).
SEQUENCE_END = 2


def sequence_inputs(config: Mapping[str, Any]) -> frozenset[str]:
    """Names of the inputs the core fills for a sequence model (control and state
    inputs) in ``config`` (Triton's JSON form); empty for other models. A backend
    that checks its model file against the config's inputs accepts these too."""
    sequence = config.get("sequence_batching")
    if not sequence:
        return frozenset()
    names = {str(c.get("name", "")) for c in sequence.get("control_input", [])}
    names.update(str(s.get("input_name", "")) for s in sequence.get("state", []))
    names.discard("")
    return frozenset(names)


def sequence_state_outputs(config: Mapping[str, Any]) -> frozenset[str]:
    """Names of the outputs that carry a sequence model's next implicit state."""
    sequence = config.get("sequence_batching")
    if not sequence:
        return frozenset()
    return frozenset(str(s["output_name"]) for s in sequence.get("state", []) if s.get("output_name"))
