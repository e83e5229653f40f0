"""The FIL backend without a server (tritonpy_sdk.testing), against the libraries' own
predict / predict_proba / pred_contribs on tiny models trained here."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pytest
import treelite
import treelite.sklearn
import tritonpy_backend_fil as backend
import xgboost as xgb
from fil_testmodels import (
    FEATURES,
    booster,
    data,
    lightgbm_models,
    params,
    write_model,
    write_xgboost_legacy_binary,
    xgboost_models,
)
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from tritonpy_backend_fil import _forest
from tritonpy_backend_fil._params import Options
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_sdk.host import validate_backend
from tritonpy_sdk.testing import BackendHarness

XGB_TYPES = ("xgboost", "xgboost_json", "xgboost_ubj")
X = data(60, seed=1)[0]


@pytest.fixture(scope="module")
def xgb_models() -> dict[str, Any]:
    return xgboost_models()


@pytest.fixture(scope="module")
def lgb_models() -> dict[str, Any]:
    return lightgbm_models()


def _save_xgb(estimator: Any, model_type: str) -> Any:
    # Each format by its own extension; "xgboost.model" is what XGBoost >= 2 writes there (UBJSON).
    def save(path: Path) -> None:
        if model_type == "xgboost":
            booster(estimator).save_model(str(path.with_suffix(".ubj")))
            path.with_suffix(".ubj").rename(path)
        else:
            booster(estimator).save_model(str(path))

    return save


def _save_lgb(estimator: Any) -> Any:
    return lambda path: booster(estimator).save_model(str(path))


def _harness(folder: Path) -> BackendHarness:
    return BackendHarness(backend, folder, backend_name="fil")


def _infer(
    folder: Path, x: np.ndarray = X, outputs: tuple[str, ...] = ("output__0",)
) -> dict[str, np.ndarray]:
    with _harness(folder) as h:
        got = h.infer({"input__0": x})
    return {n: got[n] for n in outputs}


def test_backend_info_and_hooks() -> None:
    hooks = validate_backend("fil", backend)
    assert hooks.info.default_model_filename == ""
    assert hooks.has_auto_complete


@pytest.mark.parametrize("model_type", XGB_TYPES)
def test_xgboost_formats_match_predict_and_predict_proba(
    tmp_path: Path, xgb_models: dict[str, Any], model_type: str
) -> None:
    binary, multi, reg = xgb_models["binary"], xgb_models["multi"], xgb_models["regression"]
    cls = write_model(tmp_path, "cls", model_type, _save_xgb(binary, model_type), is_classifier="true")
    np.testing.assert_array_equal(_infer(cls)["output__0"].ravel(), binary.predict(X))
    proba = write_model(
        tmp_path,
        "proba",
        model_type,
        _save_xgb(binary, model_type),
        is_classifier="true",
        predict_proba="true",
    )
    np.testing.assert_allclose(_infer(proba)["output__0"], binary.predict_proba(X), rtol=1e-6, atol=1e-6)
    mcls = write_model(tmp_path, "mcls", model_type, _save_xgb(multi, model_type), is_classifier="true")
    np.testing.assert_array_equal(_infer(mcls)["output__0"].ravel(), multi.predict(X))
    mproba = write_model(
        tmp_path,
        "mproba",
        model_type,
        _save_xgb(multi, model_type),
        is_classifier="true",
        predict_proba="true",
    )
    np.testing.assert_allclose(_infer(mproba)["output__0"], multi.predict_proba(X), rtol=1e-6, atol=1e-6)
    regr = write_model(tmp_path, "reg", model_type, _save_xgb(reg, model_type), is_classifier="false")
    np.testing.assert_allclose(_infer(regr)["output__0"].ravel(), reg.predict(X), rtol=1e-6, atol=1e-6)


def test_lightgbm_matches_predict_and_predict_proba(tmp_path: Path, lgb_models: dict[str, Any]) -> None:
    binary, multi, reg = lgb_models["binary"], lgb_models["multi"], lgb_models["regression"]
    cls = write_model(tmp_path, "cls", "lightgbm", _save_lgb(binary), is_classifier="true")
    np.testing.assert_array_equal(_infer(cls)["output__0"].ravel(), binary.predict(X))
    proba = write_model(
        tmp_path, "proba", "lightgbm", _save_lgb(binary), is_classifier="true", predict_proba="true"
    )
    np.testing.assert_allclose(_infer(proba)["output__0"], binary.predict_proba(X), rtol=1e-5, atol=1e-6)
    mcls = write_model(tmp_path, "mcls", "lightgbm", _save_lgb(multi), is_classifier="true")
    np.testing.assert_array_equal(_infer(mcls)["output__0"].ravel(), multi.predict(X))
    mproba = write_model(
        tmp_path, "mproba", "lightgbm", _save_lgb(multi), is_classifier="true", predict_proba="true"
    )
    np.testing.assert_allclose(_infer(mproba)["output__0"], multi.predict_proba(X), rtol=1e-5, atol=1e-6)
    regr = write_model(tmp_path, "reg", "lightgbm", _save_lgb(reg), is_classifier="false")
    np.testing.assert_allclose(_infer(regr)["output__0"].ravel(), reg.predict(X), rtol=1e-5, atol=1e-5)


def test_lightgbm_one_row_takes_the_single_row_api_with_predicts_results(
    tmp_path: Path, lgb_models: dict[str, Any]
) -> None:
    # One row goes through LightGBM's single-row C API (its setup made once per
    # instance), a batch through Booster.predict: the same numbers, bit for bit.
    for name in ("binary", "multi", "regression"):
        path = tmp_path / f"{name}.txt"
        booster(lgb_models[name]).save_model(str(path))
        options = Options.parse({"model_type": "lightgbm", "is_classifier": "false"}, "m")
        forest = _forest.LightGBMForest(lgb, path, options)
        assert forest._row is not None
        reference = lgb.Booster(model_file=str(path))
        for i in range(12):  # rows with and without missing values
            row = X[i : i + 1]
            want = np.asarray(reference.predict(row), dtype=np.float32).reshape(1, -1)
            np.testing.assert_array_equal(forest.predict(row), want)
        batch = forest.predict(X[:12])
        want = np.asarray(reference.predict(X[:12]), dtype=np.float32).reshape(12, -1)
        np.testing.assert_array_equal(batch, want)
    # Served, one row per request: FIL's outputs from those numbers.
    binary = lgb_models["binary"]
    proba = write_model(
        tmp_path, "proba", "lightgbm", _save_lgb(binary), is_classifier="true", predict_proba="true"
    )
    with _harness(proba) as h:
        for i in range(6):
            got = h.infer({"input__0": X[i : i + 1]})["output__0"]
            np.testing.assert_allclose(got, binary.predict_proba(X[i : i + 1]), rtol=1e-5, atol=1e-6)


def test_lightgbm_without_the_single_row_api_predicts_every_batch(
    tmp_path: Path, lgb_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritonpy_backend_fil import _lgb_row

    def unavailable(*args: Any) -> None:
        raise AttributeError("no LGBM_BoosterPredictForMatSingleRowFastInit")

    monkeypatch.setattr(_lgb_row.SingleRow, "__init__", unavailable)
    path = tmp_path / "m.txt"
    booster(lgb_models["binary"]).save_model(str(path))
    options = Options.parse({"model_type": "lightgbm", "is_classifier": "false"}, "m")
    forest = _forest.LightGBMForest(lgb, path, options)
    assert forest._row is None
    want = np.asarray(lgb.Booster(model_file=str(path)).predict(X[:1]), dtype=np.float32).reshape(1, -1)
    np.testing.assert_array_equal(forest.predict(X[:1]), want)


def test_threshold_applies_to_binary_classifiers(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    binary = xgb_models["binary"]
    folder = write_model(
        tmp_path,
        "t",
        "xgboost_json",
        _save_xgb(binary, "xgboost_json"),
        is_classifier="true",
        threshold="0.3",
    )
    p = binary.predict_proba(X)[:, 1]
    np.testing.assert_array_equal(_infer(folder)["output__0"].ravel(), (p > 0.3).astype(np.float32))


def test_treeshap_output_matches_pred_contribs(
    tmp_path: Path, xgb_models: dict[str, Any], lgb_models: dict[str, Any]
) -> None:
    for name in ("binary", "multi", "regression"):
        est = xgb_models[name]
        classes = 3 if name == "multi" else 1
        width = classes * (FEATURES + 1)
        config = (
            'backend: "fil"\nmax_batch_size: 64\n'
            f'input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]\n'
            'output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] },\n'
            f'  {{ name: "treeshap_output" data_type: TYPE_FP32 dims: [ {width} ] }} ]\n'
            + params(model_type="xgboost_ubj", is_classifier="true" if name != "regression" else "false")
        )
        folder = write_model(
            tmp_path, f"x{name}", "xgboost_ubj", _save_xgb(est, "xgboost_ubj"), config=config
        )
        got = _infer(folder, outputs=("treeshap_output",))["treeshap_output"]
        want = booster(est).predict(xgb.DMatrix(X), pred_contribs=True).reshape(len(X), -1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        lest = lgb_models[name]
        lconfig = config.replace("xgboost_ubj", "lightgbm")
        lfolder = write_model(tmp_path, f"l{name}", "lightgbm", _save_lgb(lest), config=lconfig)
        lgot = _infer(lfolder, outputs=("treeshap_output",))["treeshap_output"]
        np.testing.assert_allclose(lgot, lest.predict(X, pred_contrib=True), rtol=1e-5, atol=1e-5)


def test_treelite_checkpoints_from_xgboost_and_sklearn(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    multi = xgb_models["multi"]
    ckpt = write_model(
        tmp_path,
        "tlx",
        "treelite_checkpoint",
        lambda p: treelite.frontend.from_xgboost(booster(multi)).serialize(str(p)),
        is_classifier="true",
        predict_proba="true",
    )
    np.testing.assert_allclose(_infer(ckpt)["output__0"], multi.predict_proba(X), rtol=1e-5, atol=1e-6)
    # scikit-learn forests: the one-line conversion docs/fil_backend.md gives.
    x, _, y3, reg = data()
    x, xt = np.nan_to_num(x), np.nan_to_num(X)
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(x, y3)
    folder = write_model(
        tmp_path,
        "rf",
        "treelite_checkpoint",
        lambda p: treelite.sklearn.import_model(rf).serialize(str(p)),
        is_classifier="true",
        predict_proba="true",
    )
    np.testing.assert_allclose(_infer(folder, xt)["output__0"], rf.predict_proba(xt), rtol=1e-5, atol=1e-6)
    cls = write_model(
        tmp_path,
        "rfc",
        "treelite_checkpoint",
        lambda p: treelite.sklearn.import_model(rf).serialize(str(p)),
        is_classifier="true",
    )
    np.testing.assert_array_equal(_infer(cls, xt)["output__0"].ravel(), rf.predict(xt))
    rfr = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(x, reg)
    rfolder = write_model(
        tmp_path,
        "rfr",
        "treelite_checkpoint",
        lambda p: treelite.sklearn.import_model(rfr).serialize(str(p)),
        is_classifier="false",
    )
    np.testing.assert_allclose(
        _infer(rfolder, xt)["output__0"].ravel(), rfr.predict(xt), rtol=1e-5, atol=1e-5
    )


def test_auto_complete_fills_io_and_batch_size(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    folder = write_model(
        tmp_path,
        "m",
        "xgboost_json",
        _save_xgb(xgb_models["multi"], "xgboost_json"),
        is_classifier="true",
        predict_proba="true",
    )
    with _harness(folder) as h:
        config = h.model.config
    assert config["max_batch_size"] == 32768
    # (the server's full form: every field, defaults included)
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("input__0", "TYPE_FP32", [FEATURES])
    ]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
        ("output__0", "TYPE_FP32", [3])
    ]


def test_batched_requests_are_one_call(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    multi = xgb_models["multi"]
    folder = write_model(tmp_path, "m", "xgboost_ubj", _save_xgb(multi, "xgboost_ubj"), is_classifier="true")
    with _harness(folder) as h:
        responses = h.execute([h.request({"input__0": X[:3]}), h.request({"input__0": X[3:4]})])
    assert [r.outputs["output__0"].data.shape for r in responses] == [(3, 1), (1, 1)]
    got = np.concatenate([r.outputs["output__0"].data for r in responses]).ravel()
    np.testing.assert_array_equal(got, multi.predict(X[:4]))


def test_output_class_is_read_with_a_warning_and_wins(
    tmp_path: Path, xgb_models: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    binary = xgb_models["binary"]
    folder = write_model(
        tmp_path,
        "old",
        "xgboost_json",
        _save_xgb(binary, "xgboost_json"),
        output_class="false",
        is_classifier="true",
    )
    with caplog.at_level(logging.WARNING):
        got = _infer(folder)["output__0"].ravel()
    np.testing.assert_allclose(got, binary.predict_proba(X)[:, 1], rtol=1e-6)  # a regressor's raw value
    assert "`output_class` parameter has been removed in the 25.09 release" in caplog.text
    assert "Use `is_classifier` instead" in caplog.text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"model_type": "onnx", "is_classifier": "true"}, 'unknown model_type "onnx"'),
        ({"model_type": "xgboost"}, "Required parameter is_classifier not found in config"),
        ({"is_classifier": "yes"}, 'parameter \'is_classifier\' must be "true" or "false"'),
        ({"is_classifier": "true", "predict_proba": "1"}, '\'predict_proba\' must be "true" or "false"'),
        ({"is_classifier": "true", "threshold": "high"}, "parameter 'threshold' must be a number"),
        ({"is_classifier": "true", "cpu_nthread": "many"}, "parameter 'cpu_nthread' must be an integer"),
        ({"is_classifier": "true", "layout": "diagonal"}, "'layout' must be one of depth_first"),
        ({"is_classifier": "true", "chunk_size": "3"}, "'chunk_size' must be a power of 2 from 1 to 32"),
        ({"is_classifier": "true", "storage_type": "TINY"}, "'storage_type' must be one of AUTO"),
        ({"is_classifier": "true", "algo": "FAST"}, "'algo' must be one of ALGO_AUTO"),
        ({"is_classifier": "true", "transfer_threshold": "-1"}, "'transfer_threshold' must be >= 0"),
    ],
)
def test_invalid_parameters_are_refused(values: dict[str, str], message: str) -> None:
    with pytest.raises(TritonError) as info:
        Options.parse(values, "m")
    assert info.value.code == ErrorCode.INVALID_ARG
    assert message in str(info.value)


def test_gpu_only_parameters_are_accepted(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    binary = xgb_models["binary"]
    folder = write_model(
        tmp_path,
        "gpu",
        "xgboost_json",
        _save_xgb(binary, "xgboost_json"),
        is_classifier="true",
        layout="breadth_first",
        chunk_size="8",
        transfer_threshold="2",
        use_experimental_optimizations="true",
        cpu_nthread="1",
    )
    np.testing.assert_array_equal(_infer(folder)["output__0"].ravel(), binary.predict(X))


def _load_error(folder: Path) -> TritonError:
    with pytest.raises(TritonError) as info:
        _harness(folder).start()
    return info.value


def test_load_errors(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    binary = xgb_models["binary"]
    missing = tmp_path / "missing"
    (missing / "1").mkdir(parents=True)
    (missing / "config.pbtxt").write_text(
        'backend: "fil"\n' + params(model_type="lightgbm", is_classifier="true")
    )
    err = _load_error(missing)
    assert err.code == ErrorCode.UNAVAILABLE and "model.txt" in str(err)
    bad = write_model(
        tmp_path, "bad", "xgboost_json", lambda p: p.write_text("{not json"), is_classifier="true"
    )
    err = _load_error(bad)
    assert err.code == ErrorCode.INVALID_ARG and "xgboost.json is not a valid xgboost_json model" in str(err)
    wrong = (
        'backend: "fil"\nmax_batch_size: 8\n'
        'input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        + params(model_type="xgboost_json", is_classifier="true")
    )
    folder = write_model(tmp_path, "wrong", "xgboost_json", _save_xgb(binary, "xgboost_json"), config=wrong)
    assert f"the model has {FEATURES} features" in str(_load_error(folder))
    proba = wrong.replace("dims: [ 4 ]", f"dims: [ {FEATURES} ]") + "\n" + params(predict_proba="true")
    folder = write_model(
        tmp_path, "width", "xgboost_json", _save_xgb(xgb_models["multi"], "xgboost_json"), config=proba
    )
    err = _load_error(folder)
    assert err.code == ErrorCode.INVALID_ARG
    assert "output 'output__0' has dims [1], but it holds probabilities per class (predict_proba)" in str(err)
    assert "dims: [ 3 ]" in str(err)
    extra = wrong.replace("dims: [ 4 ]", f"dims: [ {FEATURES} ]").replace(
        "output [", 'output [ { name: "leaf_ids" data_type: TYPE_FP32 dims: [ 1 ] },'
    )
    folder = write_model(tmp_path, "extra", "xgboost_json", _save_xgb(binary, "xgboost_json"), config=extra)
    assert "outputs are 'output__0' and optionally 'treeshap_output'" in str(_load_error(folder))


def test_missing_library_names_the_extra(
    tmp_path: Path, xgb_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_model(
        tmp_path,
        "m",
        "lightgbm",
        lambda p: booster(lightgbm_models(2)["binary"]).save_model(str(p)),
        is_classifier="true",
    )
    monkeypatch.setattr(_forest, "_import", lambda name: None)
    err = _load_error(folder)
    assert err.code == ErrorCode.UNAVAILABLE
    assert "pip install 'tritonpy-backend-fil[lightgbm]'" in str(err)
    assert "pip install 'tritonpy-backend-fil[treelite]'" in str(err)


def test_treelite_serves_when_the_library_is_missing(
    tmp_path: Path, lgb_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    multi = lgb_models["multi"]
    folder = write_model(
        tmp_path, "m", "lightgbm", _save_lgb(multi), is_classifier="true", predict_proba="true"
    )
    real = _forest._import
    monkeypatch.setattr(_forest, "_import", lambda name: None if name == "lightgbm" else real(name))
    with _harness(folder) as h:
        assert h.instance.state.forest.library == "treelite"
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_allclose(got, multi.predict_proba(X), rtol=1e-5, atol=1e-6)
    assert lgb.__version__  # the library is installed; only the backend was made to miss it


def test_multi_softmax_gives_probabilities_on_both_paths(tmp_path: Path) -> None:
    # multi:softmax predicts class indices in XGBoost; FIL gives the softmax of the margins.
    x, _, multi, _ = data()
    model = xgb.train(
        {"objective": "multi:softmax", "num_class": 3, "max_depth": 3}, xgb.DMatrix(x, multi), 6
    )
    margin = model.predict(xgb.DMatrix(X), output_margin=True)
    want = np.exp(margin) / np.exp(margin).sum(axis=1, keepdims=True)
    folder = write_model(
        tmp_path,
        "sm",
        "xgboost_json",
        lambda p: model.save_model(str(p)),
        is_classifier="true",
        predict_proba="true",
    )
    with _harness(folder) as h:
        assert h.instance.state.forest._small is not None  # Treelite serves small batches
        small = h.infer({"input__0": X[: _forest.SMALL_BATCH]})["output__0"]
        large = h.infer({"input__0": X})["output__0"]
    np.testing.assert_allclose(small, want[: _forest.SMALL_BATCH], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(large, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(large.argmax(axis=1), model.predict(xgb.DMatrix(X)))


def _xgb_has_cuda() -> bool:
    return bool(xgb.build_info().get("USE_CUDA"))


def test_kind_gpu_without_a_cuda_xgboost_runs_on_the_cpu(
    tmp_path: Path, xgb_models: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    if _xgb_has_cuda():
        pytest.skip("this XGBoost has CUDA support")
    binary = xgb_models["binary"]
    folder = write_model(
        tmp_path, "g", "xgboost_json", _save_xgb(binary, "xgboost_json"), is_classifier="true"
    )
    with (
        caplog.at_level(logging.WARNING),
        BackendHarness(backend, folder, backend_name="fil", instance_kind="KIND_GPU") as h,
    ):
        assert not h.instance.state.forest._gpu
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_array_equal(got.ravel(), binary.predict(X))
    assert "install the full build (pip install xgboost) instead of xgboost-cpu" in caplog.text


def test_kind_gpu_lightgbm_runs_on_the_cpu_with_a_warning(
    tmp_path: Path, lgb_models: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    multi = lgb_models["multi"]
    folder = write_model(tmp_path, "g", "lightgbm", _save_lgb(multi), is_classifier="true")
    with (
        caplog.at_level(logging.WARNING),
        BackendHarness(backend, folder, backend_name="fil", instance_kind="KIND_GPU") as h,
    ):
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_array_equal(got.ravel(), multi.predict(X))
    assert "lightgbm models run on the CPU here" in caplog.text


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core sees one GPU, as on a GPU host (this host has none)."""
    import tritonpy.devices

    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)


def test_on_a_gpu_host_a_model_with_no_gpu_path_defaults_to_the_cpu(
    tmp_path: Path, lgb_models: dict[str, Any], one_gpu: None, caplog: pytest.LogCaptureFixture
) -> None:
    """No instance_group: KIND_GPU only where this model has a GPU path (XGBoost with CUDA)."""
    folder = write_model(tmp_path, "g", "lightgbm", _save_lgb(lgb_models["multi"]), is_classifier="true")
    with caplog.at_level(logging.INFO, logger="tritonpy.config"), _harness(folder) as h:
        groups = h.model.config["instance_group"]
    assert [(g["kind"], g["gpus"]) for g in groups] == [("KIND_CPU", [])]
    assert "instance group 'g' defaults to KIND_CPU: lightgbm models run on the CPU here" in caplog.text


def test_on_a_gpu_host_xgboost_without_cuda_defaults_to_the_cpu(
    tmp_path: Path, xgb_models: dict[str, Any], one_gpu: None, caplog: pytest.LogCaptureFixture
) -> None:
    if _xgb_has_cuda():
        pytest.skip("this XGBoost has CUDA support")
    binary = xgb_models["binary"]
    folder = write_model(
        tmp_path, "g", "xgboost_json", _save_xgb(binary, "xgboost_json"), is_classifier="true"
    )
    with caplog.at_level(logging.INFO, logger="tritonpy.config"), _harness(folder) as h:
        assert [g["kind"] for g in h.model.config["instance_group"]] == ["KIND_CPU"]
    assert f"defaults to KIND_CPU: this XGBoost ({xgb.__version__}) has no CUDA support" in caplog.text


def test_on_a_gpu_host_an_explicit_kind_gpu_group_still_loads(
    tmp_path: Path, lgb_models: dict[str, Any], one_gpu: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Triton's FIL runs every model on a GPU, so its repositories say KIND_GPU: such a model
    loads here too and runs on the CPU, with a warning (GpuSupport.kind_gpu_runs_on_cpu)."""
    multi = lgb_models["multi"]
    text = f'backend: "fil"\n{params(model_type="lightgbm", is_classifier="true")}\n'
    text += "instance_group [ { kind: KIND_GPU } ]\n"
    folder = write_model(tmp_path, "g", "lightgbm", _save_lgb(multi), config=text)
    with (
        caplog.at_level(logging.WARNING),
        BackendHarness(backend, folder, backend_name="fil", instance_kind="KIND_GPU") as h,
    ):
        assert [(g["kind"], g["gpus"]) for g in h.model.config["instance_group"]] == [("KIND_GPU", [0])]
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_array_equal(got.ravel(), multi.predict(X))
    assert "lightgbm models run on the CPU here" in caplog.text


@pytest.mark.gpu
def test_kind_gpu_runs_xgboost_cuda_predictor(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    if not _xgb_has_cuda():
        pytest.skip("this XGBoost has no CUDA support (xgboost-cpu)")
    multi = xgb_models["multi"]
    folder = write_model(
        tmp_path,
        "g",
        "xgboost_ubj",
        _save_xgb(multi, "xgboost_ubj"),
        is_classifier="true",
        predict_proba="true",
    )
    with BackendHarness(backend, folder, backend_name="fil", instance_kind="KIND_GPU") as h:
        assert h.instance.state.forest._gpu
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_allclose(got, multi.predict_proba(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_type", XGB_TYPES)
def test_xgboost_formats_through_treelite_when_xgboost_is_missing(
    tmp_path: Path, xgb_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch, model_type: str
) -> None:
    multi = xgb_models["multi"]
    folder = write_model(
        tmp_path, "m", model_type, _save_xgb(multi, model_type), is_classifier="true", predict_proba="true"
    )
    real = _forest._import
    monkeypatch.setattr(_forest, "_import", lambda name: None if name == "xgboost" else real(name))
    with _harness(folder) as h:
        assert h.instance.state.forest.library == "treelite"
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_allclose(got, multi.predict_proba(X), rtol=1e-5, atol=1e-6)


def test_a_model_that_does_not_batch(tmp_path: Path, xgb_models: dict[str, Any]) -> None:
    reg = xgb_models["regression"]
    config = (
        'backend: "fil"\nmax_batch_size: 0\n'
        f'input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]\n'
        'output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        + params(model_type="xgboost_ubj", is_classifier="false")
    )
    folder = write_model(tmp_path, "nb", "xgboost_ubj", _save_xgb(reg, "xgboost_ubj"), config=config)
    with BackendHarness(backend, folder, backend_name="fil", auto_complete=False) as h:
        got = h.infer({"input__0": X[0]})["output__0"]
    assert got.shape == (1,)
    np.testing.assert_allclose(got, reg.predict(X[:1]), rtol=1e-6, atol=1e-6)


def test_xgboost_legacy_binary_through_treelite(
    tmp_path: Path, xgb_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # model_type left out: "xgboost", the legacy binary format, is Triton's default.
    binary, reg = xgb_models["binary"], xgb_models["regression"]
    folder = tmp_path / "legacy"
    (folder / "1").mkdir(parents=True)
    write_xgboost_legacy_binary(booster(binary), folder / "1" / "xgboost.model")
    (folder / "config.pbtxt").write_text(
        'backend: "fil"\n' + params(is_classifier="true", predict_proba="true")
    )
    with _harness(folder) as h:
        assert h.instance.state.forest.library == "treelite"
        got = h.infer({"input__0": X})["output__0"]
    np.testing.assert_allclose(got, binary.predict_proba(X), rtol=1e-5, atol=1e-6)
    regr = write_model(
        tmp_path,
        "legacy_reg",
        "xgboost",
        lambda p: write_xgboost_legacy_binary(booster(reg), p),
        is_classifier="false",
    )
    np.testing.assert_allclose(_infer(regr)["output__0"].ravel(), reg.predict(X), rtol=1e-5, atol=1e-5)
    real = _forest._import
    monkeypatch.setattr(_forest, "_import", lambda name: None if name == "treelite" else real(name))
    err = _load_error(regr)
    assert err.code == ErrorCode.UNAVAILABLE
    assert "legacy binary format, which XGBoost 3" in str(err)
    assert "pip install 'tritonpy-backend-fil[treelite]'" in str(err)


@pytest.mark.parametrize("model_type", ["xgboost_ubj", "lightgbm", "treelite_checkpoint"])
def test_prediction_releases_the_gil(tmp_path: Path, model_type: str) -> None:
    # What lets instances run in parallel: while one predicts, other Python threads run.
    import threading

    x, y, _, _ = data(2000)
    est = xgb.XGBClassifier(n_estimators=200, max_depth=6, n_jobs=1).fit(x, y)
    if model_type == "lightgbm":
        est = lgb.LGBMClassifier(n_estimators=200, num_leaves=63, verbose=-1, n_jobs=1).fit(x, y)

    def save(path: Path) -> None:
        if model_type == "treelite_checkpoint":
            treelite.frontend.from_xgboost(booster(est)).serialize(str(path))
        else:
            booster(est).save_model(str(path))

    folder = write_model(tmp_path, "m", model_type, save, is_classifier="true", cpu_nthread="1")
    big = np.repeat(x, 20, axis=0)
    count = [0]
    running = True

    def counter() -> None:
        while running:
            count[0] += 1

    with _harness(folder) as h:
        forest = h.instance.state.forest
        forest.predict(big[:100])
        thread = threading.Thread(target=counter)
        thread.start()
        try:
            before, start = count[0], time.perf_counter()
            forest.predict(big)
            rate = (count[0] - before) / (time.perf_counter() - start)
        finally:
            running = False
            thread.join()
    # Released, the counter runs at millions of increments a second; a C call holding the
    # GIL lets it in only at the interpreter's switch interval (about 0.2 million a second).
    assert rate > 1e6, f"{forest.library} held the GIL while predicting ({rate:.0f} increments/s)"


def test_threads_follow_the_batch_within_cpu_nthread() -> None:
    # One row is never split; a batch gets a thread per WORK_PER_THREAD tree evaluations, at
    # most cpu_nthread (or every core this process may use when that is <= 0).
    threads = _forest.Threads.create(cpu_nthread=4, trees=512)
    assert threads.limit == 4
    per_thread = _forest.WORK_PER_THREAD // 512
    assert [threads(n) for n in (1, per_thread - 1, per_thread, 2 * per_thread, 100 * per_thread)] == [
        1,
        1,
        1,
        2,
        4,
    ]
    # A forest so large that each row is worth a thread: still one row per thread at most.
    huge = _forest.Threads.create(cpu_nthread=8, trees=100 * _forest.WORK_PER_THREAD)
    assert [huge(n) for n in (1, 3, 50)] == [1, 3, 8]
    every = _forest.Threads.create(cpu_nthread=-1, trees=10**6)
    assert every.limit == _forest.available_cores() >= 1
    assert every(10**6) == every.limit


@pytest.mark.parametrize("cpu_nthread", ["-1", "3"])
def test_xgboost_nthread_follows_the_batch(
    tmp_path: Path, xgb_models: dict[str, Any], cpu_nthread: str
) -> None:
    # One block of rows (XGBoost's unit of parallel work) runs with nthread 1; a larger batch
    # with cpu_nthread (XGBoost's default, 0, when that is -1). Every size predicts the same.
    import json

    multi = xgb_models["multi"]
    folder = write_model(
        tmp_path,
        "m",
        "xgboost_json",
        _save_xgb(multi, "xgboost_json"),
        is_classifier="true",
        predict_proba="true",
        cpu_nthread=cpu_nthread,
    )
    x = data(300, seed=2)[0]
    with _harness(folder) as h:
        xgb_booster = h.instance.state.forest._booster

        def nthread() -> int:
            return int(json.loads(xgb_booster.save_config())["learner"]["generic_param"]["nthread"])

        for rows, expected in ((1, 1), (9, 1), (64, 1), (65, max(int(cpu_nthread), 0)), (30, 1), (300, None)):
            got = h.infer({"input__0": x[:rows]})["output__0"]
            np.testing.assert_allclose(got, multi.predict_proba(x[:rows]), rtol=1e-6, atol=1e-6)
            if expected is not None:
                assert nthread() == expected, rows
        assert nthread() == max(int(cpu_nthread), 0)


def test_gtil_through_the_c_api_matches_treelite(xgb_models: dict[str, Any]) -> None:
    # What the backend's GTIL path returns is what treelite.gtil.predict returns: float32
    # (XGBoost) and float64 (scikit-learn) models, any thread count; a narrower input goes
    # through Treelite's own wrapper (which pads it with missing values).
    from tritonpy_backend_fil._gtil import Gtil

    x, _, y3, _ = data()
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(np.nan_to_num(x), y3)
    models = [
        treelite.frontend.from_xgboost(booster(xgb_models["multi"])),
        treelite.frontend.from_xgboost(booster(xgb_models["regression"])),
        treelite.sklearn.import_model(rf),
    ]
    for model in models:
        gtil = Gtil(treelite, model)
        assert gtil.direct
        for nthread in (1, _forest.openmp_threads()):
            for rows in (X[:1], X):
                expected = treelite.gtil.predict(model, rows, nthread=1)
                got = gtil.predict(rows, nthread)
                assert got.shape == expected.shape and got.dtype == expected.dtype
                np.testing.assert_array_equal(got, expected)
        narrow = X[:4, : FEATURES - 1]
        np.testing.assert_array_equal(gtil.predict(narrow, 1), treelite.gtil.predict(model, narrow))


def test_cpu_nthread_beyond_openmp_threads_is_capped_for_treelite(
    tmp_path: Path, xgb_models: dict[str, Any]
) -> None:
    # Treelite refuses more threads than OpenMP has; a config asking for more still serves.
    multi = xgb_models["multi"]
    folder = write_model(
        tmp_path,
        "tl",
        "treelite_checkpoint",
        lambda p: treelite.frontend.from_xgboost(booster(multi)).serialize(str(p)),
        is_classifier="true",
        predict_proba="true",
        cpu_nthread=str(_forest.openmp_threads() + 1),
    )
    trees = booster(multi).num_boosted_rounds() * 3
    x = data(_forest.WORK_PER_THREAD * (_forest.openmp_threads() + 1) // trees + 1, seed=3)[0]
    np.testing.assert_allclose(_infer(folder, x)["output__0"], multi.predict_proba(x), rtol=1e-5, atol=1e-6)
