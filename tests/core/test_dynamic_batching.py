"""The dynamic batcher, deterministically: hold the only instance busy, queue
requests, release, and look at the batches formed. No timing is asserted."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend


class Recorder(CpuBackend):
    """Echo backend that records each batch's request ids; the first request whose id
    starts with "hold" blocks the instance until ``release`` is set."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.instances: list[str] = []
        #: The thread each batch ran on.
        self.threads: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()
        self.blockers: dict[str, threading.Event] = {}

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        ids = [r.id for r in requests]
        self.batches.append(ids)
        self.instances.append(instance.name)
        self.threads.append(threading.current_thread().name)
        if any(i.startswith("hold") for i in ids):
            self.holding.set()
            assert self.release.wait(30)
        for i in ids:
            if i in self.blockers:
                assert self.blockers[i].wait(30)
        return self.echo(requests)


CONFIG = """
backend: "recorder"
max_batch_size: {max_batch}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ count: {instances}, kind: KIND_CPU }} ]
dynamic_batching {{ {batching} }}
"""


class Harness:
    def __init__(self, tmp_path: Path, batching: str = "", max_batch: int = 4, instances: int = 1) -> None:
        (tmp_path / "m" / "1").mkdir(parents=True)
        (tmp_path / "m" / "config.pbtxt").write_text(
            CONFIG.format(max_batch=max_batch, instances=instances, batching=batching)
        )
        self.backend = Recorder()
        self.server = tritonpy.Server(model_repository=tmp_path)
        self.server.backends.register("recorder", self.backend)
        self.server.start()
        self.responses: dict[str, InferenceResponse] = {}
        self.order: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)

    def send(self, request_id: str, batch: int = 1, width: int = 2, **parameters: object) -> None:
        request = self.server.model("m").create_request(
            {"X": np.zeros((batch, width), np.float32)}, request_id=request_id, parameters=parameters
        )

        def done(response: InferenceResponse | None, flags: int) -> None:
            assert response is not None and flags == 1
            with self._done:
                self.responses[request_id] = response
                self.order.append(request_id)
                self._done.notify_all()

        self.server.submit(request, done)

    def hold(self) -> None:
        """Occupy the (first free) instance until ``release``."""
        self.send("hold")
        assert self.backend.holding.wait(30)

    def wait_for(self, *ids: str) -> None:
        with self._done:
            assert self._done.wait_for(lambda: all(i in self.responses for i in ids), 30), self.responses

    def batches_after_hold(self) -> list[list[str]]:
        return [b for b in self.backend.batches if b != ["hold"]]

    def close(self) -> None:
        self.backend.release.set()
        for event in self.backend.blockers.values():
            event.set()
        self.server.stop()


@pytest.fixture
def make(tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    made: list[Harness] = []

    def factory(**kwargs: object) -> Harness:
        h = Harness(tmp_path / str(len(made)), **kwargs)  # type: ignore[arg-type]
        made.append(h)
        return h

    yield factory
    for h in made:
        h.close()


def _ids(n: int) -> list[str]:
    return [f"r{i}" for i in range(n)]


def test_queued_requests_form_max_size_batches(make) -> None:  # type: ignore[no-untyped-def]
    h = make()
    h.hold()
    for rid in _ids(6):
        h.send(rid)
    h.backend.release.set()
    h.wait_for(*_ids(6))
    assert h.batches_after_hold() == [["r0", "r1", "r2", "r3"], ["r4", "r5"]]
    (stats,) = h.server.model_statistics("m")
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [
        (1, 1),
        (2, 1),
        (4, 1),
    ]


def test_requests_one_at_a_time_are_each_served(make) -> None:  # type: ignore[no-untyped-def]
    # An instance that goes idle with nothing queued does not wake the batcher; the next
    # request does (no wake-up is lost between them).
    h = make(batching="max_queue_delay_microseconds: 100")
    for rid in _ids(5):
        h.send(rid)
        h.wait_for(rid)
    assert h.backend.batches == [[rid] for rid in _ids(5)]
    h.hold()
    h.send("queued")
    h.backend.release.set()
    h.wait_for("hold", "queued")
    assert h.backend.batches[-2:] == [["hold"], ["queued"]]


# A delay no test waits out: these batches can only leave because an arrival ended the wait
# (arrivals that change nothing do not wake the batcher; these must).
LONG_DELAY = "max_queue_delay_microseconds: 600000000"


def settle() -> None:
    """Give the batcher time to go back to its wait: an arrival must then wake it (without
    this pause it may still be awake and see the arrival by itself; nothing is timed)."""
    time.sleep(0.05)


def test_an_arrival_that_fills_the_batch_sends_it_without_waiting_out_the_delay(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching=LONG_DELAY)
    for rid in _ids(3):
        h.send(rid)
        settle()
    h.send("r3", batch=1)
    h.wait_for(*_ids(4))
    assert h.backend.batches == [_ids(4)]
    h.send("big", batch=3)  # a lone request is not sent early ...
    settle()
    h.send("over", batch=2)  # ... until one arrives that would overflow its batch
    h.wait_for("big")
    assert h.backend.batches[1] == ["big"]
    settle()
    h.send("fill", batch=2)
    h.wait_for("over", "fill")
    assert h.backend.batches[2] == ["over", "fill"]


def test_an_arrival_of_another_shape_sends_the_waiting_batch(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching=LONG_DELAY, max_batch=3)
    h.send("w2", width=2)
    settle()
    h.send("w3a", width=3)
    h.wait_for("w2")
    settle()
    h.send("w3b", width=3)
    settle()
    h.send("w3c", width=3)
    h.wait_for("w3a", "w3b", "w3c")
    assert h.backend.batches == [["w2"], ["w3a", "w3b", "w3c"]]


def test_a_request_queued_while_every_instance_is_busy_leaves_when_one_comes_back(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="max_queue_delay_microseconds: 100")
    h.hold()
    h.send("a")
    h.send("b")
    h.backend.release.set()
    h.wait_for("hold", "a", "b")
    assert h.batches_after_hold() == [["a", "b"]]


def test_at_low_load_the_instance_that_came_back_last_takes_the_next_batch(make) -> None:  # type: ignore[no-untyped-def]
    """One warm instance at low load (its thread and caches), not a round of all of them;
    a second instance takes a batch while the first is busy. (The 20 ms delay gives the
    worker that answered time to count itself idle again before the next batch leaves.)"""
    h = make(batching="max_queue_delay_microseconds: 20000", instances=2)
    for rid in _ids(6):
        h.send(rid)
        h.wait_for(rid)
    assert len(set(h.backend.instances)) == 1, h.backend.instances
    h.hold()
    h.send("other")
    h.wait_for("other")
    assert h.backend.instances[-1] != h.backend.instances[-2], h.backend.instances


def test_requests_left_queued_by_a_batch_go_to_the_next_idle_instance(make) -> None:  # type: ignore[no-untyped-def]
    """The idle instance that forms a batch runs it; what stays queued behind it (here a
    request of another shape, which ends the first batch) is taken by another idle
    instance at once, not after the first one's execution: "s" executes until "t" is
    answered."""
    h = make(batching="max_queue_delay_microseconds: 300000", instances=2)
    h.backend.blockers["s"] = threading.Event()
    h.send("s", width=2)  # waits out the delay: the batch could still grow ...
    h.send("t", width=3)  # ... until this one, which cannot join it
    h.wait_for("t")
    assert "s" not in h.responses
    h.backend.blockers["s"].set()
    h.wait_for("s")
    assert sorted(h.backend.batches) == [["s"], ["t"]]
    assert len(set(h.backend.instances)) == 2, h.backend.instances


def test_largest_preferred_batch_size_is_sent(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="preferred_batch_size: [ 2, 3 ]")
    h.hold()
    for rid in _ids(7):
        h.send(rid)
    h.backend.release.set()
    h.wait_for(*_ids(7))
    assert h.batches_after_hold() == [["r0", "r1", "r2"], ["r3", "r4", "r5"], ["r6"]]


def test_requests_count_by_their_own_batch_size(make) -> None:  # type: ignore[no-untyped-def]
    h = make()
    h.hold()
    h.send("a", batch=3)
    h.send("b", batch=2)
    h.send("c", batch=1)
    h.backend.release.set()
    h.wait_for("a", "b", "c")
    assert h.batches_after_hold() == [["a"], ["b", "c"]]


def test_different_shapes_are_not_combined(make) -> None:  # type: ignore[no-untyped-def]
    h = make()
    h.hold()
    h.send("w2a", width=2)
    h.send("w2b", width=2)
    h.send("w3", width=3)
    h.send("w2c", width=2)
    h.backend.release.set()
    h.wait_for("w2a", "w2b", "w3", "w2c")
    assert h.batches_after_hold() == [["w2a", "w2b"], ["w3"], ["w2c"]]


def test_higher_priority_goes_first(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="priority_levels: 2 default_priority_level: 2", max_batch=2)
    h.hold()
    h.send("low1", priority=2)
    h.send("low2")  # default level 2
    h.send("high1", priority=1)
    h.send("high2", priority=1)
    h.backend.release.set()
    h.wait_for("low1", "low2", "high1", "high2")
    assert h.batches_after_hold() == [["high1", "high2"], ["low1", "low2"]]


def test_a_priority_beyond_the_levels_is_served_at_the_default_level(make) -> None:  # type: ignore[no-untyped-def]
    # As Triton 2.51 does (observed: 200 for priorities 3 and 100 with 2 levels).
    h = make(batching="priority_levels: 2 default_priority_level: 2", max_batch=2)
    h.hold()
    h.send("low", priority=2)
    h.send("beyond", priority=5)  # the default level, 2
    h.send("high1", priority=1)
    h.send("high2", priority=1)
    h.backend.release.set()
    h.wait_for("low", "beyond", "high1", "high2")
    assert h.batches_after_hold() == [["high1", "high2"], ["low", "beyond"]]


def test_the_largest_priority_levels_load_and_order(make) -> None:  # type: ignore[no-untyped-def]
    """``priority_levels`` is a uint64: NVIDIA's L0_model_queue loads 2^64 - 1 levels with
    the default at 2^32 (a queue per level up front never finished loading)."""
    h = make(batching=f"priority_levels: {2**64 - 1} default_priority_level: {2**32}", max_batch=2)
    h.hold()
    h.send("default1")
    h.send("lower", priority=2**32 + 7)
    h.send("default2", priority=2**32)
    h.send("high", priority=1)
    h.send("lowest", priority=2**64 - 1)
    h.backend.release.set()
    h.wait_for("default1", "lower", "default2", "high", "lowest")
    assert h.batches_after_hold() == [["high", "default1"], ["default2", "lower"], ["lowest"]]


@pytest.mark.parametrize("key", ["priority", "timeout"])
@pytest.mark.parametrize("value", ["1", -1, 1.5, True])
def test_priority_and_timeout_must_be_unsigned_integers(make, key: str, value: object) -> None:  # type: ignore[no-untyped-def]
    # Triton's words (it answers 500; a client's mistake is a 400 here).
    h = make(batching="")
    with pytest.raises(
        tritonpy.TritonError, match=f"Unable to parse '{key}': attempt to access JSON"
    ) as info:
        h.send("bad", **{key: value})
    assert info.value.code.name == "INVALID_ARG"


def test_full_queue_rejects_and_counts_nothing(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="default_queue_policy { max_queue_size: 2 }")
    h.hold()
    h.send("q1")
    h.send("q2")
    with pytest.raises(tritonpy.TritonError) as info:
        h.send("q3")
    assert info.value.code.name == "UNAVAILABLE"
    assert info.value.message == "[request id: q3] Exceeds maximum queue size"  # Triton's words
    h.backend.release.set()
    h.wait_for("q1", "q2")
    # As Triton 2.51 (observed): a refused request never entered the model; no statistic counts it.
    (stats,) = h.server.model_statistics("m")
    assert stats["inference_stats"]["fail"]["count"] == 0
    assert stats["inference_stats"]["success"]["count"] == 3
    from tritonpy.metrics import Metrics

    text = Metrics(h.server.loaded_versions(), cpu=False, gpu=False).render()
    assert 'nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 0' in text


def test_expired_requests_are_rejected(make) -> None:  # type: ignore[no-untyped-def]
    # 0.2 s: the request that occupies the instance must start within the default too.
    h = make(batching="default_queue_policy { default_timeout_microseconds: 200000 }")
    h.hold()
    h.send("late1")
    h.send("late2")
    h.wait_for("late1", "late2")  # rejected while the instance is still busy
    for rid in ("late1", "late2"):
        error = h.responses[rid].error
        assert error is not None and error.message == "Request timeout expired"
    h.backend.release.set()
    h.wait_for("hold")
    assert h.batches_after_hold() == []


def test_timeout_override_and_delay_action(make) -> None:  # type: ignore[no-untyped-def]
    h = make(
        batching=(
            "default_queue_policy { timeout_action: DELAY allow_timeout_override: true "
            "default_timeout_microseconds: 30000000 }"
        ),
        max_batch=1,
    )
    h.hold()
    h.send("patient1")
    h.send("hasty", timeout=1)  # 1 µs: expires at once, is delayed behind the others
    h.send("patient2")
    h.backend.release.set()  # the batcher applies timeouts before it forms each batch
    h.wait_for("patient1", "hasty", "patient2")
    assert h.responses["hasty"].error is None
    assert h.batches_after_hold() == [["patient1"], ["patient2"], ["hasty"]]


def test_a_delayed_request_stays_ahead_of_lower_levels(make) -> None:  # type: ignore[no-untyped-def]
    """As Triton's PolicyQueue: a level's delayed requests go after that level's others
    and before the next level's, and a later arrival at their level goes before them
    (NVIDIA's L0_model_queue test_priority_with_policy)."""
    h = make(
        batching=(
            "priority_levels: 2 default_priority_level: 2 default_queue_policy { timeout_action: DELAY "
            "allow_timeout_override: true default_timeout_microseconds: 30000000 }"
        ),
        max_batch=1,
    )
    h.hold()
    h.send("hasty", priority=1, timeout=1)  # expires at once: delayed
    h.send("low", priority=2)
    h.send("high", priority=1)
    h.backend.release.set()
    h.wait_for("hasty", "low", "high")
    assert h.batches_after_hold() == [["high"], ["hasty"], ["low"]]


def test_a_request_timeout_only_shortens_the_default(make) -> None:  # type: ignore[no-untyped-def]
    # As Triton 2.51 (observed): with allow_timeout_override, a timeout longer than
    # default_timeout_microseconds does not extend it, and without a default timeout
    # the request's own is ignored.
    # The default (0.2 s) applies to the request that occupies the instance too: long
    # enough for it to start on a loaded machine (1 ms was not, once, in a
    # full run of the suite on two busy cores).
    h = make(
        batching="default_queue_policy { allow_timeout_override: true default_timeout_microseconds: 200000 }",
        max_batch=1,
    )
    h.hold()
    h.send("longer", timeout=30_000_000)
    h.wait_for("longer")  # expired after the default's 0.2 s, the instance still busy
    error = h.responses["longer"].error
    assert error is not None and error.message == "Request timeout expired"
    h.backend.release.set()
    h = make(batching="default_queue_policy { allow_timeout_override: true }", max_batch=1)
    h.hold()
    h.send("hasty", timeout=1)
    threading.Event().wait(0.05)
    assert "hasty" not in h.responses  # no default to shorten: it waits
    h.backend.release.set()
    h.wait_for("hasty")
    assert h.responses["hasty"].error is None


def test_preserve_ordering_across_instances(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="preserve_ordering: true", max_batch=1, instances=2)
    gate = threading.Event()
    h.backend.blockers["first"] = gate
    h.send("first")  # blocks on one instance
    h.send("second")  # executes on the other instance and finishes ...

    def executions() -> int:
        return int(h.server.model_statistics("m")[0]["execution_count"])

    for _ in range(3000):  # statistics are recorded just before a response is released
        if executions() == 1:
            break
        threading.Event().wait(0.01)
    assert executions() == 1 and ["second"] in h.backend.batches
    with h._done:
        h._done.wait_for(lambda: "second" in h.responses, 0.1)
    assert "second" not in h.responses  # ... but its response waits for "first"
    gate.set()
    h.wait_for("first", "second")
    assert h.order == ["first", "second"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is Linux's")
def test_the_batcher_thread_asks_for_precise_timeouts() -> None:
    # The batcher's timed waits are the queue delay: its thread's timer slack is 1 µs, not
    # Linux's default 50 µs (read back in the thread that set it).
    import ctypes

    from tritonpy.scheduler.dynamic import precise_timeouts

    got: list[object] = []

    def probe() -> None:
        libc = ctypes.CDLL(None)
        before = libc.prctl(30, 0, 0, 0, 0)  # PR_GET_TIMERSLACK
        got.extend([before, precise_timeouts(), libc.prctl(30, 0, 0, 0, 0)])

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert got[1:] == [True, 1000]
    assert got[0] != 1000  # the default it replaced


@pytest.mark.parametrize("batching", ["max_queue_delay_microseconds: 50", ""])
def test_many_threads_many_instances_every_request_answered_once(make, batching: str) -> None:  # type: ignore[no-untyped-def]
    """Requests from 8 threads, of two shapes, on 3 instances: every one is answered once,
    in batches of one shape within max_batch_size. (A wake-up lost between the leader,
    the idle workers and the arrivals would leave requests queued: the wait fails.)"""
    h = make(batching=batching, instances=3)
    ids = [f"t{t}-{i}" for t in range(8) for i in range(60)]

    def client(t: int) -> None:
        for i in range(60):
            h.send(f"t{t}-{i}", width=2 + (i % 2))

    threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    h.wait_for(*ids)
    batched = [rid for batch in h.backend.batches for rid in batch]
    assert sorted(batched) == sorted(ids)
    for batch in h.backend.batches:
        assert len(batch) <= 4
        assert len({int(rid.rsplit("-", 1)[1]) % 2 for rid in batch}) == 1, batch  # one shape
    assert all(h.responses[rid].error is None for rid in ids)


def test_stop_runs_what_is_queued_behind_busy_instances(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching="max_queue_delay_microseconds: 100", instances=2)
    h.backend.blockers["b1"] = threading.Event()
    h.hold()
    h.send("b1")  # the second instance, held too
    for rid in _ids(3):
        h.send(rid)
    stopping = threading.Thread(target=h.server.stop)
    stopping.start()
    h.backend.release.set()
    h.backend.blockers["b1"].set()
    stopping.join(30)
    assert not stopping.is_alive()
    h.wait_for("hold", "b1", *_ids(3))
    assert all(h.responses[rid].error is None for rid in _ids(3))


def _infer_here(h: Harness, request_id: str) -> InferenceResponse:
    """``request_id`` through the blocking in-process call (the caller may run it)."""
    request = h.server.model("m").create_request({"X": np.zeros((1, 2), np.float32)}, request_id=request_id)
    return h.server.infer(request)


def test_a_blocking_caller_runs_a_lone_request_itself(make) -> None:  # type: ignore[no-untyped-def]
    # Without a queue delay a lone request's batch is that request alone, formed at once:
    # the caller that waits for it runs it, with no hand-off to a worker and back.
    h = make()
    response = _infer_here(h, "alone")
    assert response.error is None and response.id == "alone"
    assert h.backend.batches == [["alone"]]
    assert h.backend.threads == [threading.current_thread().name]
    (stats,) = h.server.model_statistics("m")
    assert stats["execution_count"] == 1 and stats["inference_count"] == 1
    assert stats["batch_stats"][0]["batch_size"] == 1


def test_what_arrives_while_a_caller_runs_is_batched_after_it(make) -> None:  # type: ignore[no-untyped-def]
    h = make()
    gate = threading.Event()
    h.backend.blockers["caller"] = gate
    caller = threading.Thread(target=_infer_here, args=(h, "caller"), name="the-caller")
    caller.start()
    for _ in range(3000):  # until the caller runs it
        if h.backend.batches:
            break
        threading.Event().wait(0.005)
    for rid in ("a", "b", "c"):
        h.send(rid)  # queued: the one instance is the caller's
    threading.Event().wait(0.05)
    assert h.backend.batches == [["caller"]]
    gate.set()
    caller.join(30)
    h.wait_for("a", "b", "c")
    assert h.backend.batches == [["caller"], ["a", "b", "c"]]
    assert h.backend.threads[0] == "the-caller"
    assert h.backend.threads[1].startswith("tritonpy-")


def test_a_caller_on_the_leaders_instance_leaves_the_others_serving(make) -> None:  # type: ignore[no-untyped-def]
    h = make(instances=2, max_batch=1)
    gate = threading.Event()
    h.backend.blockers["caller"] = gate
    caller = threading.Thread(target=_infer_here, args=(h, "caller"))
    caller.start()
    for _ in range(3000):
        if h.backend.batches:
            break
        threading.Event().wait(0.005)
    h.send("other")  # runs on the second instance while the caller holds the first
    h.wait_for("other")
    assert not gate.is_set() and len(set(h.backend.instances)) == 2
    gate.set()
    caller.join(30)
    assert h.backend.batches == [["caller"], ["other"]]


def test_an_instance_freed_while_a_caller_holds_the_leaders_runs_what_queued(make) -> None:  # type: ignore[no-untyped-def]
    h = make(instances=2, max_batch=1)
    h.send("warm")  # its worker leads afterwards, on the instance a caller takes next
    h.wait_for("warm")
    batcher = h.server.get_version("m")._scheduler
    for _ in range(3000):  # until that worker is back, leading
        with batcher._cond:
            if len(batcher._idle) == 2 and batcher._leader == batcher._idle[-1]:
                break
        threading.Event().wait(0.005)
    held, busy = threading.Event(), threading.Event()
    h.backend.blockers.update(caller=held, busy=busy)
    caller = threading.Thread(target=_infer_here, args=(h, "caller"))
    caller.start()
    for _ in range(3000):
        if ["caller"] in h.backend.batches:
            break
        threading.Event().wait(0.005)
    h.send("busy")  # the leader hands it to the other instance
    for _ in range(3000):
        if ["busy"] in h.backend.batches:
            break
        threading.Event().wait(0.005)
    h.send("queued")  # no instance idle: it queues
    threading.Event().wait(0.05)  # the leader has looked, found no instance, and waits
    busy.set()  # the other instance is free: "queued" runs there, the caller still running
    h.wait_for("busy", "queued")
    assert not held.is_set()
    held.set()
    caller.join(30)


@pytest.mark.parametrize("batching", ["max_queue_delay_microseconds: 1000", "preserve_ordering: true"])
def test_no_caller_runs_its_request_where_the_batcher_must_decide(make, batching: str) -> None:  # type: ignore[no-untyped-def]
    # A queue delay may let others join the batch; ordering is kept across instances.
    h = make(batching=batching)
    assert _infer_here(h, "r").error is None
    assert h.backend.threads[0].startswith("tritonpy-")


def test_triton_delay_scheduler_holds_the_first_batch_until_that_many_are_queued(
    make, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """``TRITONSERVER_DELAY_SCHEDULER=3``, the switch NVIDIA's batcher tests set: with no
    queue delay the first request would run alone; held, the first three go together.
    Once released the batcher never holds again."""
    monkeypatch.setenv("TRITONSERVER_DELAY_SCHEDULER", "3")
    h = make()
    h.send("r0")
    h.send("r1")
    settle()
    assert h.backend.batches == []
    h.send("r2")
    h.wait_for("r0", "r1", "r2")
    h.send("r3")
    h.wait_for("r3")
    assert h.backend.batches == [["r0", "r1", "r2"], ["r3"]]


@pytest.mark.parametrize(("text", "count"), [("", 0), ("6", 6), (" 2x", 2), ("abc", 0), ("-4", 0), ("+3", 3)])
def test_the_delay_switch_is_read_as_triton_reads_it(
    monkeypatch: pytest.MonkeyPatch, text: str, count: int
) -> None:
    from tritonpy.scheduler.dynamic import held_until

    monkeypatch.setenv("TRITONSERVER_DELAY_SCHEDULER", text)
    assert held_until() == count


PREFERRED_2_6 = "preferred_batch_size: [2, 6] "


def test_a_request_at_or_past_the_largest_preferred_size_goes_at_once(make) -> None:  # type: ignore[no-untyped-def]
    # NVIDIA's test_static_batch_gt_max_preferred: 7 rows, preferred [2, 6], max 8.
    h = make(batching=PREFERRED_2_6 + LONG_DELAY, max_batch=8)
    h.send("seven", batch=7)
    h.wait_for("seven")


def test_a_batch_is_cut_before_the_request_that_takes_it_past_the_largest_preferred(make) -> None:  # type: ignore[no-untyped-def]
    h = make(batching=PREFERRED_2_6 + LONG_DELAY, max_batch=8)
    h.send("hold", batch=6)
    assert h.backend.holding.wait(30)
    h.send("a", batch=4)
    h.send("b", batch=4)  # 8 would fit max_batch_size, but passes 6
    h.backend.release.set()
    h.wait_for("a")
    settle()
    h.send("c", batch=2)  # 4 + 2: preferred
    h.wait_for("b", "c")
    assert h.batches_after_hold() == [["a"], ["b", "c"]]


@pytest.mark.parametrize(("delay", "batches"), [(0, [6, 1]), (1, [7])])
def test_once_the_delay_is_up_everything_that_fits_goes(make, delay: int, batches: list[int]) -> None:  # type: ignore[no-untyped-def]
    """As Triton: a preferred size cuts the batch while the oldest request may still
    wait; past its delay (1 µs here, long gone once the instance is free) the whole
    batch goes. Without a delay there is none to be past: the cut stays."""
    h = make(batching=f"{PREFERRED_2_6} max_queue_delay_microseconds: {delay}", max_batch=8)
    h.send("hold", batch=6)
    assert h.backend.holding.wait(30)
    for rid in _ids(7):
        h.send(rid)
    h.backend.release.set()
    h.wait_for(*_ids(7))
    assert [len(b) for b in h.batches_after_hold()] == batches
