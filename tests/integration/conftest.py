"""Real servers for integration tests: ``python -m tritonpy serve`` in a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonpy_serverprocess import ServerProcess, free_port

__all__ = ["ServerProcess", "free_port"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[type]:
    started: list[ServerProcess] = []
    logs = tmp_path_factory.mktemp("logs")

    def start(repos: list[Path], *flags: str, **kwargs: object) -> ServerProcess:
        log = logs / f"server-{len(started)}.log"
        server = ServerProcess(repos, *flags, log=log, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in started:
        server.stop()
