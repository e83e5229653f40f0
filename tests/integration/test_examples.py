"""The example repository the README serves, queried by the example client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_example_repository_and_client(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([ROOT / "examples" / "model_repository"])
    for model in ("iris_classifier", "iris_species", "simple", "string_identity"):
        assert f"| {model}" in server.output()
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "client_example.py"), server.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "server ready: True" in run.stdout
    assert "simple OUTPUT0: [[ 1  2  3" in run.stdout
    assert "iris top-2: [[b'0.98" in run.stdout and ":0:setosa'" in run.stdout, run.stdout
    assert "species: [b'setosa' b'virginica']" in run.stdout, run.stdout
    assert "strings: [[b'hello' b'tritonpy']]" in run.stdout
    # iris_species (Python, BLS) agrees with iris_classifier on the same flower, given in mm.
    top1 = run.stdout.split("iris top-2: [[b'", 1)[1].split("'", 1)[0].split(":")[2]
    assert f"species: [b'{top1}' b'" in run.stdout, run.stdout


def test_client_example_help_is_help() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "client_example.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: client_example.py [-h] [url]")


#: Textbook flowers of each species (cm: sepal length, sepal width, petal length, petal width):
#: rows 1, 51 and 146 of the iris data set.
FLOWERS = {
    "setosa": [5.1, 3.5, 1.4, 0.2],
    "versicolor": [6.4, 3.2, 4.5, 1.5],
    "virginica": [6.7, 3.0, 5.2, 2.3],
}


def test_iris_models_name_the_right_species(server_factory) -> None:  # type: ignore[no-untyped-def]
    """The served classifier is a trained one: each textbook flower gets its species,
    from iris_classifier (probabilities, class labels) and iris_species (BLS, mm)."""
    import numpy as np
    import tritonclient.http as httpclient

    server = server_factory([ROOT / "examples" / "model_repository"])
    client = httpclient.InferenceServerClient(server.url)
    species = list(FLOWERS)
    features = np.array([FLOWERS[s] for s in species], dtype=np.float32)
    inp = httpclient.InferInput("FEATURES", list(features.shape), "FP32")
    inp.set_data_from_numpy(features)
    top1 = httpclient.InferRequestedOutput("PROBABILITIES", class_count=1)
    result = client.infer("iris_classifier", [inp], outputs=[top1])
    labels = [row[0].decode().split(":")[2] for row in result.as_numpy("PROBABILITIES")]
    assert labels == species
    probabilities = client.infer("iris_classifier", [inp]).as_numpy("PROBABILITIES")
    assert probabilities[0, 0] > 0.9  # setosa is the easy one

    mm = httpclient.InferInput("MEASUREMENTS_MM", list(features.shape), "FP32")
    mm.set_data_from_numpy(features * 10)
    named = client.infer("iris_species", [mm]).as_numpy("SPECIES").reshape(-1)
    assert [s.decode() for s in named] == species


def test_iris_weights_are_those_train_iris_finds() -> None:
    """The weights make_models.py ships are what train_iris.py fits (up to the
    solver's tolerance): same predictions on all 150 flowers, same accuracy."""
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris

    train = _load(ROOT / "examples" / "train_iris.py")
    make = _load(ROOT / "examples" / "make_models.py")
    weights, bias, accuracy = train.train()
    assert accuracy > 0.95
    features, labels = load_iris(return_X_y=True)
    import numpy as np

    shipped = (features @ np.array(make.IRIS_WEIGHTS) + np.array(make.IRIS_BIAS)).argmax(axis=1)
    fitted = (features @ weights + bias).argmax(axis=1)
    assert (shipped == fitted).all()
    assert (shipped == labels).mean() == pytest.approx(accuracy)
    assert np.abs(np.array(make.IRIS_WEIGHTS) - weights).max() < 0.05


def _load(path: Path):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_models_are_reproducible(tmp_path: Path) -> None:
    """make_models.py writes byte-identical files to those committed."""
    script = (ROOT / "examples" / "make_models.py").read_text()
    copy = tmp_path / "make_models.py"
    copy.write_text(script)
    subprocess.run([sys.executable, str(copy)], check=True, capture_output=True, timeout=60)
    for path in (tmp_path / "model_repository").rglob("*.onnx"):
        committed = ROOT / "examples" / "model_repository" / path.relative_to(tmp_path / "model_repository")
        assert committed.read_bytes() == path.read_bytes(), f"{committed} is stale: rerun make_models.py"


def test_statistics_and_metrics_over_every_protocol(server_factory) -> None:  # type: ignore[no-untyped-def]
    import urllib.request

    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    server = server_factory([ROOT / "examples" / "model_repository"])
    a = np.ones((2, 16), np.int32)
    for module, url, count in ((httpclient, server.url, 3), (grpcclient, server.grpc_url, 2)):
        client = module.InferenceServerClient(url)
        inputs = [module.InferInput(n, [2, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for inp in inputs:
            inp.set_data_from_numpy(a)
        for _ in range(count):
            client.infer("simple", inputs)
    http_stats = httpclient.InferenceServerClient(server.url).get_inference_statistics("simple")
    grpc_stats = grpcclient.InferenceServerClient(server.grpc_url).get_inference_statistics(
        "simple", as_json=True
    )
    (h,) = http_stats["model_stats"]
    (g,) = grpc_stats["model_stats"]
    assert h["inference_stats"]["success"]["count"] == 5 and h["inference_count"] == 10
    assert int(g["inference_stats"]["success"]["count"]) == 5 and int(g["execution_count"]) == 5
    assert h["batch_stats"][0]["batch_size"] == 2
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
        headers = {k.lower() for k in resp.headers}
    with urllib.request.urlopen(f"http://{server.url}/v2/health/ready", timeout=10) as ready:
        headers |= {k.lower() for k in ready.headers}
    assert not headers & {"server", "date"}, headers  # as Triton's: uvicorn would name itself
    assert 'nv_inference_request_success{model="simple",version="1"} 5' in text
    assert 'nv_inference_count{model="simple",version="1"} 10' in text
    assert 'nv_inference_exec_count{model="simple",version="1"} 5' in text
    assert "nv_cpu_memory_used_bytes" in text
    server.wait_for_output(f"Started Metrics Service at 127.0.0.1:{server.metrics_port}")
