"""One real server per module for the fuzz and corpus tests: HTTP (uvicorn with
production's protocol and limits) and gRPC over one ``Server`` serving the test
backend's models, plus ``batched`` under the dynamic batcher, so that bad
requests share batches with good ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tritonpy
from tritonpy_fuzzservers import Servers
from tritonpy_testbackend import TestBackend, write_model, write_repos
from tritonpy_testservers import GrpcServer, LiveServer, free_port


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("fuzz")
    repos = write_repos(root)
    write_model(repos[0], "batched", extra="dynamic_batching { max_queue_delay_microseconds: 2000 }\n")
    server = tritonpy.Server(
        model_repository=repos, grpc_address="127.0.0.1", grpc_port=free_port(), http_max_input_size=1 << 20
    )
    server.backends.register("testbk", TestBackend())
    server.start()
    http = LiveServer(server)
    http.start()
    grpc = GrpcServer(server)
    yield Servers(http, grpc)
    grpc.stop()
    http.stop()
    server.stop()
