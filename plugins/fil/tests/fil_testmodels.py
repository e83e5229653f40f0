"""Tiny tree models trained in the test run, written as Triton FIL model folders.

Data: 6 features, every 5th value of feature 1 missing (NaN). Tasks: a binary
classifier, a 3-class classifier and a regressor, per library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

FEATURES = 6
FILES = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}


def data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X (with NaNs), binary labels, 3-class labels, regression targets."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    x[::5, 1] = np.nan
    binary = (x[:, 0] + np.nan_to_num(x[:, 1]) > 0).astype(int)
    multi = (x[:, 0] > 0).astype(int) + (x[:, 2] > 0.5).astype(int)
    reg = (2 * x[:, 0] - x[:, 3] + rng.normal(scale=0.1, size=n)).astype(np.float32)
    return x, binary, multi, reg


def xgboost_models(trees: int = 8) -> dict[str, Any]:
    """Fitted XGBoost estimators (sklearn API): their predict / predict_proba are the reference."""
    import xgboost as xgb

    x, binary, multi, reg = data()
    kw: dict[str, Any] = {"n_estimators": trees, "max_depth": 3, "learning_rate": 0.3, "n_jobs": 1}
    return {
        "binary": xgb.XGBClassifier(**kw).fit(x, binary),
        "multi": xgb.XGBClassifier(**kw).fit(x, multi),
        "regression": xgb.XGBRegressor(**kw).fit(x, reg),
    }


def lightgbm_models(trees: int = 8) -> dict[str, Any]:
    """Fitted LightGBM estimators (sklearn API)."""
    import lightgbm as lgb

    x, binary, multi, reg = data()
    kw: dict[str, Any] = {"n_estimators": trees, "num_leaves": 7, "verbose": -1, "n_jobs": 1}
    return {
        "binary": lgb.LGBMClassifier(**kw).fit(x, binary),
        "multi": lgb.LGBMClassifier(**kw).fit(x, multi),
        "regression": lgb.LGBMRegressor(**kw).fit(x, reg),
    }


def booster(estimator: Any) -> Any:
    """The library's booster inside a fitted estimator."""
    return estimator.get_booster() if hasattr(estimator, "get_booster") else estimator.booster_


def params(**values: str) -> str:
    return "\n".join(
        f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in values.items()
    )


def write_model(
    root: Path,
    name: str,
    model_type: str,
    save: Any,
    *,
    config: str | None = None,
    **parameters: str,
) -> Path:
    """A model folder ``root/name`` with version 1; ``save(path)`` writes the model file.

    ``config`` replaces the generated config.pbtxt (which names only the backend and the
    parameters, leaving the rest to auto-complete).
    """
    folder = root / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    save(folder / "1" / FILES[model_type])
    text = (
        config if config is not None else f'backend: "fil"\n{params(model_type=model_type, **parameters)}\n'
    )
    (folder / "config.pbtxt").write_text(text)
    return folder


def write_xgboost_legacy_binary(booster: Any, path: Path) -> None:
    """Write ``booster`` (gbtree, one output, scalar base score) in XGBoost's legacy binary
    format, the one Triton's ``model_type: "xgboost"`` means, which XGBoost >= 3.1 can no
    longer write: built from the JSON model, the layout as Treelite's legacy loader reads it."""
    import json
    import struct

    learner = json.loads(booster.save_raw("json"))["learner"]
    param = learner["learner_model_param"]
    base_score = float(str(param["base_score"]).strip("[]").split(",")[0])
    num_feature = int(param["num_feature"])
    model = learner["gradient_booster"]["model"]
    trees = model["trees"]
    out = bytearray(b"binf")
    # LearnerModelParam: base_score, num_feature, num_class, extra attrs, eval metrics,
    # major and minor version, num_target, 26 reserved ints (136 bytes).
    out += struct.pack("<fIiiiIII", base_score, num_feature, 0, 0, 0, 1, 7, 1) + bytes(26 * 4)
    for name in (learner["objective"]["name"], "gbtree"):
        out += struct.pack("<Q", len(name)) + name.encode()
    # GBTreeModelParam: num_trees, num_roots, num_feature, pad, pad64, output groups, leaf vector, 32 pad.
    out += struct.pack("<iiiiqii", len(trees), 1, num_feature, 0, 0, 1, 0) + bytes(32 * 4)
    for tree in trees:
        n = len(tree["left_children"])
        # TreeParam: num_roots, num_nodes, num_deleted, max_depth, num_feature, size_leaf_vector, 31 reserved.
        out += struct.pack("<iiiiii", 1, n, 0, 0, num_feature, 0) + bytes(31 * 4)
        parent = {}
        for i in range(n):
            for child, left in ((tree["left_children"][i], True), (tree["right_children"][i], False)):
                if child != -1:
                    parent[child] = i | (1 << 31) if left else i
        for i in range(n):
            sindex = tree["split_indices"][i] | (int(tree["default_left"][i]) << 31)
            out += struct.pack(
                "<IiiIf",
                (parent.get(i, -1) if i else -1) & 0xFFFFFFFF,  # the left-child flag is the sign bit
                tree["left_children"][i],
                tree["right_children"][i],
                sindex,
                tree["split_conditions"][i],
            )
        for i in range(n):
            out += struct.pack(
                "<fffi", tree["loss_changes"][i], tree["sum_hessian"][i], tree["base_weights"][i], 0
            )
    out += struct.pack(f"<{len(trees)}i", *[int(t) for t in model["tree_info"]])
    path.write_bytes(bytes(out))
