"""Which model files get a stub started for ``auto_complete_config`` at load: those that
may have one. A model class imported from another module (Triton's QA models are
written so: ``from python_addsub import *``) may; a plain class of the file's own that
never names the method cannot."""

from __future__ import annotations

import pytest
from tritonpy_backend_python import _may_auto_complete

PLAIN = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


@pytest.mark.parametrize(
    ("source", "may"),
    [
        (PLAIN, False),
        (PLAIN.replace("TritonPythonModel:", "TritonPythonModel(object):"), False),
        (PLAIN + "    @staticmethod\n    def auto_complete_config(c):\n        return c\n", True),
        ("from python_addsub import *\n", True),
        ("from common import Model as TritonPythonModel\n", True),
        (PLAIN.replace("TritonPythonModel:", "TritonPythonModel(Base):"), True),
        (PLAIN.replace("TritonPythonModel:", "TritonPythonModel(metaclass=Meta):"), True),
        ("class TritonPythonModel(:\n", False),  # the load says what is wrong with it
    ],
)
def test_model_files_that_may_auto_complete(source: str, may: bool) -> None:
    assert _may_auto_complete(source) is may
