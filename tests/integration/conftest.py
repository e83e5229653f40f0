"""Real servers for integration tests: ``python -m tritonpy serve`` in a subprocess.

The modules listed in tests/tritonpy_workers.py run their server-backed tests twice,
``[workers1]`` and ``[workers2]``: ``server_factory`` starts each server with
``--frontend-workers`` set to the ``frontend_workers`` fixture.
"""

from __future__ import annotations

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
