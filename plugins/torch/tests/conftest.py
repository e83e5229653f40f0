"""The torch backend's tests build their models with torch.jit / torch.export in the run
(torch_testmodels.py beside this file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
