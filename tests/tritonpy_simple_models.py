"""Triton's example models that NVIDIA's client examples expect, built here.

``simple`` is ``examples/model_repository/simple``; ``simple_string``,
``simple_int8`` and ``simple_identity`` are ONNX builds with the names, tensors
and configs of Triton's (Triton's own are TensorFlow / custom-backend models);
``repeat_int32`` is a Python model that answers as Triton's ``repeat`` backend.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]


def _save(repo: Path, name: str, graph: onnx.GraphProto, config: str) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True)
    onnx.save(model, repo / name / "1" / "model.onnx")
    (repo / name / "config.pbtxt").write_text(config)


def simple(repo: Path) -> None:
    """Triton's ``simple``: INT32 [16] + and - (``examples/model_repository/simple``)."""
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")


def _add_sub(repo: Path, name: str, onnx_type: int, config_type: str) -> None:
    """INPUT0 + INPUT1 and INPUT0 - INPUT1 of ``onnx_type`` [16], computed in INT32
    (strings and INT8 are cast: ONNX's Add takes neither)."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Cast", ["INPUT0"], ["A"], to=TensorProto.INT32),
        helper.make_node("Cast", ["INPUT1"], ["B"], to=TensorProto.INT32),
        helper.make_node("Add", ["A", "B"], ["SUM"]),
        helper.make_node("Sub", ["A", "B"], ["DIFF"]),
        helper.make_node("Cast", ["SUM"], ["OUTPUT0"], to=onnx_type),
        helper.make_node("Cast", ["DIFF"], ["OUTPUT1"], to=onnx_type),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [vi(n, onnx_type, ["B", 16]) for n in ("INPUT0", "INPUT1")],
        [vi(n, onnx_type, ["B", 16]) for n in ("OUTPUT0", "OUTPUT1")],
    )
    tensors = ",\n".join(
        f'  {{ name: "{n}" data_type: {config_type} dims: [ 16 ] }}' for n in ("INPUT0", "INPUT1")
    )
    outputs = tensors.replace("INPUT", "OUTPUT")
    config = (
        f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
        f"input [\n{tensors}\n]\noutput [\n{outputs}\n]\n"
    )
    _save(repo, name, graph, config)


def simple_string(repo: Path) -> None:
    """Triton's ``simple_string``: strings of integers in, their sums and differences out."""
    _add_sub(repo, "simple_string", TensorProto.STRING, "TYPE_STRING")


def simple_int8(repo: Path) -> None:
    """Triton's ``simple_int8``: ``simple`` on INT8 tensors."""
    _add_sub(repo, "simple_int8", TensorProto.INT8, "TYPE_INT8")


def simple_identity(repo: Path) -> None:
    """Triton's ``simple_identity``: BYTES [-1] in, the same out (batching, 8)."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "simple_identity",
        [vi("INPUT0", TensorProto.STRING, ["B", "N"])],
        [vi("OUTPUT0", TensorProto.STRING, ["B", "N"])],
    )
    config = (
        'name: "simple_identity"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
    )
    _save(repo, "simple_identity", graph, config)


REPEAT = '''
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Triton's repeat backend: one response per element of IN (OUT = the element,
    IDX = its index), each after DELAY[i]; WAIT before the final flag. Triton waits
    milliseconds; this stand-in waits microseconds, so tests stay fast (the clients
    check the values only)."""

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()
            sender = request.get_response_sender()
            for index, value in enumerate(values):
                time.sleep(float(delays[index]) / 1e6)
                sender.send(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                            pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                        ]
                    )
                )
            time.sleep(float(wait[0]) / 1e6)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

REPEAT_CONFIG = """
name: "repeat_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def repeat_int32(repo: Path) -> None:
    """Triton's ``repeat_int32`` (decoupled), as a Python model."""
    (repo / "repeat_int32" / "1").mkdir(parents=True)
    (repo / "repeat_int32" / "1" / "model.py").write_text(REPEAT)
    (repo / "repeat_int32" / "config.pbtxt").write_text(REPEAT_CONFIG)
