"""Triton's example sequence models, built as tiny ONNX graphs, for tests.

What NVIDIA's sequence clients (``simple_*_sequence_*_client.py``) expect of them:

- ``simple_sequence``: OUTPUT = INPUT + START (START is 1 on a sequence's first
  request); no CORRID control, so any correlation id (uint64 or string) works.
- ``simple_dyna_sequence``: OUTPUT = INPUT + START, plus the correlation id (UINT64
  CORRID control) on the END request.
- ``simple_string_dyna_sequence``: a running sum of INPUT kept as implicit state
  (START restarts it), plus the correlation id (a STRING CORRID of digits) on the END
  request.
- ``accumulate_state``: OUTPUT = INPUT + STATE, STATE_OUT = OUTPUT, the state in
  Triton's implicit state (``initial_state`` optional).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

vi = helper.make_tensor_value_info
INT32 = TensorProto.INT32


def _save(
    folder: Path, config: str, nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: Any = ()
) -> Path:
    graph = helper.make_graph(nodes, folder.name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (folder / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / "1" / "model.onnx")
    (folder / "config.pbtxt").write_text(config)
    return folder


def _controls(*entries: str) -> str:
    return "control_input [\n" + ",\n".join(entries) + "\n]"


START = '{ name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'
END = '{ name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }'
READY = '{ name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }'


def _corrid(dtype: str) -> str:
    return f'{{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {dtype} }} ] }}'


def _config(name: str, max_batch: int, sequence: str, instances: int = 1) -> str:
    return f"""
name: "{name}"
backend: "onnxruntime"
max_batch_size: {max_batch}
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
sequence_batching {{
{sequence}
}}
"""


def simple_sequence(repo: Path, instances: int = 1) -> Path:
    return _save(
        repo / "simple_sequence",
        _config("simple_sequence", 8, "direct { }\n" + _controls(START, READY), instances),
        [
            helper.make_node("Add", ["INPUT", "START"], ["SUM"]),
            helper.make_node("Mul", ["SUM", "READY"], ["OUTPUT"]),
        ],
        [vi(n, INT32, ["B", 1]) for n in ("INPUT", "START", "READY")],
        [vi("OUTPUT", INT32, ["B", 1])],
    )


def simple_dyna_sequence(repo: Path, instances: int = 1) -> Path:
    return _save(
        repo / "simple_dyna_sequence",
        _config(
            "simple_dyna_sequence",
            8,
            "oldest { max_candidate_sequences: 4 }\n" + _controls(START, END, READY, _corrid("TYPE_UINT64")),
            instances,
        ),
        [
            helper.make_node("Add", ["INPUT", "START"], ["SUM"]),
            helper.make_node("Cast", ["CORRID"], ["ID"], to=INT32),
            helper.make_node("Mul", ["ID", "END"], ["AT_END"]),
            helper.make_node("Add", ["SUM", "AT_END"], ["OUTPUT"]),
        ],
        [vi(n, INT32, ["B", 1]) for n in ("INPUT", "START", "END", "READY")]
        + [vi("CORRID", TensorProto.UINT64, ["B", 1])],
        [vi("OUTPUT", INT32, ["B", 1])],
    )


_STATE = """state [ {
  input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]%s
} ]"""


def simple_string_dyna_sequence(repo: Path) -> Path:
    # One slot: a string CORRID of digits is cast to a number, which an empty slot's
    # null request (CORRID "") could not be.
    return _save(
        repo / "simple_string_dyna_sequence",
        _config(
            "simple_string_dyna_sequence",
            1,
            "direct { }\n" + _controls(START, END, READY, _corrid("TYPE_STRING")) + "\n" + _STATE % "",
        ),
        [
            helper.make_node("Sub", ["ONE", "START"], ["KEEP"]),
            helper.make_node("Mul", ["STATE", "KEEP"], ["CARRIED"]),
            helper.make_node("Add", ["INPUT", "CARRIED"], ["STATE_OUT"]),
            helper.make_node("Cast", ["CORRID"], ["ID"], to=INT32),
            helper.make_node("Mul", ["ID", "END"], ["AT_END"]),
            helper.make_node("Add", ["STATE_OUT", "AT_END"], ["OUTPUT"]),
        ],
        [vi(n, INT32, ["B", 1]) for n in ("INPUT", "START", "END", "READY", "STATE")]
        + [vi("CORRID", TensorProto.STRING, ["B", 1])],
        [vi("OUTPUT", INT32, ["B", 1]), vi("STATE_OUT", INT32, ["B", 1])],
        [helper.make_tensor("ONE", INT32, [], [1])],
    )


def accumulate_state(
    repo: Path,
    name: str = "accumulate_state",
    strategy: str = "direct { }",
    initial: str = "",
    instances: int = 2,
) -> Path:
    """OUTPUT = INPUT + STATE (implicit state, no control inputs at all)."""
    return _save(
        repo / name,
        _config(name, 4, strategy + "\n" + _STATE % initial, instances),
        [
            helper.make_node("Add", ["INPUT", "STATE"], ["OUTPUT"]),
            helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"]),
        ],
        [vi("INPUT", INT32, ["B", 1]), vi("STATE", INT32, ["B", 1])],
        [vi("OUTPUT", INT32, ["B", 1]), vi("STATE_OUT", INT32, ["B", 1])],
    )


def sequence_repository(repo: Path) -> Path:
    """The three models NVIDIA's sequence clients use."""
    simple_sequence(repo)
    simple_dyna_sequence(repo)
    simple_string_dyna_sequence(repo)
    return repo
