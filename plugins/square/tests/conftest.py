"""The square backend's tests: in process (``tritonpy.Server``, the SDK's harness) and served
(``tritonpy serve`` with the core tests' helper, tests/tritonpy_serverprocess.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tests"))
