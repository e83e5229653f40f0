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
