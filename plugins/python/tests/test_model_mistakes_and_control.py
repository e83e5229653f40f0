"""A Python model that forgets to return its responses, and model control from a Python model.

One server in explicit model-control mode: ``forgetful`` (in a stub process and in-process)
returns None from ``execute`` without answering, which Triton leaves silent and the client
waiting (checked on Triton 2.51); tritonpy says so once per model, at warning level.
``controller`` loads and unloads ``target`` with ``pb_utils.load_model`` / ``unload_model``.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from tritonpy_serverprocess import ServerProcess  # noqa: E402

pytestmark = pytest.mark.integration

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_BOOL dims: [ 1 ] } ]
"""

FORGETFUL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0].decode()
            pb_utils.Logger.log_info(f"forgetting {x}")
        # no return: the responses are forgotten
"""

CONTROLLER = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            op = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0].decode()
            if op == "load":
                pb_utils.load_model("target")
            else:
                pb_utils.unload_model("target")
            ready = np.array([pb_utils.is_model_ready("target")], dtype=bool)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", ready)]))
        return responses
"""

TARGET = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([True]))]) for _ in requests]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("repo")
    inproc = '\nparameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    models = {
        "forgetful": (FORGETFUL, CONFIG),
        "forgetful_inproc": (FORGETFUL, CONFIG + inproc),
        "forgetful_decoupled": (FORGETFUL, CONFIG + "model_transaction_policy { decoupled: true }\n"),
        "controller": (CONTROLLER, CONFIG),
        "target": (TARGET, CONFIG),
    }
    for name, (code, config) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))
        (repo / name / "config.pbtxt").write_text(config)
    loads = [flag for name in models if name != "target" for flag in ("--load-model", name)]
    process = ServerProcess(
        [repo],
        "--model-control-mode=explicit",
        *loads,
        "--exit-timeout-secs=3",  # the forgotten requests never finish
        log=tmp_path_factory.mktemp("logs") / "server.log",
    )
    try:
        yield process
    finally:
        process.stop()


def _x(text: str) -> list[httpclient.InferInput]:
    x = httpclient.InferInput("X", [1], "BYTES")
    x.set_data_from_numpy(np.array([text.encode()], dtype=object))
    return [x]


@pytest.mark.parametrize("model", ["forgetful", "forgetful_inproc"])
def test_execute_returning_none_is_said_once_per_model(server: ServerProcess, model: str) -> None:
    client = httpclient.InferenceServerClient(server.url, network_timeout=1.0, concurrency=2)
    try:
        pending = [client.async_infer(model, _x("a")) for _ in range(2)]
        for request in pending:
            with pytest.raises(Exception, match="(?i)timed? ?out"):  # no answer, as in Triton
                request.get_result()
    finally:
        client.close()  # here: a client collected later, on another thread, trips gevent
    out = server.wait_for_output(f"execute() of model '{model}' version 1 returned None")
    lines = [line for line in out.splitlines() if f"model '{model}' version 1 returned None" in line]
    assert len(lines) == 1, out
    assert lines[0].startswith("W") and "have no final response" in lines[0]
    assert "answered only through their response senders" in lines[0]


def test_a_decoupled_model_returning_none_is_not_warned_about(server: ServerProcess) -> None:
    """Decoupled models answer through their senders by design: execute returning None is normal."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x = grpcclient.InferInput("X", [1], "BYTES")
    x.set_data_from_numpy(np.array([b"a"], dtype=object))
    client.start_stream(callback=lambda result, error: None)
    try:
        for text in ("a", "b"):
            x.set_data_from_numpy(np.array([text.encode()], dtype=object))
            client.async_stream_infer("forgetful_decoupled", [x])
        # One stub answers in order: once it logged "b", what it said of "a" (done) is read.
        server.wait_for_output('model.py:9] "forgetting b"', timeout=15)
    finally:
        client.stop_stream(cancel_requests=True)
    assert "model 'forgetful_decoupled' version 1 returned None" not in server.output()


def test_a_python_model_loads_and_unloads_another_in_explicit_mode(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url)
    try:
        assert not client.is_model_ready("target")
        assert client.infer("controller", _x("load")).as_numpy("Y").tolist() == [True]
        assert client.is_model_ready("target")
        assert client.infer("controller", _x("unload")).as_numpy("Y").tolist() == [False]
        assert not client.is_model_ready("target")
    finally:
        client.close()
