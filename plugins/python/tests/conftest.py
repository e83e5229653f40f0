"""One real ``tritonpy serve`` process for the Python backend's tests.

It serves a copy of ``models/`` (Triton-style Python models, unchanged from
how Triton documents them), ``_inproc`` copies of some run in-process, a venv
as an execution environment, and a tiny ONNX model that BLS calls, with
``backends/`` as the backend directory. Clients are the real tritonclient.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
import tarfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tests"))

from tritonpy_serverprocess import ServerProcess  # noqa: E402


def _onnx_add_sub(folder: Path) -> None:
    """``add_sub_onnx``: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32 [4])."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    graph = helper.make_graph(nodes, "add_sub", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (folder / "1").mkdir(parents=True)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    (folder / "config.pbtxt").write_text('name: "add_sub_onnx"\nbackend: "onnxruntime"\n')


def _environment(model: Path) -> None:
    """``envinfo``'s execution environment: a venv (numpy reached through a .pth file)
    with a module no other environment has; ``envinfo_packed`` gets it as a .tar.gz."""
    import numpy

    env = model / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    (site / "server_numpy.pth").write_text(str(Path(numpy.__file__).parents[1]) + "\n")
    (site / "envmarker.py").write_text('VALUE = "from the execution environment"\n')
    packed = model.parent / "envinfo_packed"
    shutil.copytree(model, packed, ignore=shutil.ignore_patterns("env"))
    with tarfile.open(packed / "env.tar.gz", "w:gz") as tar:
        tar.add(env, arcname=".")
    config = (packed / "config.pbtxt").read_text()
    (packed / "config.pbtxt").write_text(config.replace("/env", "/env.tar.gz"))


IN_PROCESS = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'


def _in_process_copy(model: Path) -> None:
    """``<model>_inproc``: the same model.py and config, run with EXECUTION_MODE in_process."""
    copy = model.parent / f"{model.name}_inproc"
    shutil.copytree(model, copy)
    config = (copy / "config.pbtxt").read_text()
    config = config.replace(f'name: "{model.name}"', f'name: "{copy.name}"')
    (copy / "config.pbtxt").write_text(config + IN_PROCESS)


@pytest.fixture(scope="session")
def python_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("pyrepo") / "models"
    shutil.copytree(HERE / "models", repo)
    _onnx_add_sub(repo / "add_sub_onnx")
    _environment(repo / "envinfo")
    for name in (
        "add_sub",
        "extra",
        "bls",
        "bls_timeout",
        "stream_reader",
        "gate",
        "fanout",
        "repeat",
        "reqinfo",
    ):
        _in_process_copy(repo / name)
    return repo


@pytest.fixture(scope="session")
def served(python_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    server = ServerProcess(
        [python_repo],
        "--backend-directory",
        str(HERE / "backends"),
        "--exit-on-error=false",
        log=log,
        # packed execution environments are unpacked under here
        env={"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))},
    )
    try:
        server.wait_for_output("Started GRPCInferenceService", timeout=120)
        yield server
    finally:
        server.stop()
