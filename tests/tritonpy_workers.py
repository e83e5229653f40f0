"""Protocol tests run again against ``tritonpy serve --frontend-workers 2``.

A module listed in ``MATRIX`` runs each of its tests whose fixtures reach the
``frontend_workers`` fixture twice, ids ``[workers1]`` and ``[workers2]``: the
module-scoped fixture that starts its server (``server_factory`` for the
integration tests, ``live`` and ``grpc_server`` for the in-process HTTP and gRPC
ones) asks ``frontend_workers`` how many processes serve HTTP and gRPC. At 1 a
test's server is what it always was; at 2 ``server_factory`` passes
``--frontend-workers 2``, and the in-process servers become ``python -m tritonpy
serve --frontend-workers 2`` serving the same models, with the test backend
installed as a package would be (``serve_test_backend``).

The conftest modules of tests/integration, tests/http and tests/grpc import
``frontend_workers``, ``pytest_generate_tests`` and ``pytest_collection_modifyitems``
from here. ``TRITONPY_TEST_FRONTEND_WORKERS=all`` runs every integration test that
starts its server through ``server_factory`` at both counts, not only those listed
(a check by hand: it doubles the integration tests' time).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonpy_serverprocess import ServerProcess

#: Worker processes in the second run of a listed module.
WORKERS = 2

#: Modules (paths under tests/) whose server-backed tests run at both counts; each entry
#: names those that do: None for all; a test function's name for all its cases; or
#: "name[case]" for one case (its id less the workers part). Together they cover HTTP and
#: gRPC inference (JSON, binary, BYTES, every dtype), errors, model control, system (and
#: on a GPU CUDA) shared memory, sequences, ensembles and decoupled models, statistics
#: and metrics, perf_analyzer and NVIDIA's unmodified example clients.
MATRIX: dict[str, frozenset[str] | None] = {
    "http/test_http_client.py": None,
    "http/test_http_raw.py": None,
    "grpc/test_grpc_client.py": None,
    "integration/test_nvidia_examples_clients.py": None,
    "integration/test_nvidia_examples_model_control.py": None,
    "integration/test_model_control.py": None,
    "integration/test_shared_memory_served.py": None,
    "integration/test_cuda_shared_memory_served.py": None,
    "integration/test_sequences_served.py": None,
    "integration/test_ensembles_served.py": None,
    "integration/test_nvidia_examples_rescheduling.py": None,
    "integration/test_onnx_http.py": None,
    "integration/test_examples.py": frozenset({"test_statistics_and_metrics_over_every_protocol"}),
    "integration/test_perf_analyzer.py": frozenset(
        {
            "test_perf_analyzer_runs_without_errors[simple-http]",
            "test_perf_analyzer_runs_without_errors[simple-grpc]",
            "test_perf_analyzer_runs_without_errors[simple-grpc-streaming]",
            "test_perf_analyzer_through_system_shared_memory",
        }
    ),
}

#: Tests of the listed modules that run at one count only: they patch the server's own
#: modules in the test's process, where a worker process never sees it.
IN_PROCESS_ONLY: dict[str, frozenset[str]] = {
    "http/test_http_raw.py": frozenset(
        {"test_a_failure_while_encoding_fails_that_request_only_and_shows_no_internals"}
    ),
}

TESTS = Path(__file__).resolve().parent
#: ``TRITONPY_TEST_FRONTEND_WORKERS=all``: every integration module is listed, whole.
ENV_ALL = "TRITONPY_TEST_FRONTEND_WORKERS"
IDS = {1: "workers1", WORKERS: f"workers{WORKERS}"}


def _entry(path: Path) -> tuple[bool, frozenset[str] | None]:
    """Whether the module at ``path`` is listed, and its entry."""
    try:
        where = Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return False, None
    if os.environ.get(ENV_ALL) == "all" and where.startswith("integration/"):
        return True, None
    return where in MATRIX, MATRIX.get(where)


def _in_process_only(path: Path, name: str) -> bool:
    try:
        where = Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return False
    return name in IN_PROCESS_ONLY.get(where, ())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a listed test at 1 and ``WORKERS`` processes when its server asks how many."""
    if "frontend_workers" not in metafunc.fixturenames:
        return
    name = metafunc.definition.originalname
    listed, chosen = _entry(metafunc.definition.path)
    if not listed or _in_process_only(metafunc.definition.path, name):
        return
    if chosen is None or name in chosen or any(c.startswith(f"{name}[") for c in chosen):
        metafunc.parametrize(
            "frontend_workers", list(IDS), indirect=True, ids=list(IDS.values()), scope="module"
        )


@pytest.fixture(scope="module")
def frontend_workers(request: pytest.FixtureRequest) -> int:
    """How many processes serve HTTP and gRPC for this module's server (1 unless listed in MATRIX)."""
    return int(getattr(request, "param", 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``[workers2]`` cases that MATRIX leaves out, and the gRPC tests for
    grpc.aio at ``[workers2]``: worker processes serve gRPC with the native transport only
    (grpcio's server cannot share a listening socket), so they would be the
    ``[tritonpy-workers2]`` tests again. (Imported by several conftest modules: each call
    finds nothing left to deselect after the first.)"""
    dropped = {id(item) for item in items if _left_out(item)}
    if dropped:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
        items[:] = [item for item in items if id(item) not in dropped]


def _left_out(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("frontend_workers", 1) == 1:
        return False
    if params.get("grpc_server") == "grpcio":
        return True
    _, chosen = _entry(item.path)
    name = getattr(item, "originalname", item.name)
    if chosen is None or name in chosen:
        return False
    case = "-".join(part for part in item.callspec.id.split("-") if part not in IDS.values())  # type: ignore[attr-defined]
    return f"{name}[{case}]" not in chosen


_SITE_MODULE = '''\
"""tests/tritonpy_testbackend.py's TestBackend, as an installed package provides it."""

from tritonpy_testbackend import TestBackend

TESTBK = TestBackend()
'''


def backend_env(site: Path) -> dict[str, str]:
    """Environment for a ``tritonpy serve`` that finds the backend ``testbk`` (which the
    in-process servers register) through an entry point laid out in ``site``."""
    (site / "tp_workers_testbk.py").write_text(_SITE_MODULE)
    info = site / "tp_workers_testbk-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tp-workers-testbk\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tritonpy.backends]\ntestbk = tp_workers_testbk:TESTBK\n")
    path = [str(site), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}


def serve_test_backend(
    repos: list[Path], workers: int, tmp_path_factory: pytest.TempPathFactory, *flags: str
) -> Iterator[ServerProcess]:
    """``tritonpy serve --frontend-workers N`` serving ``repos`` of test-backend models."""
    root = tmp_path_factory.mktemp("workers")
    site = root / "site"
    site.mkdir()
    server = ServerProcess(
        repos, *flags, log=root / "server.log", env=backend_env(site), frontend_workers=workers
    )
    try:
        yield server
    finally:
        server.stop()
