"""A sequence model's extra tensors, bound as Triton's PyTorch backend binds them.

A model with ``sequence_batching`` gets its control inputs (START, END, READY,
CORRID) and its implicit state inputs from the core, beside the config's
inputs, and returns its next state as an output named ``state[].output_name``
(``tritonpy_sdk._sequence``). Triton's PyTorch backend passes each of them to
``forward()`` like any other input, with these rules:

- a control input must be named ``<name>__<index>``: the index is its
  position among ``forward()``'s arguments, whatever convention the config's
  inputs follow; a CORRID control must have a type torch has (not STRING);
- implicit state needs every config input and output named ``<name>__<index>``,
  and its own input and output names too: the state input is argument
  ``index``, the state output element ``index`` of ``forward()``'s result;
- ``forward()`` takes exactly the config's inputs, its batch inputs, its
  controls and its states.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import TritonError

from ._naming import named_index

#: Control kinds in the order Triton's backend checks them.
_KINDS = (
    "CONTROL_SEQUENCE_START",
    "CONTROL_SEQUENCE_END",
    "CONTROL_SEQUENCE_READY",
    "CONTROL_SEQUENCE_CORRID",
)
#: A boolean control's data type, by the field that holds its false/true values.
_BOOLEAN_TYPES = (
    ("int32_false_true", "TYPE_INT32"),
    ("fp32_false_true", "TYPE_FP32"),
    ("bool_false_true", "TYPE_BOOL"),
)


@dataclass(frozen=True, slots=True)
class SequenceTensor:
    """A control or state tensor: its name, config data type and (states) dims."""

    name: str
    data_type: str
    dims: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SequenceTensors:
    """What a sequence model exchanges with the core beyond its config's inputs and outputs."""

    controls: tuple[SequenceTensor, ...] = ()
    state_inputs: tuple[SequenceTensor, ...] = ()
    state_outputs: tuple[SequenceTensor, ...] = ()

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> SequenceTensors:
        sequence = config.get("sequence_batching")
        if not sequence:
            return cls()
        controls = []
        for kind in _KINDS:
            found = _control(sequence, kind)
            if found is not None:
                controls.append(found)
        states = sequence.get("state", [])
        return cls(
            tuple(controls),
            tuple(_state(s, "input_name") for s in states),
            tuple(_state(s, "output_name") for s in states),
        )

    @property
    def inputs(self) -> tuple[SequenceTensor, ...]:
        """Controls, then state inputs: every input the core adds."""
        return self.controls + self.state_inputs

    def control_indices(self) -> dict[str, int]:
        """Each control's argument index, from its ``<name>__<index>`` name (Triton's words
        for one that has none)."""
        bound: dict[str, int] = {}
        for control in self.controls:
            index = named_index(control.name)
            if index is None:
                raise TritonError.internal(
                    f"input '{control.name}' does not follow <name>__<index> naming convention."
                )
            bound[control.name] = index
        return bound

    def check_control_types(self, torch_types: Container[str]) -> None:
        """Every control's type is one torch has (``torch_types``): only a CORRID, the
        last control Triton checks, can fail, so after ``control_indices`` the order of
        Triton's checks holds."""
        for control in self.controls:
            if control.data_type not in torch_types:
                raise TritonError.internal(
                    f"input '{control.name}' type '{control.data_type}' is not supported by PyTorch."
                )

    def check_states(self, model_name: str, inputs_indexed: bool, outputs_indexed: bool) -> None:
        """Triton's rule for implicit state: every config input and output, and every state
        name, follows ``<name>__<index>``."""
        if not self.state_inputs:
            return
        for indexed, states in ((inputs_indexed, self.state_inputs), (outputs_indexed, self.state_outputs)):
            if not indexed:
                raise TritonError.invalid_arg(
                    f"PyTorch model '{model_name}' is using sequence batching with state but not all "
                    "inputs and outputs follow the <name>__<index> naming convention. "
                )
            for state in states:
                if named_index(state.name) is None:
                    raise TritonError.invalid_arg(
                        f"PyTorch model '{model_name}' is using sequence batching with state but state "
                        f"'{state.name}' does not follow the <name>__<index> naming convention. "
                    )

    def state_input_indices(self) -> dict[str, int]:
        return {s.name: int(named_index(s.name) or 0) for s in self.state_inputs}

    def state_output_indices(self, config_outputs: Sequence[str]) -> dict[str, int]:
        """State outputs' result indices, those the config lists as outputs left out (bound with them)."""
        return {
            s.name: int(named_index(s.name) or 0) for s in self.state_outputs if s.name not in config_outputs
        }


def _control(sequence: Mapping[str, Any], kind: str) -> SequenceTensor | None:
    for entry in sequence.get("control_input", []):
        for control in entry.get("control", []):
            if control.get("kind", "CONTROL_SEQUENCE_START") != kind:
                continue
            name = str(entry.get("name", ""))
            if kind == "CONTROL_SEQUENCE_CORRID":
                return SequenceTensor(name, str(control.get("data_type", "TYPE_INVALID")))
            for field, data_type in _BOOLEAN_TYPES:
                if control.get(field):
                    return SequenceTensor(name, data_type)
            return SequenceTensor(name, "TYPE_INVALID")
    return None


def _state(state: Mapping[str, Any], key: str) -> SequenceTensor:
    dims = tuple(int(d) for d in state.get("dims", []))
    return SequenceTensor(str(state.get(key, "")), str(state.get("data_type", "TYPE_INVALID")), dims)
