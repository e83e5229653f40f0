"""Train the iris_classifier of ``examples/model_repository`` (needs scikit-learn).

    python examples/train_iris.py

Fits a multinomial logistic regression on the iris data set that scikit-learn
ships (150 flowers, no download) and prints its weights, rounded, in the form
``make_models.py`` keeps them. The weights are kept there as numbers, so that
regenerating the ONNX files needs only ``onnx`` and gives the same bytes on any
machine; rerun this after changing the training and paste its output there.
"""

from __future__ import annotations

import numpy as np

#: Rounding of the published weights: far below what changes a prediction.
DECIMALS = 4


def train() -> tuple[np.ndarray, np.ndarray, float]:
    """``(weights [4, 3], bias [3], accuracy on the data set)`` of the fitted model.

    ``PROBABILITIES = softmax(FEATURES @ weights + bias)``, features in cm
    (sepal length, sepal width, petal length, petal width), classes in the
    order of ``labels.txt`` (setosa, versicolor, virginica).
    """
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    features, labels = load_iris(return_X_y=True)
    # A tight tolerance: the optimum is unique, so any machine lands on it.
    model = LogisticRegression(max_iter=5000, tol=1e-8).fit(features, labels)
    weights = np.round(model.coef_.T, DECIMALS)
    bias = np.round(model.intercept_, DECIMALS)
    return weights, bias, float(model.score(features, labels))


def main() -> None:
    weights, bias, accuracy = train()
    print(f"# accuracy on the 150 iris flowers: {accuracy:.3f}")
    print("IRIS_WEIGHTS = [")
    for row in weights.tolist():
        print(f"    {row},")
    print("]")
    print(f"IRIS_BIAS = {bias.tolist()}")


if __name__ == "__main__":
    main()
