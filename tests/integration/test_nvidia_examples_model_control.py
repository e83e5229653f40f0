"""NVIDIA's model control client examples, unchanged, against ``tritonpy serve``.

``simple_http_model_control.py`` and ``simple_grpc_model_control.py``
(triton-inference-server/client ``src/python/examples``) load, reload with a
config override and unload ``simple`` on a server in ``--model-control-mode
explicit``; they count the repository index (7 models for the HTTP script, 8 for
the gRPC one: the eighth is added between them, which explicit mode sees at once).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tritonpy_sequence_models import simple_dyna_sequence, simple_sequence
from tritonpy_simple_models import repeat_int32, simple, simple_identity, simple_int8, simple_string

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "nvidia_examples"


def _run(script: str, url: str) -> str:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "-u", url], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_model_control_examples_run_unchanged(
    tmp_path_factory: pytest.TempPathFactory, server_factory: Any
) -> None:
    repo = tmp_path_factory.mktemp("nvidia_model_control")
    for build in (simple, simple_string, simple_int8, simple_identity, repeat_int32, simple_sequence):
        build(repo)
    simple_dyna_sequence(repo)
    served = server_factory([repo], "--model-control-mode", "explicit")
    assert "PASS: model control" in _run("simple_http_model_control.py", served.url)
    (repo / "simple_eighth").mkdir()
    (repo / "simple_eighth" / "config.pbtxt").write_text(
        (repo / "simple" / "config.pbtxt").read_text().replace('name: "simple"', 'name: "simple_eighth"')
    )
    assert "PASS: model control" in _run("simple_grpc_model_control.py", served.grpc_url)
