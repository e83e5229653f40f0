"""The in-process API's blocking calls run their request themselves when they can.

A thread blocked in ``Server.infer`` / ``ModelHandle.predict`` (no timeout) waits
for the answer anyway: when an instance is free and nothing is queued, the
request executes on that thread, with no hand-off to the instance's worker and
back. A caller holding an instance never keeps a queued request from another
instance (a model calling itself through BLS), and a call with a timeout keeps
the worker thread (the timeout must be able to end the wait).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tritonpy
from tritonpy_sdk import InferenceRequest, InferenceResponse, hookimpl
from tritonpy_testbackend import CpuBackend


class Recorder(CpuBackend):
    """Records the thread of each execute; a request with X = -1 first runs X = 5 through
    the server (a model calling itself, as BLS does) and answers with that result."""

    def __init__(self) -> None:
        self.server: tritonpy.Server | None = None
        self.threads: list[str] = []
        #: Makes the request a model's execute sends to itself.
        self.inner: Callable[[float], InferenceRequest] | None = None

        #: Set by a test: an execute of X = -2 waits for it (the instance stays busy).
        self.gate: threading.Event | None = None
        #: Set by the execute of X = -2 once it holds its instance.
        self.holding = threading.Event()

    @hookimpl
    def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        self.threads.append(threading.current_thread().name)
        if float(requests[0].inputs["X"].data[0]) == -2 and self.gate is not None:
            self.holding.set()
            assert self.gate.wait(30)
        if float(requests[0].inputs["X"].data[0]) == -1:
            assert self.server is not None and self.inner is not None
            # Queued from inside an execute (a timeout: no running here): another instance runs it.
            inner = self.server.infer(self.inner(5.0), timeout=30)
            return [InferenceResponse(dict(inner.outputs))]
        return CpuBackend.echo(requests)


def _repo(tmp_path: Path, count: int) -> Path:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(f"""
backend: "recorder"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: {count} kind: KIND_CPU }} ]
""")
    return tmp_path


def _serve(repo: Path, backend: Recorder) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("recorder", backend)
    backend.server = server
    return server


def test_a_blocking_call_runs_on_the_callers_thread(tmp_path: Path) -> None:
    backend = Recorder()
    with _serve(_repo(tmp_path, 1), backend) as server:
        handle = server.model("m")
        np.testing.assert_array_equal(handle.predict({"X": np.array([2], np.float32)})["Y"], [2])
        response = server.infer(handle.create_request({"X": np.array([3], np.float32)}))
        np.testing.assert_array_equal(response.outputs["Y"].data, [3])
        assert backend.threads == [threading.current_thread().name] * 2
        (stats,) = server.model_statistics("m")
        assert stats["inference_stats"]["success"]["count"] == 2
        assert stats["execution_count"] == 2


def test_a_call_with_a_timeout_keeps_the_worker(tmp_path: Path) -> None:
    backend = Recorder()
    with _serve(_repo(tmp_path, 1), backend) as server:
        handle = server.model("m")
        response = server.infer(handle.create_request({"X": np.array([4], np.float32)}), timeout=30)
        np.testing.assert_array_equal(response.outputs["Y"].data, [4])
        assert backend.threads == ["tritonpy-m_0_0"]


def test_a_request_made_inside_a_callers_execute_runs_on_another_instance(tmp_path: Path) -> None:
    """The caller holds instance 0 while its execute waits for a request to the same
    model: whichever worker takes that request, instance 1 runs it (no deadlock)."""
    backend = Recorder()
    with _serve(_repo(tmp_path, 2), backend) as server:
        handle = server.model("m")

        def make(value: float) -> InferenceRequest:
            return handle.create_request({"X": np.array([value], np.float32)})

        backend.inner = make
        for _ in range(5):  # either worker may take the inner request first
            backend.threads.clear()
            np.testing.assert_array_equal(handle.predict({"X": np.array([-1], np.float32)})["Y"], [5])
            assert backend.threads[0] == threading.current_thread().name
            assert backend.threads[1] in ("tritonpy-m_0_0", "tritonpy-m_0_1")
        # Each worker's instance is free again: both still take queued work.
        results: list[float] = []

        def call(value: float) -> None:
            results.append(float(server.infer(make(value), timeout=30).outputs["Y"].data[0]))

        callers = [threading.Thread(target=call, args=(float(v),)) for v in range(8)]
        for t in callers:
            t.start()
        for t in callers:
            t.join(30)
        assert sorted(results) == [float(v) for v in range(8)]


def test_a_blocking_call_while_the_instance_is_busy_waits_for_its_worker(tmp_path: Path) -> None:
    """One instance, held by another caller: the second call is queued, and its
    answer comes from the worker thread to the caller waiting for it."""
    backend = Recorder()
    backend.gate = threading.Event()
    with _serve(_repo(tmp_path, 1), backend) as server:
        handle = server.model("m")
        first: list[np.ndarray] = []
        holder = threading.Thread(
            target=lambda: first.append(handle.predict({"X": np.array([-2], np.float32)})["Y"])
        )
        holder.start()
        assert backend.holding.wait(30)
        second: list[np.ndarray] = []
        waiter = threading.Thread(
            target=lambda: second.append(handle.predict({"X": np.array([7], np.float32)})["Y"])
        )
        waiter.start()
        stats = server.get_version("m").stats
        while stats.pending == 0 and waiter.is_alive():
            threading.Event().wait(0.005)  # until the second call is queued behind the first
        backend.gate.set()
        holder.join(30)
        waiter.join(30)
        np.testing.assert_array_equal(first[0], [-2])
        np.testing.assert_array_equal(second[0], [7])
        assert backend.threads[1] == "tritonpy-m_0_0"


def test_queued_requests_at_low_load_keep_to_the_instance_that_came_back_last(tmp_path: Path) -> None:
    """Requests the workers run (a timeout: no running here), one at a time, all go to one
    warm instance; while it is busy, the next goes to the other one."""
    backend = Recorder()
    with _serve(_repo(tmp_path, 2), backend) as server:
        handle = server.model("m")
        scheduler = server.get_version("m")._scheduler

        def both_idle() -> bool:  # the worker that answered counts itself idle just after
            return len(scheduler._idle) == 2

        for i in range(6):
            server.infer(handle.create_request({"X": np.array([i], np.float32)}), timeout=30)
            _until(both_idle)
        assert len(set(backend.threads)) == 1, backend.threads
        backend.gate = threading.Event()
        busy = threading.Thread(
            target=server.infer,
            args=(handle.create_request({"X": np.array([-2], np.float32)}),),
            kwargs={"timeout": 30},
        )
        busy.start()
        assert backend.holding.wait(30)
        server.infer(handle.create_request({"X": np.array([7], np.float32)}), timeout=30)
        backend.gate.set()
        busy.join(30)
        assert backend.threads[-2] == backend.threads[0] != backend.threads[-1], backend.threads


def _until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("condition not reached in 30 s")
