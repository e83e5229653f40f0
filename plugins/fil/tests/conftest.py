"""The FIL backend's tests train tiny tree models in the run (fil_testmodels.py beside this
file); served tests start ``tritonpy serve`` with the core tests' helper
(tests/tritonpy_serverprocess.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))
