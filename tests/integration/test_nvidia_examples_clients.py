"""NVIDIA's Python client examples, unchanged, against ``tritonpy serve``.

Each script of ``tests/data/nvidia_examples`` (triton-inference-server/client
``src/python/examples``) runs as a subprocess with ``-u <url>`` on Triton's example
models (``tests/tritonpy_simple_models.py``); it must exit 0 and, where it prints
one, print its PASS line. The sequence clients run in ``test_sequences_served.py``,
the system shared-memory ones in ``test_shared_memory_served.py``, the model
control ones in ``test_nvidia_examples_model_control.py``. The examples that
cannot run here are listed with the reason. ``simple_grpc_custom_repeat.py`` runs a second
time against Triton's own ``repeat_int32``, served by the repeat backend's port
(``backend: "repeat"``, plugins/repeat) rather than the Python stand-in.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tritonpy_simple_models import (
    REPEAT_CONFIG,
    repeat_int32,
    simple,
    simple_identity,
    simple_int8,
    simple_string,
)

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "nvidia_examples"

#: script -> (protocol, the line it prints on success, or None when it prints none).
CLIENTS = {
    "simple_http_infer_client.py": ("http", None),
    "simple_http_async_infer_client.py": ("http", None),
    "simple_http_aio_infer_client.py": ("http", "PASS: infer"),
    "simple_http_health_metadata.py": ("http", None),
    "simple_http_string_infer_client.py": ("http", "PASS: string"),
    "simple_grpc_infer_client.py": ("grpc", "PASS: infer"),
    "simple_grpc_async_infer_client.py": ("grpc", "PASS: Async infer"),
    "simple_grpc_aio_infer_client.py": ("grpc", "PASS: grpc aio infer"),
    "simple_grpc_health_metadata.py": ("grpc", None),
    "simple_grpc_string_infer_client.py": ("grpc", "PASS: string"),
    "simple_grpc_custom_args_client.py": ("grpc", "PASS: CustomArgs"),
    "simple_grpc_keepalive_client.py": ("grpc", "PASS: KeepAlive"),
    "simple_grpc_custom_repeat.py": ("grpc", "PASS: Decoupled API"),
    "grpc_explicit_int_content_client.py": ("grpc", "PASS: explicit int"),
    "grpc_explicit_int8_content_client.py": ("grpc", "PASS: explicit int8"),
    "grpc_explicit_byte_content_client.py": ("grpc", "PASS: explicit string"),
}

#: NVIDIA's examples that need what this machine or tritonpy lacks.
_GPU = "needs a GPU (run unchanged by the gpu-marked test_cuda_shared_memory_served.py)"
NOT_RUN = {
    "simple_http_cudashm_client.py": _GPU,
    "simple_grpc_cudashm_client.py": _GPU,
    "image_client.py": "needs an image classification model (densenet_onnx) from the internet",
    "grpc_image_client.py": "needs an image classification model (densenet_onnx) from the internet",
    "grpc_client.py": "needs the densenet_onnx model from the internet",
    "ensemble_image_client.py": "needs the DALI backend and an image model from the internet",
    "memory_growth_test.py": "a soak test of Triton's custom_identity_int32 C++ backend model, for minutes",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, server_factory: Any) -> Any:
    repo = tmp_path_factory.mktemp("nvidia_clients")
    for build in (simple, simple_string, simple_int8, simple_identity, repeat_int32):
        build(repo)
    return server_factory([repo])


#: Triton's ``repeat_int32`` as Triton's server repository has it (``src/test/models``).
#: Triton's repeat_int32 on the repeat backend (plugins/repeat), not the Python stand-in.
REPEAT_BACKEND_MODEL = REPEAT_CONFIG.replace('backend: "python"', 'backend: "repeat"')


@pytest.fixture(scope="module")
def served_repeat_backend(tmp_path_factory: pytest.TempPathFactory, server_factory: Any) -> Any:
    pytest.importorskip("tritonpy_backend_repeat", reason="the repeat backend (plugins/repeat)")
    repo = tmp_path_factory.mktemp("nvidia_repeat_backend")
    (repo / "repeat_int32" / "1").mkdir(parents=True)
    (repo / "repeat_int32" / "config.pbtxt").write_text(REPEAT_BACKEND_MODEL)
    return server_factory([repo])


def _run_example(script: str, url: str) -> None:
    _, marker = CLIENTS[script]
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "-u", url], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    if marker is not None:
        assert marker in run.stdout, run.stdout + run.stderr
    assert "error" not in run.stdout.lower(), run.stdout


@pytest.mark.parametrize("script", sorted(CLIENTS))
def test_client_example_runs_unchanged(served: Any, script: str) -> None:
    protocol, _ = CLIENTS[script]
    _run_example(script, served.url if protocol == "http" else served.grpc_url)


@pytest.mark.slow
def test_custom_repeat_client_against_the_repeat_backend(served_repeat_backend: Any) -> None:
    """The client's delays are real here, as with Triton's repeat backend: ten responses 1 s
    apart, then 1 s of WAIT."""
    _run_example("simple_grpc_custom_repeat.py", served_repeat_backend.grpc_url)


@pytest.mark.parametrize("script", sorted(NOT_RUN))
def test_client_example_not_run_here(script: str) -> None:
    pytest.skip(f"{script}: {NOT_RUN[script]}")
