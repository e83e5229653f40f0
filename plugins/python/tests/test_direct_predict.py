"""``predict`` of an in-process Python model goes through ``execute_direct`` (arrays
straight into ``pb_utils`` tensors, the model's output arrays straight back), and
answers exactly as the usual way (``infer``, through core request and response
objects) does: the same outputs, the same errors, the same statistics, whatever
the model does (raise, answer with an error, answer through its response sender,
hand the request back, return the wrong number of responses, drop or add outputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import TritonError

IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'

#: What the model does is chosen by X[0].
MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
        y = pb_utils.Tensor("Y", x * 2)
        z = pb_utils.Tensor("Z", x + 1)
        what = int(x[0])
        if what == 1:
            raise ValueError("the model failed")
        if what == 2:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("an answer with an error"))]
        if what == 3:
            sender = request.get_response_sender()
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            sender.send(pb_utils.InferenceResponse([y, z]), flags=final)
            return None
        if what == 4:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            return [None]
        if what == 5:
            return []
        if what == 6:
            request.requested_output_names().remove("Z")
        if what == 7:
            y = pb_utils.Tensor("Y", np.array([float(request.is_cancelled())], np.float32))
        if what == 8:
            return [pb_utils.InferenceResponse([y, z, pb_utils.Tensor("UNDECLARED", x)])]
        if what == 9:
            return [pb_utils.InferenceResponse([y, z])] * 2
        if what == 10:
            return "not a list"
        if what == 11:
            sender = request.get_response_sender()
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            sender.send(pb_utils.InferenceResponse([z]), flags=final)
            return [pb_utils.InferenceResponse([y, z])]
        if what == 12:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        if what == 13:  # kept past its execute
            self.kept = request
        if what == 14:  # the kept request's sender, asked for late: Y = [1] when sending fails
            final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            try:
                self.kept.get_response_sender().send(pb_utils.InferenceResponse([z]), flags=final)
                failed = 0.0
            except Exception:
                failed = 1.0
            y = pb_utils.Tensor("Y", np.array([failed], np.float32))
        return [pb_utils.InferenceResponse([y, z])]
"""

CASES = list(range(13))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tritonpy.Server]:
    repo = tmp_path_factory.mktemp("direct")
    folder = repo / "odd"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL)
    (folder / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] },'
        ' { name: "Z" data_type: TYPE_FP32 dims: [ -1 ] } ]\n' + IN_PROCESS
    )
    add_sub = Path(__file__).parent / "models" / "add_sub"
    (repo / "add_sub" / "1").mkdir(parents=True)
    (repo / "add_sub" / "1" / "model.py").write_text((add_sub / "1" / "model.py").read_text())
    (repo / "add_sub" / "config.pbtxt").write_text((add_sub / "config.pbtxt").read_text() + IN_PROCESS)
    with tritonpy.Server(model_repository=repo) as server:
        yield server


def _counts(server: tritonpy.Server, name: str) -> dict[str, int]:
    stats = server.model_statistics(name)[0]
    inference = stats["inference_stats"]
    return {
        "success": inference["success"]["count"],
        "fail": inference["fail"]["count"],
        "queue": inference["queue"]["count"],
        "compute_infer": inference["compute_infer"]["count"],
        "inferences": stats["inference_count"],
        "executions": stats["execution_count"],
    }


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "outputs", {name: array.tolist() for name, array in call().items()}
    except TritonError as exc:
        return "error", (exc.code, exc.message)


def _usual(handle: Any, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
    """The usual way: ``infer`` (a core request, a core response)."""
    (response,) = handle.infer(inputs)
    return {name: tensor.data for name, tensor in response.outputs.items()}


def test_in_process_instances_take_the_direct_lane(server: tritonpy.Server) -> None:
    for name in ("odd", "add_sub"):
        assert server.get_version(name).direct


@pytest.mark.parametrize("what", CASES)
def test_predict_answers_as_infer_whatever_the_model_does(
    server: tritonpy.Server, what: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The same answer, the same statistics and the same warnings in the log."""
    handle = server.model("odd")
    inputs = {"X": np.array([what, 3], np.float32)}
    before = _counts(server, "odd")
    usual = _outcome(lambda: _usual(handle, inputs))
    usual_log = [r.getMessage() for r in caplog.records if r.levelname != "DEBUG"]
    caplog.clear()
    middle = _counts(server, "odd")
    direct = _outcome(lambda: handle.predict(inputs))
    after = _counts(server, "odd")
    assert direct == usual
    assert {k: after[k] - middle[k] for k in after} == {k: middle[k] - before[k] for k in after}
    assert [r.getMessage() for r in caplog.records if r.levelname != "DEBUG"] == usual_log


def test_a_request_kept_past_its_execute_has_a_closed_sender(server: tritonpy.Server) -> None:
    """A model that keeps a request and asks for its response sender after answering it
    gets a closed one (sending fails), whichever way the request came."""
    handle = server.model("odd")
    late = {"X": np.array([14], np.float32)}
    _usual(handle, {"X": np.array([13], np.float32)})
    usual = _usual(handle, late)["Y"].tolist()
    handle.predict({"X": np.array([13], np.float32)})
    direct = _usual(handle, late)["Y"].tolist()
    assert direct == usual == [1.0]


def test_predict_of_add_sub_as_infer(server: tritonpy.Server) -> None:
    handle = server.model("add_sub")
    inputs = {"INPUT0": np.arange(4, dtype=np.float32), "INPUT1": np.ones(4, np.float32)}
    direct = handle.predict(inputs)
    assert list(direct) == ["OUTPUT0", "OUTPUT1"]
    usual = _usual(handle, inputs)
    assert {n: a.tolist() for n, a in direct.items()} == {n: a.tolist() for n, a in usual.items()}
