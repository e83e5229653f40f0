"""One real HTTP server per module: Server + uvicorn on a free loopback port, in a thread,
with a test backend registered in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonpy
from tritonpy_testbackend import TestBackend
from tritonpy_testservers import LiveServer


@pytest.fixture(scope="module")
def live(test_repos: list[Path]) -> Iterator[LiveServer]:
    server = tritonpy.Server(model_repository=test_repos, http_max_input_size=1 << 20)
    server.backends.register("testbk", TestBackend())
    server.start()
    live = LiveServer(server)
    live.start()
    yield live
    live.stop()
    server.stop()
