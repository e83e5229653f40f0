"""NVIDIA's Python-backend examples, unchanged, on ``tritonpy serve``.

The models (``model.py`` / ``config.pbtxt``) and clients of
triton-inference-server/python_backend ``examples/`` are kept byte for byte in
``tests/data/nvidia_examples/python_backend``; the repository is laid out as each
example's README says. Their clients know only ``localhost:8000`` / ``8001`` /
``8002``, so the server and the clients run together in a private network
namespace (``tests/tritonpy_netns.py``), one server for the whole module. Each
client must exit 0 and print its PASS line.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tritonpy_netns

pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]
EXAMPLES = TESTS / "data" / "nvidia_examples" / "python_backend"

#: Repository model -> (example folder, its model file, its config file or None: auto-completed).
MODELS = {
    "add_sub": ("add_sub", "model.py", "config.pbtxt"),
    "nobatch_auto_complete": ("auto_complete", "nobatch_model.py", None),
    "batch_auto_complete": ("auto_complete", "batch_model.py", None),
    "bls_sync": ("bls", "sync_model.py", "sync_config.pbtxt"),
    "bls_async": ("bls", "async_model.py", "async_config.pbtxt"),
    "pytorch": ("pytorch", "model.py", "config.pbtxt"),
    "bls_decoupled_sync": ("bls_decoupled", "sync_model.py", "sync_config.pbtxt"),
    "bls_decoupled_async": ("bls_decoupled", "async_model.py", "async_config.pbtxt"),
    "repeat_int32": ("decoupled", "repeat_model.py", "repeat_config.pbtxt"),
    "square_int32": ("decoupled", "square_model.py", "square_config.pbtxt"),
    "custom_metrics": ("custom_metrics", "model.py", "config.pbtxt"),
    "jax": ("jax", "model.py", "config.pbtxt"),
}

#: Client script -> the line it prints when it passes.
CLIENTS = {
    "add_sub/client.py": "PASS: add_sub",
    "auto_complete/client.py": "PASS: auto_complete",
    "bls/sync_client.py": "PASS: BLS Sync",
    "bls/async_client.py": "PASS: BLS Async",
    "pytorch/client.py": "PASS: pytorch",
    "bls_decoupled/sync_client.py": "PASS: BLS Decoupled Sync",
    "bls_decoupled/async_client.py": "PASS: BLS Decoupled Async",
    "decoupled/repeat_client.py": "PASS: repeat_int32",
    "decoupled/square_client.py": "PASS: square_int32",
    "custom_metrics/client.py": "PASS: custom_metrics",
    "jax/client.py": "PASS: jax",
}

#: Examples of that folder that cannot run here.
NOT_RUN = {
    "instance_kind": "needs torchvision's ResNet50 weights from the internet (and a GPU for KIND_GPU)",
    "preprocessing": "needs TensorRT, a GPU and the ResNet50 ONNX export from the internet",
}

#: What the torch examples need (the PyTorch model, and BLS Sync which calls it).
NEEDS_TORCH = {"pytorch/client.py", "bls/sync_client.py"}


def _repository(root: Path) -> Path:
    repo = root / "models"
    for name, (folder, model, config) in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        shutil.copy(EXAMPLES / folder / model, repo / name / "1" / "model.py")
        if config is not None:
            shutil.copy(EXAMPLES / folder / config, repo / name / "config.pbtxt")
    return repo


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not tritonpy_netns.usable():
        pytest.skip("needs a private network namespace (unshare -rn) for the examples' fixed ports")
    root = tmp_path_factory.mktemp("nvidia_python_backend")
    clients = root / "clients"
    shutil.copytree(EXAMPLES, clients)
    out = root / "results.json"
    scripts = [str(clients / c) for c in CLIENTS]
    driver = [sys.executable, tritonpy_netns.__file__, str(_repository(root)), str(out)]
    run = subprocess.run(
        ["unshare", "-rn", *driver, *scripts],
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = out.with_suffix(".server.log")
    assert run.returncode == 0, run.stdout + run.stderr + (log.read_text() if log.exists() else "")
    found: dict[str, Any] = json.loads(out.read_text())
    return {str(Path(k).relative_to(clients)): v for k, v in found.items()}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_python_backend_example_runs_unchanged(results: dict[str, Any], client: str) -> None:
    if client in NEEDS_TORCH and importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    if client == "custom_metrics/client.py" and importlib.util.find_spec("requests") is None:
        pytest.skip("needs the requests package (the test extra)")
    if client == "jax/client.py" and importlib.util.find_spec("jax") is None:
        pytest.skip("needs jax (the test extra)")
    got = results[client]
    assert got["rc"] == 0, got["stdout"] + got["stderr"]
    assert CLIENTS[client] in got["stdout"], got["stdout"] + got["stderr"]


@pytest.mark.parametrize("example", sorted(NOT_RUN))
def test_python_backend_example_not_run_here(example: str) -> None:
    pytest.skip(f"examples/{example}: {NOT_RUN[example]}")
