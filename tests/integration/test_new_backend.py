"""A third party's backend, start to finish: ``tritonpy new-backend`` → its own tests pass →
``pip install`` → listed and checked by ``tritonpy backends`` → served by a real server to
tritonclient. Also: an async ``predict`` runs on the server's event loop, and two installed
backends claiming one model file are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[2]

ASYNC_BACKEND = """
import asyncio

import numpy as np
from tritonpy_sdk import BackendInfo, Predictor


class Echo(Predictor):
    backend_info = BackendInfo(default_model_filename="model.echo")

    async def predict(self, inputs):
        await asyncio.sleep(0)
        server_loop = self.model.backend.server.event_loop()
        on_loop = asyncio.get_running_loop() is server_loop
        return {"Y": inputs["X"], "ON_LOOP": np.array([on_loop])}
"""


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _pip_install(package: Path, site: Path) -> None:
    done = _run(
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
        "--target", str(site), str(package),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _scaffold(name: str, work: Path) -> Path:
    package = work / name
    made = _run(sys.executable, "-m", "tritonpy", "new-backend", name, str(package))
    assert made.returncode == 0, made.stderr
    return package


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two scaffolded packages (the first one's tests run first) and an async backend, installed."""
    work = tmp_path_factory.mktemp("new-backend")
    package = _scaffold("mybackend", work)
    assert (package / "src" / "tritonpy_backend_mybackend" / "py.typed").is_file()
    tests = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "7 passed" in tests.stdout
    assert "warning" not in tests.stdout.lower(), tests.stdout  # pytest-asyncio's, for one
    site = work / "site"
    _pip_install(package, site)
    _pip_install(_scaffold("other", work), site)  # claims model.json too
    (site / "tp_async_backend.py").write_text(ASYNC_BACKEND)
    info = site / "tp_async_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tp-async-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tritonpy.backends]\nasyncbk = tp_async_backend:Echo\n")
    return site


def _env(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def _repo(root: Path) -> Path:
    def model(name: str, filename: str, text: str, config: str | None) -> None:
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / filename).write_text(text)
        if config is not None:
            (root / name / "config.pbtxt").write_text(textwrap.dedent(config))

    model(
        "doubled",
        "model.json",
        '{"scale": 2}',
        """
        backend: "mybackend"
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
    )
    model(
        "echo",
        "model.echo",
        "",
        """
        backend: "asyncbk"
        input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [
          { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] },
          { name: "ON_LOOP" data_type: TYPE_BOOL dims: [ 1 ] }
        ]
        """,
    )
    model("unclaimed", "model.json", '{"scale": 1}', None)  # mybackend's and other's file
    return root


@pytest.fixture(scope="module")
def server(server_factory, site: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    repo = _repo(tmp_path_factory.mktemp("repo"))
    return server_factory([repo], "--exit-on-error=false", "--strict-readiness=false", env=_env(site))


def test_the_installed_packages_are_listed_and_check_out(site: Path) -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "tritonpy", "backends", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **_env(site)},
        check=True,
    ).stdout
    for name in ("mybackend", "other"):
        line = next(row for row in listing.splitlines() if f"| {name} " in row)
        assert f"tritonpy-backend-{name}" in line and "ok" in line, listing


def test_the_scaffolded_backend_serves_with_auto_complete_batching_and_statistics(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    assert client.is_model_ready("doubled")
    config = client.get_model_config("doubled")
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("OUTPUT0", [3])]
    x = httpclient.InferInput("INPUT0", [2, 3], "FP32")
    x.set_data_from_numpy(np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    out = client.infer("doubled", [x]).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, [[2, 4, 6], [8, 10, 12]])
    wrong = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    wrong.set_data_from_numpy(np.ones((1, 4), np.float32))
    with pytest.raises(Exception, match=r"unexpected shape for input 'INPUT0'"):
        client.infer("doubled", [wrong])
    stats = client.get_inference_statistics("doubled")["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) == 1


def test_an_async_predict_runs_on_the_servers_event_loop(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    x = httpclient.InferInput("X", [1], "FP32")
    x.set_data_from_numpy(np.array([7], np.float32))
    result = client.infer("echo", [x])
    assert result.as_numpy("Y").tolist() == [7.0]
    assert result.as_numpy("ON_LOOP").tolist() == [True]


def test_two_backends_claiming_a_model_file_leave_the_model_unavailable_naming_both(server) -> None:  # type: ignore[no-untyped-def]
    client = httpclient.InferenceServerClient(server.url)
    assert not client.is_model_ready("unclaimed")
    (row,) = [r for r in client.get_model_repository_index() if r["name"] == "unclaimed"]
    assert row["state"] == "UNAVAILABLE"
    assert "'mybackend' (model.json, from tritonpy-backend-mybackend 0.1.0)" in row["reason"]
    assert "'other' (model.json, from tritonpy-backend-other 0.1.0)" in row["reason"]
    assert "set 'backend' in its config.pbtxt to choose" in row["reason"]
