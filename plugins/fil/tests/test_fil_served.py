"""The FIL backend served by ``tritonpy serve``: a repository as Triton's FIL backend documents it
(every format, classifiers and a regressor, SHAP), tritonclient over HTTP and gRPC against the
libraries' own predictions; dynamic batching from auto-complete; two instances at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import treelite
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import xgboost as xgb
from fil_testmodels import FEATURES, booster, data, lightgbm_models, params, write_model, xgboost_models
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = [pytest.mark.integration]

X = data(40, seed=2)[0]


def _full_config(model_type: str, out_width: int, shap_width: int = 0, **parameters: str) -> str:
    """A config.pbtxt written out in full, as Triton's FIL docs show one."""
    shap = (
        f',\n  {{ name: "treeshap_output" data_type: TYPE_FP32 dims: [ {shap_width} ] }}'
        if shap_width
        else ""
    )
    return (
        'backend: "fil"\nmax_batch_size: 1024\n'
        f'input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]\n'
        f'output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ {out_width} ] }}{shap} ]\n'
        "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
        f"{params(model_type=model_type, **parameters)}\n"
        "dynamic_batching { max_queue_delay_microseconds: 2000 }\n"
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("fil_repo")
    xm, lm = xgboost_models(), lightgbm_models()

    def xsave(est: Any, suffix: str) -> Any:
        def save(path: Path) -> None:
            tmp = path.with_name(f"tmp.{suffix}")
            booster(est).save_model(str(tmp))
            tmp.rename(path)

        return save

    shap_w = FEATURES + 1
    write_model(
        root,
        "xgb_binary",
        "xgboost_ubj",
        xsave(xm["binary"], "ubj"),
        config=_full_config("xgboost_ubj", 2, shap_w, is_classifier="true", predict_proba="true"),
    )
    write_model(root, "xgb_multi", "xgboost_json", xsave(xm["multi"], "json"), is_classifier="true")
    write_model(root, "xgb_reg", "xgboost", xsave(xm["regression"], "ubj"), is_classifier="false")
    write_model(
        root,
        "lgb_multi",
        "lightgbm",
        lambda p: booster(lm["multi"]).save_model(str(p)),
        config=_full_config("lightgbm", 3, 3 * shap_w, is_classifier="true", predict_proba="true"),
    )
    # A repository from before Triton 25.09: output_class, algo, storage_type.
    write_model(
        root,
        "lgb_old",
        "lightgbm",
        lambda p: booster(lm["binary"]).save_model(str(p)),
        config=_full_config("lightgbm", 1, output_class="true", algo="NAIVE", storage_type="SPARSE"),
    )
    write_model(
        root,
        "tl_multi",
        "treelite_checkpoint",
        lambda p: treelite.frontend.from_xgboost(booster(xm["multi"])).serialize(str(p)),
        is_classifier="true",
        predict_proba="true",
    )
    write_model(root, "bad_param", "xgboost_json", xsave(xm["binary"], "json"), is_classifier="maybe")
    return root, {"xgb": xm, "lgb": lm}


@pytest.fixture(scope="module")
def server(
    models: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    proc = ServerProcess([models[0]], "--exit-on-error=false", "--strict-readiness=false", log=log)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.url, concurrency=16)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, http: Any, grpc: Any) -> tuple[Any, Any]:
    return (http, httpclient) if request.param == "http" else (grpc, grpcclient)


def _infer(client: Any, module: Any, model: str, x: np.ndarray, outputs: tuple[str, ...] = ()) -> Any:
    tensor = module.InferInput("input__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    requested = [module.InferRequestedOutput(n) for n in outputs] if outputs else None
    return client.infer(model, [tensor], outputs=requested)


def test_served_predictions_match_the_libraries(
    client: tuple[Any, Any], models: tuple[Path, dict[str, Any]]
) -> None:
    c, module = client
    xm, lm = models[1]["xgb"], models[1]["lgb"]
    result = _infer(c, module, "xgb_binary", X)
    np.testing.assert_allclose(
        result.as_numpy("output__0"), xm["binary"].predict_proba(X), rtol=1e-6, atol=1e-6
    )
    contribs = booster(xm["binary"]).predict(xgb.DMatrix(X), pred_contribs=True)
    np.testing.assert_allclose(result.as_numpy("treeshap_output"), contribs, rtol=1e-5, atol=1e-5)
    got = _infer(c, module, "xgb_multi", X).as_numpy("output__0")
    np.testing.assert_array_equal(got.ravel(), xm["multi"].predict(X))
    got = _infer(c, module, "xgb_reg", X).as_numpy("output__0")
    np.testing.assert_allclose(got.ravel(), xm["regression"].predict(X), rtol=1e-6, atol=1e-6)
    result = _infer(c, module, "lgb_multi", X, ("output__0", "treeshap_output"))
    np.testing.assert_allclose(
        result.as_numpy("output__0"), lm["multi"].predict_proba(X), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        result.as_numpy("treeshap_output"), lm["multi"].predict(X, pred_contrib=True), rtol=1e-5, atol=1e-5
    )
    only = _infer(c, module, "lgb_multi", X, ("output__0",))
    assert only.as_numpy("treeshap_output") is None
    got = _infer(c, module, "lgb_old", X).as_numpy("output__0")
    np.testing.assert_array_equal(got.ravel(), lm["binary"].predict(X))
    got = _infer(c, module, "tl_multi", X).as_numpy("output__0")
    np.testing.assert_allclose(got, xm["multi"].predict_proba(X), rtol=1e-5, atol=1e-6)


def test_auto_completed_config_batches_dynamically(http: httpclient.InferenceServerClient) -> None:
    config = http.get_model_config("xgb_multi")
    assert config["max_batch_size"] == 32768
    assert config["input"][0]["name"] == "input__0" and config["input"][0]["dims"] == [FEATURES]
    assert config["output"][0]["name"] == "output__0" and config["output"][0]["dims"] == [1]
    assert "dynamic_batching" in config


def test_bad_parameter_leaves_the_model_unavailable(http: httpclient.InferenceServerClient) -> None:
    index = {m["name"]: m for m in http.get_model_repository_index()}
    assert index["bad_param"]["state"] == "UNAVAILABLE"
    assert (
        'parameter \'is_classifier\' must be "true" or "false", got "maybe"' in index["bad_param"]["reason"]
    )
    with pytest.raises(InferenceServerException):
        _infer(http, httpclient, "bad_param", X)


def test_concurrent_requests_are_batched_and_correct(
    server: ServerProcess, http: httpclient.InferenceServerClient, models: tuple[Path, dict[str, Any]]
) -> None:
    est = models[1]["xgb"]["binary"]
    want = est.predict_proba(X)
    errors: list[BaseException] = []

    def worker(start: int) -> None:
        try:
            own = grpcclient.InferenceServerClient(server.grpc_url)  # one client per thread
            for i in range(start, len(X), 8):
                got = _infer(own, grpcclient, "xgb_binary", X[i : i + 1], ("output__0",)).as_numpy(
                    "output__0"
                )
                np.testing.assert_allclose(got[0], want[i], rtol=1e-6, atol=1e-6)
            own.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stats = http.get_inference_statistics("xgb_binary")["model_stats"][0]
    assert stats["execution_count"] <= stats["inference_count"]
