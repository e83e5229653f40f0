"""``auto_complete_config`` of Python models on a real ``tritonpy serve``, in a stub process
and in process, as Triton's QA test L0_model_config checks it (its models' rules and
messages, checked against Triton 2.51): what the model completes, what it may not
change, and that a model which makes itself batching chooses its scheduler itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from tritonpy_serverprocess import ServerProcess  # noqa: E402

pytestmark = pytest.mark.integration

#: Completes four FP32 [4] tensors; batches up to 4 (``set_max_batch_size``) and, with
#: ``{dynamic}``, asks for the dynamic batcher.
MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size(4)
        for name in ("INPUT0", "INPUT1"):
            config.add_input({{"name": name, "data_type": "TYPE_FP32", "dims": [4]}})
        for name in ("OUTPUT0", "OUTPUT1"):
            config.add_output({{"name": name, "data_type": "TYPE_FP32", "dims": [4]}})
        if {dynamic}:
            config.set_dynamic_batching()
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""

MODES = ("process", "in_process")


def _write(repo: Path, name: str, mode: str, config: str = "", dynamic: bool = False) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(MODEL.format(dynamic=dynamic))
    parameters = (
        f'backend: "python"\nparameters {{ key: "EXECUTION_MODE" value {{ string_value: "{mode}" }} }}\n'
    )
    (repo / name / "config.pbtxt").write_text(parameters + config)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo = tmp_path_factory.mktemp("autocomplete")
    for mode in MODES:
        _write(repo, f"plain_{mode}", mode)
        _write(repo, f"dynamic_{mode}", mode, dynamic=True)
        _write(repo, f"partial_{mode}", mode, 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 } ]\n')
        _write(repo, f"bigger_batch_{mode}", mode, "max_batch_size: 6\n")
        other = 'input [ { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
        _write(repo, f"other_type_{mode}", mode, other)
        _write(repo, f"sequence_{mode}", mode, "sequence_batching { }\n", dynamic=True)
    server = ServerProcess([repo], "--model-control-mode=explicit", log=repo.parent / f"{repo.name}.log")
    yield server
    server.stop()


@pytest.mark.parametrize("mode", MODES)
def test_what_the_model_completes(served: ServerProcess, mode: str) -> None:
    with httpclient.InferenceServerClient(served.url) as client:
        for name in (f"plain_{mode}", f"dynamic_{mode}", f"partial_{mode}"):
            client.load_model(name)
        plain = client.get_model_config(f"plain_{mode}")
        assert plain["max_batch_size"] == 4
        assert [(i["name"], i["dims"]) for i in plain["input"]] == [("INPUT0", [4]), ("INPUT1", [4])]
        # As Triton's Python backend: batching, but no scheduler the model did not ask for.
        assert "dynamic_batching" not in plain
        assert client.get_model_config(f"dynamic_{mode}")["dynamic_batching"]["preferred_batch_size"] == [4]
        partial = client.get_model_config(f"partial_{mode}")  # OUTPUT0 had no dims: the model's
        assert [(o["name"], o["dims"]) for o in partial["output"]] == [("OUTPUT0", [4]), ("OUTPUT1", [4])]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "bigger_batch",
            "ValueError: configuration specified max_batch_size 6, but in auto-complete-config function "
            "for model 'bigger_batch_{mode}' specified max_batch_size 4",
        ),
        (
            "other_type",
            "ValueError: unable to load model 'other_type_{mode}', configuration expects datatype "
            "TYPE_INT32 for input 'INPUT1', model provides TYPE_FP32",
        ),
        (
            "sequence",
            "ValueError: Configuration specified scheduling_choice as 'sequence_batching', but "
            "auto-complete-config function for model 'sequence_{mode}' tries to set scheduling_choice "
            "as 'dynamic_batching'",
        ),
    ],
)
def test_what_the_model_may_not_change(served: ServerProcess, mode: str, model: str, message: str) -> None:
    name = f"{model}_{mode}"
    with httpclient.InferenceServerClient(served.url) as client:
        with pytest.raises(InferenceServerException) as err:
            client.load_model(name)
    state = "version 1 is at UNAVAILABLE state: Internal: "
    expected = f"load failed for model '{name}': {state}{message.format(mode=mode)}"
    assert err.value.message().startswith(expected)
    index = httpx.post(f"http://{served.url}/v2/repository/index", json={}).json()
    (entry,) = [e for e in index if e["name"] == name]
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"].startswith("Internal: " + message.format(mode=mode))
