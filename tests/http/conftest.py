"""Real HTTP servers per module: Server + uvicorn on a free loopback port, in a thread,
with a test backend registered in-process."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import tritonpy
from tritonpy_sdk import BackendInfo, InferenceRequest, InferenceResponse, Model, ModelInstance, hookimpl
from tritonpy_testbackend import TestBackend, write_model
from tritonpy_testservers import LiveServer
from tritonpy_workers import (
    frontend_workers,
    pytest_collection_modifyitems,
    pytest_generate_tests,
    serve_test_backend,
)

__all__ = ["frontend_workers", "pytest_collection_modifyitems", "pytest_generate_tests"]


class FailingLoadBackend:
    """A backend whose every model fails to load (in model_initialize)."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def model_initialize(self, model: Model) -> None:
        raise RuntimeError("cannot initialize")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        raise AssertionError("never reached: the model does not load")


def _serve(repos: list[Path], **options: object) -> Iterator[LiveServer]:
    server = tritonpy.Server(model_repository=repos, http_max_input_size=1 << 20, **options)
    server.backends.register("testbk", TestBackend())
    server.backends.register("failbk", FailingLoadBackend())
    server.start()
    live = LiveServer(server)
    live.start()
    yield live
    live.stop()
    server.stop()


@pytest.fixture(scope="module")
def live(
    test_repos: list[Path], tmp_path_factory: pytest.TempPathFactory, frontend_workers: int
) -> Iterator[LiveServer]:
    """The shared test models, plus single-input models for raw binary requests
    (in worker processes where tests/tritonpy_workers.py says so)."""
    raw = tmp_path_factory.mktemp("raw_repo")
    write_model(raw, "raw_fixed", dtype="TYPE_FP32", dims="3", inputs=1)
    write_model(raw, "raw_string", dtype="TYPE_STRING", dims="1", inputs=1)
    write_model(raw, "raw_two_variable", dtype="TYPE_FP32", dims="-1, -1", inputs=1)
    if frontend_workers > 1:
        yield from serve_test_backend(  # type: ignore[misc]
            [*test_repos, raw],
            frontend_workers,
            tmp_path_factory,
            f"--http-max-input-size={1 << 20}",
            "--allow-client-shm=true",
        )
        return
    yield from _serve([*test_repos, raw], allow_client_shm=True)


@pytest.fixture(scope="module")
def live_with_failure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server where one model failed to load (strict readiness: the server is not ready)."""
    repo = tmp_path_factory.mktemp("failure_repo")
    write_model(repo, "addsub")
    write_model(repo, "broken")
    config = repo / "broken" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "testbk"', 'backend: "failbk"'))
    yield from _serve([repo], exit_on_error=False)
