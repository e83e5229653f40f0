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
    for model in ("iris_classifier", "simple", "string_identity"):
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


def test_example_models_are_reproducible(tmp_path: Path) -> None:
    """make_models.py writes byte-identical files to those committed."""
    script = (ROOT / "examples" / "make_models.py").read_text()
    copy = tmp_path / "make_models.py"
    copy.write_text(script)
    subprocess.run([sys.executable, str(copy)], check=True, capture_output=True, timeout=60)
    for path in (tmp_path / "model_repository").rglob("*.onnx"):
        committed = ROOT / "examples" / "model_repository" / path.relative_to(tmp_path / "model_repository")
        assert committed.read_bytes() == path.read_bytes(), f"{committed} is stale: rerun make_models.py"
