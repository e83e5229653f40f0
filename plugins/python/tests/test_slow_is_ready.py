"""A model whose ``is_ready()`` answers late: the caller that gives up gets "not ready",
and the next caller waits for that same answer instead of asking the stub again, as
Triton does (NVIDIA's model_readiness test, ``is_ready_fn_timeout``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonpy
import tritonpy_backend_python._process as stub_process

MODEL = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def is_ready(self):
        here = os.path.dirname(os.path.dirname(__file__))
        with open(os.path.join(here, "asked"), "a") as f:
            f.write("asked\\n")
        while not os.path.exists(os.path.join(here, "answer")):
            time.sleep(0.01)
        return True

    def execute(self, requests):
        outputs = [pb_utils.Tensor("Y", r.inputs()[0].as_numpy()) for r in requests]
        return [pb_utils.InferenceResponse([y]) for y in outputs]
"""


def test_a_late_is_ready_answer_is_waited_for_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stub_process, "READY_TIMEOUT_S", 0.3)
    folder = tmp_path / "slow"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    server = tritonpy.Server(model_repository=tmp_path, strict_readiness=False).start()
    try:
        assert not server.model_ready("slow")  # is_ready() has not answered in time
        # The model still serves while its answer is pending.
        assert server.model("slow").predict({"X": np.ones(1, np.float32)})["Y"].tolist() == [1.0]
        (folder / "answer").write_text("")
        assert server.model_ready("slow")  # the same question's answer, now given
        assert (folder / "asked").read_text().count("asked") == 1
        assert server.model_ready("slow")  # a new question, answered at once
        assert (folder / "asked").read_text().count("asked") == 2
    finally:
        server.stop()
