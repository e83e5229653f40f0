"""One real gRPC server per module and transport: Server + the native transport or
grpc.aio on a free loopback port, on an event loop in a background thread,
serving the test backend's models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonpy_testservers import GrpcServer, start_grpc


@pytest.fixture(scope="module", params=["tritonpy", "grpcio"])
def grpc_server(test_repos: list[Path], request: pytest.FixtureRequest) -> Iterator[GrpcServer]:
    server, frontend = start_grpc(test_repos, grpc_implementation=request.param)
    yield frontend
    frontend.stop()
    server.stop()
