"""The template is not installed in the development environment (a test installs
it with pip as a third party would); its own tests import it from its source."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
