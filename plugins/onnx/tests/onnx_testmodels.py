"""Small ONNX models for the onnxruntime backend's served tests, written into model folders."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

#: The accumulator's sequence batching: START and CORRID from the core, a running sum as state.
ACCUMULATOR_SEQUENCE = """
sequence_batching {
  max_sequence_idle_microseconds: 10000000
  control_input [
    { name: "START" control [{ kind: CONTROL_SEQUENCE_START fp32_false_true: [0, 1] }] },
    { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }
  ]
  state [{
    input_name: "SUM_IN" output_name: "SUM_OUT" data_type: TYPE_FP32 dims: [1]
    initial_state: { data_type: TYPE_FP32 dims: [1] zero_data: true name: "zero" }
  }]
}
"""


def accumulator(folder: Path, extra_config: str = "") -> Path:
    """A sequence model with implicit state: OUTPUT is the sum of the sequence's INPUTs so far
    (kept in SUM_IN/SUM_OUT); STARTED and ID echo the core's START and CORRID controls."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Add", ["INPUT", "SUM_IN"], ["OUTPUT"]),
        helper.make_node("Identity", ["OUTPUT"], ["SUM_OUT"]),
        helper.make_node("Identity", ["START"], ["STARTED"]),
        helper.make_node("Identity", ["CORRID"], ["ID"]),
    ]
    graph = helper.make_graph(
        nodes,
        "accumulator",
        [
            vi("INPUT", TensorProto.FLOAT, ["B", 1]),
            vi("SUM_IN", TensorProto.FLOAT, ["B", 1]),
            vi("START", TensorProto.FLOAT, ["B", 1]),
            vi("CORRID", TensorProto.UINT64, ["B", 1]),
        ],
        [
            vi("OUTPUT", TensorProto.FLOAT, ["B", 1]),
            vi("SUM_OUT", TensorProto.FLOAT, ["B", 1]),
            vi("STARTED", TensorProto.FLOAT, ["B", 1]),
            vi("ID", TensorProto.UINT64, ["B", 1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (folder / "1").mkdir(parents=True)
    onnx.save(model, folder / "1" / "model.onnx")
    (folder / "config.pbtxt").write_text(
        'backend: "onnxruntime"\nmax_batch_size: 4\n'
        'input [{ name: "INPUT" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [\n  { name: "OUTPUT" data_type: TYPE_FP32 dims: [1] },\n'
        '  { name: "STARTED" data_type: TYPE_FP32 dims: [1] },\n'
        '  { name: "ID" data_type: TYPE_UINT64 dims: [1] }\n]\n'
        f"{ACCUMULATOR_SEQUENCE}{extra_config}"
    )
    return folder


def add(folder: Path, config: str = "") -> Path:
    """SUM = A + B, FP32 ``[N, 3]`` (a batching graph), with ``config`` as config.pbtxt if given."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["SUM"])],
        "g",
        [vi("A", TensorProto.FLOAT, ["N", 3]), vi("B", TensorProto.FLOAT, ["N", 3])],
        [vi("SUM", TensorProto.FLOAT, ["N", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (folder / "1").mkdir(parents=True)
    onnx.save(model, folder / "1" / "model.onnx")
    if config:
        (folder / "config.pbtxt").write_text(config)
    return folder
