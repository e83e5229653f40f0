"""A Python-backend add/sub model (``addsub``: SUM and DIFF of two FP32 [2] inputs, batching)
and its request bodies, for the tests of the HTTP-based front ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "B").as_numpy()
            outputs = [pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("DIFF", a - b)]
            out.append(pb_utils.InferenceResponse(outputs))
        return out
"""


def addsub_repo(root: Path) -> Path:
    folder = root / "addsub"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(ADD_SUB)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "A" data_type: TYPE_FP32 dims: [2] },\n'
        '       { name: "B" data_type: TYPE_FP32 dims: [2] }]\n'
        'output [{ name: "SUM" data_type: TYPE_FP32 dims: [2] },\n'
        '        { name: "DIFF" data_type: TYPE_FP32 dims: [2] }]\n'
    )
    return root


def addsub_inputs(binary: bool) -> dict[str, Any]:
    if binary:
        sized = {"binary_data_size": 8}
        tensors = [{"name": n, "datatype": "FP32", "shape": [1, 2], "parameters": sized} for n in "AB"]
        return {"inputs": tensors, "outputs": [{"name": "SUM", "parameters": {"binary_data": True}}]}
    return {
        "inputs": [
            {"name": "A", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]},
            {"name": "B", "datatype": "FP32", "shape": [1, 2], "data": [10, 20]},
        ]
    }
