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
    assert ":setosa" in run.stdout or ":versicolor" in run.stdout or ":virginica" in run.stdout
    assert "strings: [[b'hello' b'tritonpy']]" in run.stdout
    # iris_species (Python, BLS) agrees with iris_classifier on the same flower, given in mm.
    top1 = run.stdout.split("iris top-2: [[b'", 1)[1].split("'", 1)[0].split(":")[2]
    assert f"species: [b'{top1}' b'" in run.stdout, run.stdout


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
    assert 'nv_inference_request_success{model="simple",version="1"} 5' in text
    assert 'nv_inference_count{model="simple",version="1"} 10' in text
    assert 'nv_inference_exec_count{model="simple",version="1"} 5' in text
    assert "nv_cpu_memory_used_bytes" in text
    server.wait_for_output(f"Started Metrics Service at 127.0.0.1:{server.metrics_port}")
