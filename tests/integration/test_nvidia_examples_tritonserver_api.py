"""NVIDIA's own tests of Triton's in-process Python API (``tritonserver``), run unchanged
against tritonpy: core's ``python/test/test_api.py`` with its test model
(``tests/data/nvidia_examples/tritonserver_api``), under pytest in a process of its own
whose ``import tritonserver`` is tritonpy (``tests/tritonserver_shim``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "data" / "nvidia_examples" / "tritonserver_api"
SHIM = HERE.parent / "tritonserver_shim"

#: The tests of that file not run here, and why.
NOT_RUN = {
    "test_api.py::TestTensor::test_reference_counts": (
        "counts the references Triton's DLPack capsule keeps on its Tensor object; a tritonpy "
        "Tensor hands out its numpy array's own DLPack, so the array holds the memory, not the Tensor"
    ),
    "test_api.py::TestMemoryLeak": (
        "bounds the memory Triton's C++ binding keeps per 200-8000 requests from below (20 kB) and "
        "above (120 kB); tritonpy keeps about 18 kB at 500, 1000 and 8000 requests alike"
    ),
}


def test_nvidias_tritonserver_api_tests_pass(tmp_path: Path) -> None:
    shutil.copytree(SOURCE, tmp_path / "api")
    deselect = [arg for test in NOT_RUN for arg in ("--deselect", test)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIM), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore",
            *deselect,
            "test_api.py",
        ],
        cwd=tmp_path / "api",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    passed = re.search(r"(\d+) passed", output)
    assert passed is not None and int(passed.group(1)) >= 14, output[-3000:]
    assert re.search(r"\d+ (failed|error)", output) is None, output[-3000:]
