"""Real servers for integration tests: ``python -m tritonpy serve`` in a subprocess.

The modules listed in tests/tritonpy_workers.py run their server-backed tests twice,
``[workers1]`` and ``[workers2]``: ``server_factory`` starts each server with
``--frontend-workers`` set to the ``frontend_workers`` fixture.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonpy_serverprocess import ServerProcess, free_port
from tritonpy_workers import frontend_workers, pytest_collection_modifyitems, pytest_generate_tests

__all__ = [
    "ServerProcess",
    "free_port",
    "frontend_workers",
    "pytest_collection_modifyitems",
    "pytest_generate_tests",
]

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server_factory(tmp_path_factory: pytest.TempPathFactory, frontend_workers: int) -> Iterator[type]:
    started: list[ServerProcess] = []
    logs = tmp_path_factory.mktemp("logs")

    def start(repos: list[Path], *flags: str, **kwargs: object) -> ServerProcess:
        log = logs / f"server-{len(started)}.log"
        kwargs.setdefault("frontend_workers", frontend_workers)
        server = ServerProcess(repos, *flags, log=log, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    """After each test, collect its garbage here, on the main thread. A client a test left
    open (tritonclient's HTTP client, a socket) is otherwise collected whenever the collector
    next runs, maybe on another test's client thread, where an HTTP client's ``__del__`` finds
    no gevent hub: the unraisable error then fails that other, innocent test. Unclosed-socket
    warnings of what is collected here are the leaving test's untidiness, not a finding about
    the server (which runs in its own process), and are ignored."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
