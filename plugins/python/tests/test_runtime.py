"""Each server's in-process models reach their own server: two ``tritonpy.Server``s in
one process, each with BLS models calling a model of the same name that answers differently."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonpy

IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'

TARGET = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        answer = np.array([{answer}], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHO", answer)]) for _ in requests]
"""

BLS = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _ask():
    return pb_utils.InferenceRequest(
        model_name="target",
        requested_output_names=["WHO"],
        inputs=[pb_utils.Tensor("X", np.zeros(1, np.int32))],
    )


def _answer(response):
    if response.has_error():
        raise pb_utils.TritonModelException(response.error().message())
    who = pb_utils.get_output_tensor_by_name(response, "WHO").as_numpy()
    return pb_utils.InferenceResponse([pb_utils.Tensor("WHO", who)])


class TritonPythonModel:
    {execute}
"""

SYNC_EXECUTE = """def execute(self, requests):
        return [_answer(_ask().exec()) for _ in requests]"""

ASYNC_EXECUTE = """async def execute(self, requests):
        return [_answer(await _ask().async_exec()) for _ in requests]"""


def _model(repo: Path, name: str, code: str) -> None:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(code)
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\n'
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "WHO" data_type: TYPE_INT32 dims: [ 1 ] } ]\n' + IN_PROCESS
    )


def _repository(root: Path, answer: int) -> Path:
    repo = root / f"repo{answer}"
    _model(repo, "target", TARGET.format(answer=answer))
    _model(repo, "bls", BLS.format(execute=SYNC_EXECUTE))
    _model(repo, "bls_async", BLS.format(execute=ASYNC_EXECUTE))
    return repo


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, tritonpy.Server]]:
    root = tmp_path_factory.mktemp("runtimes")
    started: dict[int, tritonpy.Server] = {}
    try:
        for answer in (1, 2):
            started[answer] = tritonpy.Server(model_repository=_repository(root, answer)).start()
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.mark.parametrize("model", ["bls", "bls_async"])
def test_bls_of_each_server_reaches_its_own_models(servers: dict[int, tritonpy.Server], model: str) -> None:
    # Twice over, in both orders: whichever server loaded (or ran) first must not matter.
    for answer in (1, 2, 2, 1):
        outputs = servers[answer].model(model).predict({"X": np.zeros(1, np.int32)})
        assert outputs["WHO"].tolist() == [answer]
