"""Each distribution builds alone, with the dependencies the design promises,
and the package boundaries hold: SDK and backends never import the core; the
core never imports a framework at module level."""

from __future__ import annotations

import ast
import email
import gc
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"onnxruntime", "onnx", "torch", "tensorrt", "xgboost", "treelite", "lightgbm", "tensorflow"}


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``./dev wheels DIR``: the documented way to build every package's wheel."""
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [str(ROOT / "dev"), "wheels", str(out)],
        check=True,
        timeout=300,
        capture_output=True,
        env={**os.environ, "TRITONPY_VENV": sys.prefix},  # the environment running the tests
    )
    return out


@pytest.fixture(scope="module")
def wheels(wheel_dir: Path) -> dict[str, email.message.Message]:
    metas: dict[str, email.message.Message] = {}
    for wheel in wheel_dir.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            meta = email.message_from_bytes(zf.read(name))
            metas[meta["Name"]] = meta
    return metas


@pytest.mark.slow
def test_wheels_install_by_name_from_the_folder_alone(wheel_dir: Path, tmp_path: Path) -> None:
    """``pip install --no-index --find-links DIR <names>`` finds every package in the folder
    (dependencies are this environment's; ``--with-deps`` would add theirs)."""
    target = tmp_path / "site"
    names = ["tritonpy-sdk", "tritonpy", "tritonpy-backend-onnx", "tritonpy-backend-python"]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheel_dir)]
        + ["--no-deps", "--target", str(target), *names],
        check=True,
        timeout=300,
        env={**os.environ, "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull},
    )
    code = "import tritonpy, tritonpy_backend_onnx, tritonpy_sdk; print(tritonpy.__file__)"
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(str(target)), run.stdout
    # The backend package template is package data of the server's wheel.
    scaffold = subprocess.run(
        [sys.executable, "-m", "tritonpy", "new-backend", "mine", str(tmp_path / "mine")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
    )
    assert scaffold.returncode == 0, scaffold.stderr
    written = {p.relative_to(tmp_path / "mine").as_posix() for p in (tmp_path / "mine").rglob("*.*")}
    assert {"pyproject.toml", "src/tritonpy_backend_mine/py.typed", "tests/test_mine.py"} <= written


def _requires(meta: email.message.Message) -> set[str]:
    names = set()
    for req in meta.get_all("Requires-Dist") or []:
        if "extra ==" in req:
            continue
        names.add(req.split(";")[0].split("[")[0].strip().split(" ")[0].rstrip("<>=!~0123456789.,"))
    return {n.lower() for n in names}


@pytest.mark.slow
def test_distributions_and_their_dependencies(wheels: dict[str, email.message.Message]) -> None:
    assert set(wheels) == {
        "tritonpy",
        "tritonpy-sdk",
        "tritonpy-backend-onnx",
        "tritonpy-backend-python",
        "tritonpy-backend-torch",
        "tritonpy-backend-tensorrt",
        "tritonpy-backend-fil",
        "tritonpy-backend-identity",
        "tritonpy-backend-repeat",
        "tritonpy-backend-square",
    }
    for example in ("identity", "repeat", "square"):  # Triton's test backends: the SDK and numpy
        assert _requires(wheels[f"tritonpy-backend-{example}"]) == {"tritonpy-sdk", "numpy"}
    assert _requires(wheels["tritonpy-sdk"]) == {"numpy", "pluggy"}
    core = _requires(wheels["tritonpy"])
    assert "tritonpy-sdk" in core and not core & FRAMEWORKS
    # Metrics are written by metrics/_exposition.py (prometheus-client would rename Triton's counters).
    assert "prometheus-client" not in core
    # grpcio only for the grpc.aio transport, as an extra: the native one serves gRPC without it.
    assert "grpcio" not in core and "protobuf" in core
    assert "grpcio" in (wheels["tritonpy"].get_all("Provides-Extra") or [])
    grpcio = [r for r in wheels["tritonpy"].get_all("Requires-Dist") or [] if r.startswith("grpcio")]
    assert any('extra == "grpcio"' in r for r in grpcio), grpcio
    onnx = _requires(wheels["tritonpy-backend-onnx"])
    assert {"tritonpy-sdk", "onnxruntime"} <= onnx and "tritonpy" not in onnx
    torch = _requires(wheels["tritonpy-backend-torch"])
    assert {"tritonpy-sdk", "torch"} <= torch and "tritonpy" not in torch
    # torch with a lower bound only: the user's CPU or CUDA build is kept.
    (spec,) = [
        r for r in wheels["tritonpy-backend-torch"].get_all("Requires-Dist") or [] if r.startswith("torch")
    ]
    assert spec.replace(" ", "") == "torch>=2.1"
    # FIL: the tree libraries are extras only (a model whose library is missing names its extra).
    fil = wheels["tritonpy-backend-fil"]
    assert _requires(fil) == {"tritonpy-sdk", "numpy"}
    assert set(fil.get_all("Provides-Extra") or []) >= {"xgboost", "lightgbm", "treelite"}
    extras = " ".join(fil.get_all("Requires-Dist") or [])
    assert "xgboost-cpu" in extras and "lightgbm" in extras and "treelite" in extras
    # TensorRT: the wheels are extras only (without them a model.plan names the extra to install).
    trt = wheels["tritonpy-backend-tensorrt"]
    assert _requires(trt) == {"tritonpy-sdk", "numpy"}
    assert set(trt.get_all("Provides-Extra") or []) >= {"cu12", "cu13"}
    extras = " ".join(trt.get_all("Requires-Dist") or [])
    assert "tensorrt-cu12" in extras and "tensorrt-cu13" in extras and "cuda-bindings" in extras
    # The Python backend needs nothing beyond the SDK and numpy (its stubs run anywhere).
    assert _requires(wheels["tritonpy-backend-python"]) == {"tritonpy-sdk", "numpy"}


def _imports(path: Path, top_level_only: bool) -> set[str]:
    # CPython 3.11's ast module can report "recursion depth mismatch" when the
    # garbage collector runs finalizers mid-parse (objects left by other tests).
    gc.disable()
    try:
        tree = ast.parse(path.read_text(), str(path))
    finally:
        gc.enable()
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_sdk_and_plugins_never_import_the_core() -> None:
    offenders = []
    for folder in (ROOT / "sdk" / "src", *(p / "src" for p in (ROOT / "plugins").iterdir())):
        for path in folder.rglob("*.py"):
            if "tritonpy" in _imports(path, top_level_only=False) and path.name != "testing.py":
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_core_and_backends_import_no_framework_at_module_level() -> None:
    offenders = []
    for folder in (ROOT / "core" / "tritonpy", *(p / "src" for p in (ROOT / "plugins").iterdir())):
        for path in folder.rglob("*.py"):
            bad = _imports(path, top_level_only=True) & FRAMEWORKS
            if bad:
                offenders.append(f"{path.relative_to(ROOT)}: {sorted(bad)}")
    assert offenders == []


def test_only_the_grpcio_transport_imports_grpc() -> None:
    """grpcio is an extra: no module of the core imports grpc, or the modules that do,
    at module level, except the grpcio transport (``grpc/aio.py``) and the generated
    ``*_pb2_grpc.py`` it registers the servicers through (test_without_grpcio.py
    serves without grpc for real)."""
    core = ROOT / "core" / "tritonpy"
    grpcio_modules = {"grpc/aio.py", "grpc/grpc_service_pb2_grpc.py", "grpc/health_pb2_grpc.py"}
    offenders = []
    for path in core.rglob("*.py"):
        name = path.relative_to(core).as_posix()
        if name in grpcio_modules:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                names = [module] + [f"{module}.{a.name}" for a in node.names]
            else:
                continue
            for imported in names:
                last = imported.rsplit(".", 1)[-1]
                if imported.split(".")[0] == "grpc" or last.endswith("_pb2_grpc") or last == "aio":
                    offenders.append(f"{name}: {imported}")
    assert offenders == []


def test_dev_serve_installs_the_backends_of_the_example_repository() -> None:
    """``./dev serve`` installs only what serving needs: the backends the example repository's
    models name must be among them (and the heavy frameworks of the other backends must not)."""
    import re

    script = (ROOT / "dev").read_text()
    body = script[script.index("setup_serve() {") : script.index("\n}\n", script.index("setup_serve() {"))]
    folders = set(re.findall(r"-e \./plugins/(\w+)", body))
    provides: dict[str, str] = {}  # backend name -> plugin folder
    for pyproject in (ROOT / "plugins").glob("*/pyproject.toml"):
        # (a regular expression, not tomllib: that is Python 3.11+)
        section = re.search(
            r'\[project\.entry-points\."tritonpy\.backends"\]\n((?:\w+ = .*\n)+)', pyproject.read_text()
        )
        for line in section.group(1).splitlines() if section else []:
            provides[line.split("=")[0].strip()] = pyproject.parent.name
    platforms = {
        "onnxruntime_onnx": "onnxruntime",
        "pytorch_libtorch": "pytorch",
        "tensorrt_plan": "tensorrt",
    }
    needed = set()
    for config in (ROOT / "examples" / "model_repository").glob("*/config.pbtxt"):
        text = config.read_text()
        backend = re.search(r'^backend:\s*"(\w+)"', text, re.M)
        platform = re.search(r'^platform:\s*"(\w+)"', text, re.M)
        name = backend.group(1) if backend else platforms[platform.group(1)] if platform else None
        assert name is not None, f"{config}: no backend or platform"
        needed.add(provides[name])
    assert needed <= folders, f"./dev serve does not install {sorted(needed - folders)}"
    assert not {"torch", "fil", "tensorrt"} & folders
    assert "-e ./sdk" in body and "-e . " in body


def test_ci_runs_the_readme_test_command() -> None:
    """CI and the README agree: ``.ci/run`` calls ``./dev test``, the command the README gives."""
    assert "./dev test" in (ROOT / ".ci" / "run").read_text()
    assert "./dev test" in (ROOT / "README.md").read_text()
