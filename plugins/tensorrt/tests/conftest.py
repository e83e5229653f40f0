"""The TensorRT backend's tests: plain-data engines (trt_engines.py beside this file) for
everything that needs no GPU; the GPU tests build real engines with TensorRT's builder and
serve them with ``tritonpy serve`` through the core tests' helper (tests/tritonpy_serverprocess.py)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "tests"))
