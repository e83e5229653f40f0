"""Once the server whose runtime the interpreter holds stops, ``pb_utils`` outside a
model call (a thread a model started, a test importing a model) reaches no server and says
so, rather than reaching a stopped one. Its own module: no other server may be running."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import triton_python_backend_utils as pb_utils
import tritonpy

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        outputs = [pb_utils.Tensor("Y", r.inputs()[0].as_numpy()) for r in requests]
        return [pb_utils.InferenceResponse([y]) for y in outputs]
"""


def test_once_its_server_stopped_pb_utils_reaches_no_server(tmp_path: Path) -> None:
    folder = tmp_path / "echo"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    )
    with tritonpy.Server(model_repository=tmp_path) as server:
        assert server.model("echo").predict({"X": np.ones(1, np.int32)})["Y"].tolist() == [1]
    request = pb_utils.InferenceRequest(model_name="echo", inputs=[], requested_output_names=["Y"])
    with pytest.raises(pb_utils.TritonModelException, match="needs a running server"):
        request.exec()
