"""The ``args`` a model's ``initialize`` gets, as Triton's Python backend fills them, in a
stub process and in process, from a repository reached through a symbolic link; and the
stub's ``sys.argv``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonpy

MODEL = """
import json
import os
import sys
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args, argv=list(sys.argv), pid=os.getpid())

    def execute(self, requests):
        text = np.array([json.dumps(self.args).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ARGS", text)]) for _ in requests]
"""

IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'


def _model(repo: Path, name: str, extra: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(MODEL)
    (repo / name / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "ARGS" data_type: TYPE_STRING dims: [ 1 ] } ]\n' + extra
    )


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tritonpy.Server, Path]]:
    root = tmp_path_factory.mktemp("args")
    real = root / "real"
    _model(real, "stub", "")
    _model(real, "inproc", IN_PROCESS)
    link = root / "link"
    link.symlink_to(real, target_is_directory=True)
    server = tritonpy.Server(model_repository=link).start()
    try:
        yield server, link
    finally:
        server.stop()


@pytest.mark.parametrize("model", ["stub", "inproc"])
def test_initialize_args_name_the_repository_as_given(
    linked: tuple[tritonpy.Server, Path], model: str
) -> None:
    # Triton passes the model's folder under the repository path it was given, links
    # and all: NVIDIA's init_args model compares it with the path it expects.
    server, link = linked
    answer = server.model(model).predict({"X": np.zeros(1, np.int32)})["ARGS"][0]
    args = json.loads(answer)
    assert args["model_repository"] == str(link / model)
    assert args["model_name"] == model
    assert args["model_version"] == "1"
    assert args["model_instance_kind"] == "CPU"
    assert args["model_instance_name"] == f"{model}_0"  # the group Triton adds is named after the model
    assert args["model_instance_device_id"] == "0"
    assert json.loads(args["model_config"])["name"] == model
    if model == "stub":
        # Triton's stub embeds Python with no arguments, so unittest.main() or argparse
        # in a model.py parse nothing (NVIDIA's test models call unittest.main).
        assert args["argv"] == [""]
        # ps and pgrep show Triton's stub name and the instance (NVIDIA's tests and
        # operators' scripts find stubs with ``pgrep -f triton_python_backend_stub``).
        command = Path(f"/proc/{args['pid']}/cmdline").read_bytes().split(b"\0")
        assert command[-3:-1] == [b"triton_python_backend_stub", b"stub_0"], command


def test_names_triton_refuses_for_a_stub_are_refused(tmp_path: Path) -> None:
    """Triton's Python backend (since 25.08) refuses model and instance names with shell
    characters; NVIDIA's model_control test loads them with files from the request,
    named ``file:/1/model.py`` (a leading "/" is the model folder, as in Triton)."""
    server = tritonpy.Server(model_repository=tmp_path, model_control_mode="explicit").start()
    config = json.dumps(
        {
            "backend": "python",
            "input": [{"name": "X", "data_type": "TYPE_INT32", "dims": [1]}],
            "output": [{"name": "ARGS", "data_type": "TYPE_STRING", "dims": [1]}],
        }
    )
    try:
        for name in ("model!test", "model;test", "model$test", "model'test'"):
            with pytest.raises(
                tritonpy.InvalidArgumentError, match="Invalid stub name: contains invalid characters"
            ):
                server.load_model(name, config, {"/1/model.py": MODEL.encode()})
            assert not server.model_ready(name)
        server.load_model("model-with_fine.name", config, {"/1/model.py": MODEL.encode()})
        answer = server.model("model-with_fine.name").predict({"X": np.zeros(1, np.int32)})["ARGS"][0]
        assert json.loads(answer)["model_name"] == "model-with_fine.name"
    finally:
        server.stop()
