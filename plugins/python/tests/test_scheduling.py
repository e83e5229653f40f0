"""How the core schedules a stub's batches: without a waiting thread, unless a timeout needs one."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonpy

HERE = Path(__file__).resolve().parent

A = np.array([1, 2, 3, 4], dtype=np.float32)
B = np.array([10, 20, 30, 40], dtype=np.float32)


def _copy(repo: Path, name: str, parameters: str = "") -> None:
    shutil.copytree(HERE / "models" / "add_sub", repo / name)
    config = repo / name / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "add_sub"', f'name: "{name}"') + parameters)


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
