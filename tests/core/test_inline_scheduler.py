"""Instances that execute through ``execute_nowait``: no worker threads, no hand-offs.

A request starts on the thread that submits it while an instance is free; the
thread that completes a batch starts the next queued request on that instance.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy.scheduler import InlineScheduler, Job
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    SEQUENCE_END,
    SEQUENCE_START,
    ErrorCode,
    ExecuteComplete,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend
from tritonpy_wait import wait_until


class Deferred(CpuBackend):
    """Batches wait in ``started`` until the test completes them; the model parameter
    'mode' makes ``execute_nowait`` raise, complete twice or give too many responses."""

    def __init__(self) -> None:
        self.started: queue.SimpleQueue[tuple[str, str, ExecuteComplete, list[InferenceRequest]]] = (
            queue.SimpleQueue()
        )

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        instance.nowait = True
        instance.pipeline_depth = int(instance.model.parameters.get("depth") or 1)

    @hookimpl
    def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        return CpuBackend.echo(requests)

    @hookimpl
    def execute_nowait(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest], complete: ExecuteComplete
    ) -> None:
        mode = instance.model.parameters.get("mode", "")
        if mode == "raise":
            raise RuntimeError("no stub to send to")
        if mode == "twice":
            complete(CpuBackend.echo(requests))
            complete(None, TritonError.internal("late"))
            return
        if mode == "extra":
            complete(CpuBackend.echo(requests) * 2)
            return
        if mode == "now":
            complete(CpuBackend.echo(requests))
            return
        self.started.put((instance.name, threading.current_thread().name, complete, list(requests)))


def _model(repo: Path, name: str, count: int = 1, mode: str = "", extra: str = "", depth: int = 1) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(f"""
backend: "deferred"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: {count} kind: KIND_CPU }} ]
parameters {{ key: "mode" value: {{ string_value: "{mode}" }} }}
parameters {{ key: "depth" value: {{ string_value: "{depth}" }} }}
{extra}
""")


def _serve(repo: Path, backend: Deferred) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo)
    server.backends.register("deferred", backend)
    return server


def _call(server: tritonpy.Server, model: str, value: float, batched: bool = False) -> Callable[[], Any]:
    """Submit one request from a thread named after its value (with a batch dimension
    when ``batched``); returns a waiter for its answer."""
    answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
    x = np.array([[value]] if batched else [value], np.float32)

    def run() -> None:
        try:
            answers.put(server.model(model).predict({"X": x}))
        except TritonError as exc:
            answers.put(exc)

    threading.Thread(target=run, name=f"caller-{value:g}", daemon=True).start()
    return lambda: answers.get(timeout=30)


def test_requests_start_on_the_submitting_thread_and_the_next_on_the_completing_one(
    tmp_path: Path,
) -> None:
    _model(tmp_path, "m", count=2)
    backend = Deferred()
    with _serve(tmp_path, backend) as server:
        assert not [t for t in threading.enumerate() if t.name.startswith("tritonpy-m_")]  # no workers
        first, second = _call(server, "m", 1), _call(server, "m", 2)
        started = [backend.started.get(timeout=30) for _ in range(2)]
        assert {s[0] for s in started} == {"m_0_0", "m_0_1"}  # one batch on each instance
        assert {s[1] for s in started} == {"caller-1", "caller-2"}
        third = _call(server, "m", 3)
        version = server.get_version("m")
        wait_until(lambda: version.stats.pending == 1, "the third request queued")
        assert backend.started.empty()  # both instances busy: the third waits in the queue

        by_value = {float(s[3][0].inputs["X"].data[0]): s for s in started}
        instance, _, complete, requests = by_value[1.0]
        completer = threading.Thread(target=complete, args=(CpuBackend.echo(requests),), name="completer")
        completer.start()
        completer.join(30)
        np.testing.assert_array_equal(first()["Y"], [1])
        queued = backend.started.get(timeout=30)
        assert queued[:2] == (instance, "completer")  # the freed instance, on the completing thread
        for _, _, complete, requests in (by_value[2.0], queued):
            complete(CpuBackend.echo(requests))
        np.testing.assert_array_equal(second()["Y"], [2])
        np.testing.assert_array_equal(third()["Y"], [3])
        (stats,) = server.model_statistics("m")
        assert stats["inference_stats"]["success"]["count"] == 3
        assert stats["execution_count"] == 3


@pytest.mark.parametrize(
    ("mode", "code", "message"),
    [
        ("raise", ErrorCode.INTERNAL, "RuntimeError: no stub to send to"),
        ("extra", ErrorCode.INTERNAL, "returned 2 responses for 1 requests of model 'm'"),
    ],
)
def test_a_failing_execute_nowait_fails_its_batch_and_the_model_serves_on(
    tmp_path: Path, mode: str, code: ErrorCode, message: str
) -> None:
    _model(tmp_path, "m", mode=mode)
    with _serve(tmp_path, Deferred()) as server:
        for _ in range(3):  # the instance was released each time
            with pytest.raises(TritonError) as raised:
                server.model("m").predict({"X": np.array([1], np.float32)})
            assert raised.value.code is code and message in raised.value.message
        (stats,) = server.model_statistics("m")
        assert stats["inference_stats"]["fail"]["count"] == 3


def test_a_batch_completed_twice_is_answered_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _model(tmp_path, "m", mode="twice")
    with _serve(tmp_path, Deferred()) as server:
        for value in (1, 2):
            np.testing.assert_array_equal(
                server.model("m").predict({"X": np.array([value], np.float32)})["Y"], [value]
            )
    assert "completed a batch of model 'm' twice" in caplog.text


def test_dynamic_batching_starts_batches_through_execute_nowait(tmp_path: Path) -> None:
    """A batch the dynamic batcher forms starts on the instance's worker through
    ``execute_nowait``; the thread that completes it answers its requests there (no
    hand-back to the worker) and frees the instance for the next batch."""
    _model(
        tmp_path, "b", extra="max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 200000 }"
    )
    backend = Deferred()
    with _serve(tmp_path, backend) as server:
        answered: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

        def send(rid: str) -> None:
            request = server.model("b").create_request({"X": np.array([[1]], np.float32)}, request_id=rid)
            server.submit(
                request, lambda response, flags: answered.put((rid, threading.current_thread().name))
            )

        send("a")
        send("b")
        instance, thread, complete, requests = backend.started.get(timeout=30)
        assert (instance, thread) == ("b_0_0", "tritonpy-b_0_0")
        assert [r.id for r in requests] == ["a", "b"]  # one batch of both
        completer = threading.Thread(target=complete, args=(CpuBackend.echo(requests),), name="completer")
        completer.start()
        completer.join()
        assert sorted(answered.get(timeout=30) for _ in range(2)) == [("a", "completer"), ("b", "completer")]
        send("c")  # the instance is free again: the next batch starts
        _, _, complete, requests = backend.started.get(timeout=30)
        assert [r.id for r in requests] == ["c"]
        complete(CpuBackend.echo(requests))
        assert answered.get(timeout=30)[0] == "c"


def test_without_a_queue_delay_batches_start_where_requests_arrive_and_batches_complete(
    tmp_path: Path,
) -> None:
    """``dynamic_batching { }`` (no delay) on instances that execute without a thread: no
    worker threads; a request that finds an instance free starts on the thread that
    submits it, and what queued meanwhile starts, as one batch, on the thread that
    completes the batch before it."""
    _model(tmp_path, "b", extra="max_batch_size: 4\ndynamic_batching { }")
    backend = Deferred()
    with _serve(tmp_path, backend) as server:
        assert not [t for t in threading.enumerate() if t.name.startswith("tritonpy-b")]
        first = _call(server, "b", 1, batched=True)
        _, thread, complete, requests = backend.started.get(timeout=30)
        assert thread == "caller-1"
        later = [_call(server, "b", v, batched=True) for v in (2, 3)]
        version = server.get_version("b")
        wait_until(lambda: version.stats.pending == 2, "both queued behind the busy instance")
        completer = threading.Thread(target=complete, args=(CpuBackend.echo(requests),), name="completer")
        completer.start()
        completer.join()
        np.testing.assert_array_equal(first()["Y"], [[1]])
        _, thread, complete, requests = backend.started.get(timeout=30)
        assert thread == "completer"
        assert sorted(float(r.inputs["X"].data[0, 0]) for r in requests) == [2.0, 3.0]  # one batch
        complete(CpuBackend.echo(requests))
        assert sorted(float(w()["Y"][0, 0]) for w in later) == [2.0, 3.0]


def test_without_a_queue_delay_batches_that_complete_at_once_serve_many_callers(tmp_path: Path) -> None:
    """A backend that completes inside ``execute_nowait``: the next batch starts after the
    start that completed it returns, on the same thread (no recursion, nobody stranded)."""
    _model(tmp_path, "b", count=2, mode="now", extra="max_batch_size: 4\ndynamic_batching { }")
    with _serve(tmp_path, Deferred()) as server:
        waiters = [_call(server, "b", float(v), batched=True) for v in range(40)]
        assert sorted(float(w()["Y"][0, 0]) for w in waiters) == [float(v) for v in range(40)]


def test_without_a_queue_delay_requests_arriving_together_on_the_event_loop_go_together(
    tmp_path: Path,
) -> None:
    """On the server's event loop a batch starts at the end of the loop's turn: requests
    that arrive in one turn (read from one socket read) form one batch, rather than the
    first starting alone while the instance is free."""
    _model(tmp_path, "b", extra="max_batch_size: 4\ndynamic_batching { }")
    backend = Deferred()
    loop = asyncio.new_event_loop()
    running = threading.Thread(target=loop.run_forever, name="server-loop", daemon=True)
    running.start()
    answered: queue.SimpleQueue[str] = queue.SimpleQueue()
    try:
        with _serve(tmp_path, backend) as server:
            server.event_loop = loop

            def burst() -> None:
                for rid in ("a", "b", "c"):
                    request = server.model("b").create_request(
                        {"X": np.array([[1]], np.float32)}, request_id=rid
                    )
                    server.submit(request, lambda response, flags, rid=rid: answered.put(rid))

            loop.call_soon_threadsafe(burst)
            _, thread, complete, requests = backend.started.get(timeout=30)
            assert thread == "server-loop"
            assert [r.id for r in requests] == ["a", "b", "c"]
            complete(CpuBackend.echo(requests))
            assert sorted(answered.get(timeout=30) for _ in range(3)) == ["a", "b", "c"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        running.join(30)
        loop.close()


def test_without_a_queue_delay_stop_waits_for_the_batch_in_flight(tmp_path: Path) -> None:
    _model(tmp_path, "b", extra="max_batch_size: 4\ndynamic_batching { }")
    backend = Deferred()
    server = _serve(tmp_path, backend)
    server.start()
    answer = _call(server, "b", 1, batched=True)
    _, _, complete, requests = backend.started.get(timeout=30)
    stopping = threading.Thread(target=server.stop)
    stopping.start()
    stopping.join(0.2)
    assert stopping.is_alive()  # the batch is still running
    complete(CpuBackend.echo(requests))
    stopping.join(30)
    assert not stopping.is_alive()
    np.testing.assert_array_equal(answer()["Y"], [[1]])


def test_a_sequence_batch_starts_through_execute_nowait_and_ends_where_it_completes(
    tmp_path: Path,
) -> None:
    """With sequence batching the instance's worker starts each batch through
    ``execute_nowait``; the thread that completes it answers there, and only then may
    the sequence's next request run."""
    _model(tmp_path, "s", extra="sequence_batching { }")
    backend = Deferred()
    with _serve(tmp_path, backend) as server:
        answered: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

        def send(rid: str, flags: int) -> None:
            request = server.model("s").create_request({"X": np.array([1], np.float32)}, request_id=rid)
            request.correlation_id = 7
            request.flags = flags
            server.submit(request, lambda response, _: answered.put((rid, threading.current_thread().name)))

        send("first", SEQUENCE_START)
        _, thread, complete, requests = backend.started.get(timeout=30)
        assert thread == "tritonpy-s_0_0"
        send("last", SEQUENCE_END)
        version = server.get_version("s")
        wait_until(lambda: version.stats.pending == 1, "the sequence's next request queued")
        assert backend.started.empty()  # its sequence's batch is still running
        completer = threading.Thread(target=complete, args=(CpuBackend.echo(requests),), name="completer")
        completer.start()
        completer.join()
        assert answered.get(timeout=30) == ("first", "completer")
        _, thread, complete, requests = backend.started.get(timeout=30)
        assert [r.id for r in requests] == ["last"]
        complete(CpuBackend.echo(requests))
        assert answered.get(timeout=30)[0] == "last"


# -- the scheduler on its own ------------------------------------------------------------------


class _Held:
    """A runner that keeps each batch's release until the test calls it (or releases
    at once when ``sync``), answering every job with its value."""

    def __init__(self) -> None:
        self.releases: list[Callable[[], None]] = []
        self.ran: list[int] = []
        self.sync = False

    def __call__(self, instance: ModelInstance, jobs: Sequence[Job], release: Callable[[], None]) -> None:
        for job in jobs:
            self.ran.append(int(job.request.id))
            job.answer(None, RESPONSE_COMPLETE_FINAL)
        if self.sync:
            release()
        else:
            self.releases.append(release)


def _job(i: int, answered: list[int]) -> Job:
    request = InferenceRequest("m", 1, {}, id=str(i))
    return Job(request, lambda response, flags: answered.append(i))


def _instance(name: str = "m_0", depth: int = 1) -> ModelInstance:
    instance = ModelInstance(name, "KIND_CPU", 0, model=None)  # type: ignore[arg-type]
    instance.pipeline_depth = depth
    return instance


def test_a_long_queue_completed_synchronously_runs_in_turn_not_in_recursion() -> None:
    runner, answered = _Held(), []
    scheduler = InlineScheduler("m", [_instance()], runner)
    scheduler.start()
    scheduler.enqueue(_job(0, answered))  # holds the only instance
    for i in range(1, 5001):
        scheduler.enqueue(_job(i, answered))
    assert runner.ran == [0]
    runner.sync = True
    runner.releases.pop()()  # every queued job now runs on this thread, one after another
    assert runner.ran == list(range(5001)) and answered == list(range(5001))


def test_stop_lets_queued_work_finish_then_fails_what_could_not_run() -> None:
    runner, answered = _Held(), []
    scheduler = InlineScheduler("m", [_instance()], runner)
    scheduler.start()
    scheduler.enqueue(_job(0, answered))
    scheduler.enqueue(_job(1, answered))
    stopper = threading.Thread(target=scheduler.stop)
    stopper.start()
    wait_until(lambda: not scheduler._open, "the scheduler closed")
    with pytest.raises(TritonError, match="not accepting requests") as refused:
        scheduler.enqueue(_job(2, answered))
    assert refused.value.code is ErrorCode.UNAVAILABLE
    runner.releases.pop()()  # job 0 done: job 1 runs
    assert stopper.is_alive() and runner.ran == [0, 1]
    runner.releases.pop()()
    stopper.join(30)
    assert not stopper.is_alive() and answered == [0, 1]

    held = InlineScheduler("m", [_instance()], runner)
    held.start()
    held.enqueue(_job(3, answered))
    held.enqueue(_job(4, answered))
    outcomes: list[Any] = []
    held._queue[0].done = lambda response, flags: outcomes.append(response)
    held.stop(deadline=0.0)  # already past: the instance never came free for job 4
    (response,) = outcomes
    assert response.error.code is ErrorCode.UNAVAILABLE
    assert "stopped before the request could run" in response.error.message


# -- instances that queue batches of their own (``pipeline_depth``) ---------------------------


class _Lined:
    """A runner that records where each job started and keeps its release, by job."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []
        self.releases: dict[int, Callable[[], None]] = {}

    def __call__(self, instance: ModelInstance, jobs: Sequence[Job], release: Callable[[], None]) -> None:
        for job in jobs:
            self.started.append((instance.name, int(job.request.id)))
            self.releases[int(job.request.id)] = release
            job.answer(None, RESPONSE_COMPLETE_FINAL)


def test_a_pipelining_instance_takes_work_behind_its_batch_only_while_none_is_idle() -> None:
    runner, answered = _Lined(), []
    scheduler = InlineScheduler("m", [_instance("a", 2), _instance("b", 2)], runner)
    scheduler.start()
    for i in range(2):
        scheduler.enqueue(_job(i, answered))
    assert runner.started == [("a", 0), ("b", 1)]  # an idle instance each
    for i in range(2, 4):
        scheduler.enqueue(_job(i, answered))
    assert runner.started[2:] == [("a", 2), ("b", 3)]  # both busy: behind their batches
    scheduler.enqueue(_job(4, answered))
    assert len(runner.started) == 4 and len(scheduler._queue) == 1  # both full: it waits
    runner.releases[1]()  # b's first batch ended: the queued job goes behind b's second
    assert runner.started[4] == ("b", 4) and not scheduler._queue
    runner.releases[0]()
    runner.releases[2]()  # a is idle again
    scheduler.enqueue(_job(5, answered))
    assert runner.started[5] == ("a", 5)  # the idle instance, though b has room for none
    runner.releases[3]()  # b runs 4 alone: it has room again
    scheduler.enqueue(_job(6, answered))
    scheduler.enqueue(_job(7, answered))
    assert sorted(runner.started[6:]) == [("a", 6), ("b", 7)]  # one behind each
    scheduler.enqueue(_job(8, answered))
    assert len(scheduler._queue) == 1

    stopper = threading.Thread(target=scheduler.stop)
    stopper.start()
    for i in (4, 5, 6, 7):
        runner.releases[i]()
    assert runner.started[-1][1] == 8  # the queued job ran before stop returned
    runner.releases[8]()
    stopper.join(30)
    assert not stopper.is_alive() and sorted(answered) == list(range(9))
    assert len(scheduler._free) == 2 and not scheduler._room


def test_instances_of_depth_one_are_never_handed_a_second_batch() -> None:
    runner, answered = _Lined(), []
    scheduler = InlineScheduler("m", [_instance("a")], runner)
    scheduler.start()
    scheduler.enqueue(_job(0, answered))
    scheduler.enqueue(_job(1, answered))
    assert runner.started == [("a", 0)] and len(scheduler._queue) == 1
    runner.releases[0]()
    assert runner.started == [("a", 0), ("a", 1)]


def test_a_request_started_behind_another_counts_its_wait_as_queueing(tmp_path: Path) -> None:
    """The second request is handed to the busy instance at once (nothing pending in the
    core), and its statistics count the time until the first ended as queueing."""
    _model(tmp_path, "m", depth=2)
    backend = Deferred()
    with _serve(tmp_path, backend) as server:
        version = server.get_version("m")
        first = _call(server, "m", 1)
        started_first = backend.started.get(timeout=30)
        second = _call(server, "m", 2)
        started_second = backend.started.get(timeout=30)  # at once, behind the first
        assert started_second[0] == started_first[0] == "m_0_0"
        assert version.stats.pending == 0
        time.sleep(0.5)
        for _, _, complete, requests in (started_first, started_second):
            complete(CpuBackend.echo(requests))
        np.testing.assert_array_equal(first()["Y"], [1])
        np.testing.assert_array_equal(second()["Y"], [2])
        (stats,) = server.model_statistics("m")
        inference = stats["inference_stats"]
        assert inference["success"]["count"] == 2
        # The second request's wait behind the first (at least the 0.5 s slept) is queueing.
        assert int(inference["queue"]["ns"]) >= 500_000_000


# -- the per-request path's shortcuts: each gives what the general code gives ---------------


def _turns_order(one: bool) -> list[str]:
    ran: list[str] = []

    def start(item: str) -> None:
        ran.append(f"start {item}")
        if item == "a":
            for inner in ("b", "c"):
                if one:
                    turns.run_one(inner)
                else:
                    turns.run((inner,))
            ran.append("end a")

    turns = tritonpy.scheduler.inline.Turns(start)
    if one:
        turns.run_one("a")
    else:
        turns.run(("a",))
    assert turns._local.turns is None
    return ran


def test_turns_run_one_runs_in_the_order_run_of_one_item_does() -> None:
    """``Turns.run_one(x)`` is ``run((x,))``: at once outside a start, queued behind the
    start it is called from (never nested), whichever of the two queued it."""
    # Nested items run after the start that queued them, last queued first (as ``run``).
    assert _turns_order(True) == _turns_order(False) == ["start a", "end a", "start c", "start b"]


def test_nowait_function_is_the_backends_own_only_for_exactly_its_three_keywords() -> None:
    from tritonpy_sdk import BackendInfo
    from tritonpy_sdk._plugin import validate_backend

    calls: list[tuple[Any, ...]] = []

    class Full:
        @hookimpl
        def backend_info(self) -> BackendInfo:
            return BackendInfo()

        @hookimpl
        def execute(self, requests: Sequence[InferenceRequest]) -> None:
            return None

        @hookimpl
        def execute_nowait(
            self, complete: ExecuteComplete, requests: Sequence[InferenceRequest], instance: ModelInstance
        ) -> None:
            calls.append(("full", instance, requests, complete))

    class Fewer(Full):
        @hookimpl
        def execute_nowait(  # type: ignore[override]
            self, requests: Sequence[InferenceRequest], complete: ExecuteComplete
        ) -> None:
            calls.append(("fewer", requests, complete))

    class Without(Full):
        execute_nowait = None  # type: ignore[assignment]

    full = validate_backend("full", Full())
    fewer = validate_backend("fewer", Fewer())
    assert validate_backend("without", Without()).nowait_function() is None
    bound = full.nowait_function()
    assert bound is not None and bound == full.execute_nowait.fn  # type: ignore[union-attr]
    assert fewer.nowait_function() is fewer.execute_nowait  # the hook passes only what it takes
    for hooks in (full, fewer):
        own = hooks.nowait_function()
        assert own is not None
        own(instance="i", requests=["r"], complete="c")
        hooks.execute_nowait(instance="i", requests=["r"], complete="c")  # type: ignore[misc]
    assert calls == [("full", "i", ["r"], "c")] * 2 + [("fewer", ["r"], "c")] * 2


def _x(value: float) -> Any:
    from tritonpy_sdk import Tensor

    return Tensor.from_numpy("X", np.array([value], np.float32))
