"""Regenerate the ONNX files of ``examples/model_repository`` (needs ``onnx``).

    python examples/make_models.py

The models are tiny and deterministic so the repository can ship them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).parent / "model_repository"
OPSET = [helper.make_opsetid("", 13)]


def save(model: onnx.ModelProto, path: Path) -> None:
    model.ir_version = 8  # readable by every onnxruntime of the last years
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


def simple() -> onnx.ModelProto:
    """Triton's classic ``simple`` model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""
    shape = ["batch", 16]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    return helper.make_model(helper.make_graph(nodes, "simple", inputs, outputs), opset_imports=OPSET)


def iris_mlp() -> onnx.ModelProto:
    """A 4 → 8 → 3 classifier with fixed weights: PROBABILITIES = softmax(relu(xW1+b1)W2+b2)."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(4, 8)).astype(np.float32)
    b1 = rng.normal(size=(8,)).astype(np.float32)
    w2 = rng.normal(size=(8, 3)).astype(np.float32)
    b2 = rng.normal(size=(3,)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"))]
    nodes = [
        helper.make_node("MatMul", ["FEATURES", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "B1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "W2"], ["h3"]),
        helper.make_node("Add", ["h3", "B2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["PROBABILITIES"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "iris_mlp",
        [helper.make_tensor_value_info("FEATURES", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("PROBABILITIES", TensorProto.FLOAT, ["batch", 3])],
        inits,
    )
    return helper.make_model(graph, opset_imports=OPSET)


def string_identity() -> onnx.ModelProto:
    """TEXT_OUT = TEXT_IN for strings (BYTES tensors)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["TEXT_IN"], ["TEXT_OUT"])],
        "string_identity",
        [helper.make_tensor_value_info("TEXT_IN", TensorProto.STRING, ["batch", "length"])],
        [helper.make_tensor_value_info("TEXT_OUT", TensorProto.STRING, ["batch", "length"])],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def main() -> None:
    save(simple(), REPO / "simple" / "1" / "model.onnx")
    save(iris_mlp(), REPO / "iris_classifier" / "1" / "model.onnx")
    save(string_identity(), REPO / "string_identity" / "1" / "model.onnx")
    print(f"wrote models under {REPO}")


if __name__ == "__main__":
    main()
