"""Regenerate the ONNX files of ``examples/model_repository`` (needs ``onnx``).

    python examples/make_models.py

The models are tiny and deterministic so the repository can ship them. The
iris classifier's weights come from ``train_iris.py`` (scikit-learn).
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


#: The iris classifier's weights, as ``train_iris.py`` prints them: a logistic
#: regression fitted on scikit-learn's iris data set (97% of the 150 flowers right).
#: Rows: sepal length, sepal width, petal length, petal width (cm); columns:
#: setosa, versicolor, virginica (``labels.txt``).
IRIS_WEIGHTS = [
    [-0.4235, 0.5345, -0.111],
    [0.9673, -0.3216, -0.6458],
    [-2.5172, -0.2064, 2.7235],
    [-1.0793, -0.9443, 2.0236],
]
IRIS_BIAS = [9.8495, 2.2372, -12.0868]


def iris_classifier() -> onnx.ModelProto:
    """The trained iris classifier: PROBABILITIES = softmax(FEATURES @ W + B)."""
    w = np.array(IRIS_WEIGHTS, dtype=np.float32)
    b = np.array(IRIS_BIAS, dtype=np.float32)
    nodes = [
        helper.make_node("MatMul", ["FEATURES", "W"], ["scores"]),
        helper.make_node("Add", ["scores", "B"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["PROBABILITIES"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "iris_classifier",
        [helper.make_tensor_value_info("FEATURES", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("PROBABILITIES", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
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
    save(iris_classifier(), REPO / "iris_classifier" / "1" / "model.onnx")
    save(string_identity(), REPO / "string_identity" / "1" / "model.onnx")
    print(f"wrote models under {REPO}")


if __name__ == "__main__":
    main()
