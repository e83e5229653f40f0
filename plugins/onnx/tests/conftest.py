"""The onnxruntime backend's served tests build their models in the run (onnx_testmodels.py
beside this file) and start ``tritonpy serve`` with the core tests' helper
(tests/tritonpy_serverprocess.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))
