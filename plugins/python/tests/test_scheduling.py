"""How the core schedules a stub's batches: without a waiting thread, unless a timeout needs one."""

from __future__ import annotations

import logging
import os
import queue
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import ErrorCode
from tritonpy_wait import wait_until

HERE = Path(__file__).resolve().parent

A = np.array([1, 2, 3, 4], dtype=np.float32)
B = np.array([10, 20, 30, 40], dtype=np.float32)


def _copy(repo: Path, name: str, parameters: str = "", model: str = "add_sub") -> None:
    """The test model ``model`` as ``name``, with ``parameters`` added to its config."""
    shutil.copytree(HERE / "models" / model, repo / name)
    config = repo / name / "config.pbtxt"
    config.write_text(config.read_text().replace(f'name: "{model}"', f'name: "{name}"') + parameters)


def _workers(model: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(f"tritonpy-{model}_")]


@pytest.mark.integration
def test_stub_batches_need_no_worker_thread_unless_execute_can_time_out(tmp_path: Path) -> None:
    _copy(tmp_path, "plain")
    _copy(
        tmp_path,
        "timed",
        'parameters { key: "EXECUTE_TIMEOUT_SECONDS" value: { string_value: "30" } }\n',
    )
    with tritonpy.Server(model_repository=tmp_path) as server:
        assert _workers("plain") == []  # sent from the caller's thread, completed by the stub's reader
        assert _workers("timed") == ["tritonpy-timed_0_0"]  # the worker waits, and times out a hang
        threads = [
            threading.Thread(target=lambda: server.model("plain").predict({"INPUT0": A, "INPUT1": B}))
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for name in ("plain", "timed"):
            out = server.model(name).predict({"INPUT0": A, "INPUT1": B})
            np.testing.assert_array_equal(out["OUTPUT0"], A + B)
            np.testing.assert_array_equal(out["OUTPUT1"], A - B)
        for thread in threads:
            thread.join(30)
        (stats,) = server.model_statistics("plain")
        assert stats["inference_stats"]["success"]["count"] == 9


def _depth(value: str) -> str:
    return f'parameters {{ key: "STUB_PIPELINE_DEPTH" value: {{ string_value: "{value}" }} }}\n'


def _cancel_the_second(server: tritonpy.Server, name: str) -> dict[str, Any]:
    """A request of 1 s, then one of 30 s sent while it runs and cancelled: their answers."""
    version = server.get_version(name)
    depth = version.instances[0].pipeline_depth
    answers: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    def send(rid: str, seconds: float) -> Any:
        inputs = {"SECONDS": np.array([seconds], np.float32)}
        request = server.model(name).create_request(inputs, request_id=rid)
        server.submit(request, lambda response, flags: answers.put((rid, response)))
        return request

    send("1", 1.0)
    time.sleep(0.2)  # the first runs
    second = send("2", 30.0)
    pending = 0 if depth > 1 else 1  # handed to the stub, or waiting in the core
    wait_until(lambda: version.stats.pending == pending, "the second handed on or queued")
    second.cancel()
    return dict(answers.get(timeout=20) for _ in range(2))


@pytest.mark.integration
def test_a_busy_stub_is_handed_the_next_request_and_sees_it_cancelled_before_it_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While its instance runs a request, the next one goes to the stub at once (nothing
    waits in the core); cancelled before it starts, it starts cancelled. With
    STUB_PIPELINE_DEPTH 1 it waits in the core instead, which drops it."""
    caplog.set_level(logging.INFO)  # the model's log_info
    _copy(tmp_path, "ahead", model="spinner")
    _copy(tmp_path, "single", _depth("1"), model="spinner")
    with tritonpy.Server(model_repository=tmp_path) as server:
        assert [i.pipeline_depth for i in server.get_version("ahead").instances] == [2]
        assert [i.pipeline_depth for i in server.get_version("single").instances] == [1]

        got = _cancel_the_second(server, "ahead")
        assert got["1"].outputs["SAW_CANCEL"].data.tolist() == [False]
        assert got["2"].outputs["SAW_CANCEL"].data.tolist() == [True]  # the stub ran it, cancelled
        assert "request 2 was cancelled before it ran" in caplog.text

        got = _cancel_the_second(server, "single")
        assert got["1"].outputs["SAW_CANCEL"].data.tolist() == [False]
        assert got["2"].error.code is ErrorCode.CANCELLED  # the core dropped it before it ran


@pytest.mark.integration
@pytest.mark.parametrize("value", ["0", "17", "two", "1.5"])
def test_a_bad_stub_pipeline_depth_fails_the_load_with_the_reason(tmp_path: Path, value: str) -> None:
    _copy(tmp_path, "m", _depth(value))
    with tritonpy.Server(model_repository=tmp_path, exit_on_error=False) as server:
        reason = server.repository_index()[0]["reason"]
    assert reason.endswith(
        f"model 'm': parameter STUB_PIPELINE_DEPTH must be a whole number from 1 to 16, got '{value}'"
    ), reason


@pytest.mark.integration
def test_a_stub_that_dies_with_a_request_waiting_behind_another_fails_both_and_serves_on(
    tmp_path: Path,
) -> None:
    _copy(tmp_path, "spin", model="spinner")
    with tritonpy.Server(model_repository=tmp_path) as server:
        version = server.get_version("spin")
        answers: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        for rid in ("1", "2"):
            request = server.model("spin").create_request(
                {"SECONDS": np.array([30.0], np.float32)}, request_id=rid
            )
            server.submit(request, lambda response, flags, rid=rid: answers.put((rid, response)))
            time.sleep(0.2)
        assert version.stats.pending == 0  # the second waits in the stub, behind the first
        os.kill(version.instances[0].state._proc.pid, signal.SIGKILL)
        got = dict(answers.get(timeout=30) for _ in range(2))
        for rid in ("1", "2"):
            assert got[rid].error.code is ErrorCode.INTERNAL
            assert "Stub process 'spin_0' is not healthy." in got[rid].error.message
        out = server.model("spin").predict({"SECONDS": np.array([0.0], np.float32)})  # a fresh stub
        assert out["SAW_CANCEL"].tolist() == [False]
        (stats,) = server.model_statistics("spin")
        assert stats["inference_stats"]["fail"]["count"] == 2
        assert stats["inference_stats"]["success"]["count"] == 1
