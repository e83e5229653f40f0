"""One real gRPC server per module and transport: Server + the native transport or
grpc.aio on a free loopback port, on an event loop in a background thread,
serving the test backend's models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from tritonpy_testservers import GrpcServer, start_grpc
from tritonpy_workers import (
    frontend_workers,
    pytest_collection_modifyitems,
    pytest_generate_tests,
    serve_test_backend,
)

__all__ = ["frontend_workers", "pytest_collection_modifyitems", "pytest_generate_tests"]


@pytest.fixture(scope="module", params=["tritonpy", "grpcio"])
def grpc_server(
    test_repos: list[Path],
    request: pytest.FixtureRequest,
    frontend_workers: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GrpcServer]:
    if frontend_workers > 1:  # worker processes (tests/tritonpy_workers.py), native transport only
        for served in serve_test_backend(
            test_repos, frontend_workers, tmp_path_factory, "--allow-client-shm=true"
        ):
            yield SimpleNamespace(url=served.grpc_url)  # type: ignore[misc]
        return
    server, frontend = start_grpc(test_repos, grpc_implementation=request.param, allow_client_shm=True)
    yield frontend
    frontend.stop()
    server.stop()
