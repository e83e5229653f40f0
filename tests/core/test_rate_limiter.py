"""--rate-limit execution_count: instances needing the same resource never execute together."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.scheduler.ratelimiter import Need, RateLimiter, parse_resource_flags
from tritonpy_sdk import (
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend
from tritonpy_wait import wait_until


class Gate(CpuBackend):
    def __init__(self) -> None:
        self.started: list[str] = []
        self.instances: list[str] = []
        self.entered = threading.Condition()
        self.release = threading.Event()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        with self.entered:
            self.started.append(instance.model.name)
            self.instances.append(instance.name)
            self.entered.notify_all()
        if instance.model.name == "first":
            assert self.release.wait(30)
        return self.echo(requests)


def _model(repo: Path, name: str, priority: int = 1) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(f"""
backend: "gate"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU
  rate_limiter {{ resources [ {{ name: "R" global: true count: 1 }} ] priority: {priority} }} }} ]
""")


def test_shared_resource_serialises_instances(tmp_path: Path) -> None:
    _model(tmp_path, "first")
    _model(tmp_path, "second")
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        one = threading.Thread(target=lambda: server.model("first").predict(x))
        one.start()
        two = threading.Thread(target=lambda: server.model("second").predict(x))
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            two.start()
            two.join(0.3)
            assert two.is_alive() and backend.started == ["first"]  # waiting for resource R
        finally:
            backend.release.set()
            one.join(30)
            if two.is_alive() or two.ident is not None:
                two.join(30)
        assert backend.started == ["first", "second"]
        (stats,) = server.model_statistics("second")
        assert stats["inference_stats"]["queue"]["ns"] > 0  # the wait counted as queue time


def test_without_rate_limiting_they_overlap(tmp_path: Path) -> None:
    _model(tmp_path, "first")
    _model(tmp_path, "second")
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        one = threading.Thread(target=lambda: server.model("first").predict(x))
        one.start()
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            server.model("second").predict(x)  # completes while "first" is still executing
            assert backend.started == ["first", "second"]
        finally:
            backend.release.set()
            one.join(30)


def test_capacity_and_flags() -> None:
    limiter = RateLimiter(parse_resource_flags(["R:2"]))
    big = Need((("R", 2, True),), 0)
    limiter.register(big)
    with pytest.raises(TritonError) as info:
        RateLimiter(parse_resource_flags(["R:1"])).register(big)
    assert info.value.message == (  # Triton's words
        'Resource count for "R" is limited to 1 which will prevent scheduling of one or more '
        "model instances, the minimum required count is 2"
    )
    with pytest.raises(TritonError, match="expects <name>:<count>"):
        parse_resource_flags(["R"])
    with limiter.lock:
        assert limiter.acquire("a", [big], lambda: None) == 0  # capacity 2 fits a need of 2
        assert limiter.acquire("b", [big], lambda: None) is None
        limiter.release(big)
        assert limiter.acquire("b", [big], lambda: None) == 0


def test_acquire_chooses_the_instance_whose_resources_fit() -> None:
    limiter = RateLimiter()
    r, s = Need((("R", 1, True),), 0), Need((("S", 1, False),), 0)
    for need in (r, s):
        limiter.register(need)
    woken: list[str] = []
    with limiter.lock:
        assert limiter.acquire("a", [r], lambda: woken.append("a")) == 0
        # "b" offers an instance needing R (taken) and one needing S: it gets the second.
        assert limiter.acquire("b", [r, s], lambda: woken.append("b")) == 1
        assert limiter.acquire("c", [r, s], lambda: woken.append("c")) is None  # both taken
        limiter.release(s)
        assert woken == ["c"]  # a waiter is woken when resources are released
        assert limiter.acquire("c", [r, s], lambda: woken.append("c")) == 1


def test_waiters_are_served_by_priority_then_arrival() -> None:
    limiter = RateLimiter()
    r = Need((("R", 1, True),), 0)
    low, high = Need((("R", 1, True),), 0, priority=2), Need((("R", 1, True),), 0, priority=1)
    other = Need((("T", 1, True),), 0, priority=3)
    for need in (r, low, high, other):
        limiter.register(need)
    with limiter.lock:
        assert limiter.acquire("holder", [r], lambda: None) == 0
        assert limiter.acquire("low", [low], lambda: None) is None  # waits first
        assert limiter.acquire("high", [high], lambda: None) is None
        limiter.release(r)
        assert limiter.acquire("low", [low], lambda: None) is None  # "high" goes first
        # A later, lower-priority waiter still runs on a resource no earlier waiter wants.
        assert limiter.acquire("other", [other], lambda: None) == 0
        assert limiter.acquire("high", [high], lambda: None) == 0
        limiter.release(high)
        assert limiter.acquire("low", [low], lambda: None) == 0
        # A waiter that withdraws no longer holds anyone back.
        limiter.release(low)
        assert limiter.acquire("high", [r], lambda: None) == 0
        assert limiter.acquire("high2", [high], lambda: None) is None
        limiter.release(r)
        limiter.withdraw("high2")
        assert limiter.acquire("low", [low], lambda: None) == 0


def test_a_busy_resource_does_not_hold_work_another_instance_can_run(tmp_path: Path) -> None:
    """The limiter picks the instance: while "first" holds R, requests to "second" run
    on its instance that needs nothing, none waits bound to the instance that needs R."""
    _model(tmp_path, "first")
    (tmp_path / "second" / "1").mkdir(parents=True)
    (tmp_path / "second" / "config.pbtxt").write_text("""
backend: "gate"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [
  { name: "needs_r" count: 1 kind: KIND_CPU
    rate_limiter { resources [ { name: "R" global: true count: 1 } ] } },
  { name: "free" count: 1 kind: KIND_CPU }
]
""")
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        one = threading.Thread(target=lambda: server.model("first").predict(x))
        one.start()
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            callers = [threading.Thread(target=lambda: server.model("second").predict(x)) for _ in range(4)]
            for caller in callers:
                caller.start()
            for caller in callers:
                caller.join(30)
            assert not any(c.is_alive() for c in callers)  # all answered while R is held
            assert backend.instances[1:] == ["free_0"] * 4
        finally:
            backend.release.set()
            one.join(30)


def test_priority_decides_which_model_runs_when_the_resource_frees(tmp_path: Path) -> None:
    _model(tmp_path, "first")
    _model(tmp_path, "low", priority=2)
    _model(tmp_path, "high", priority=1)
    backend = Gate()
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", backend)
    x = {"X": np.ones(1, np.float32)}
    with server:
        threads = [threading.Thread(target=lambda: server.model("first").predict(x))]
        threads[0].start()
        try:
            with backend.entered:
                assert backend.entered.wait_for(lambda: "first" in backend.started, 30)
            limiter = server.rate_limiter
            assert limiter is not None
            for waiting, name in enumerate(("low", "high"), 1):  # "low" waits first
                thread = threading.Thread(target=lambda n=name: server.model(n).predict(x))
                thread.start()
                threads.append(thread)
                # Its batcher asked the limiter (a queued request alone is not yet a waiter).
                wait_until(lambda w=waiting: limiter.waiting() == w, f"'{name}' waits for R")
        finally:
            backend.release.set()
            for thread in threads:
                thread.join(30)
        assert backend.started == ["first", "high", "low"]


def test_resources_belong_to_their_own_group_only(tmp_path: Path) -> None:
    """Group "g"'s resources are not given to the instances of group "g_big" (a name
    prefix match did that)."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text("""
backend: "gate"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [
  { name: "g_big" count: 1 kind: KIND_CPU },
  { name: "g" count: 2 kind: KIND_CPU rate_limiter { resources [ { name: "R" count: 1 } ] priority: 2 } }
]
""")
    server = tritonpy.Server(model_repository=tmp_path, rate_limit="execution_count")
    server.backends.register("gate", Gate())
    with server:
        mv = server.get_version("m")
        assert [i.name for i in mv.instances] == ["g_big_0", "g_0", "g_1"]
        assert mv.needs["g_0"].resources == (("R", 1, False),)
        assert mv.needs["g_0"].priority == 2
        assert mv.needs["g_big_0"].resources == ()  # its own (empty) group's, not "g"'s


class Counting(CpuBackend):
    """Counts how many executions run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.002)
        with self.lock:
            self.running -= 1
        return self.echo(requests, 2)


def test_many_models_share_a_resource_under_load(tmp_path: Path) -> None:
    """Three models (batching and not) with two instances each share R (2 units):
    every request is answered and never more than two executions run at once."""
    for name, batching in (("a", True), ("b", False), ("c", True)):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(f"""
backend: "count"
max_batch_size: {4 if batching else 0}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: 2 kind: KIND_CPU
  rate_limiter {{ resources [ {{ name: "R" global: true count: 1 }} ] }} }} ]
{"dynamic_batching { }" if batching else ""}
""")
    backend = Counting()
    server = tritonpy.Server(
        model_repository=tmp_path, rate_limit="execution_count", rate_limit_resource=["R:2"]
    )
    server.backends.register("count", backend)
    errors: list[BaseException] = []

    def client(name: str) -> None:
        try:
            for i in range(30):
                x = np.full((1, 1) if name != "b" else (1,), i, np.float32)
                out = server.model(name).predict({"X": x})
                np.testing.assert_array_equal(out["Y"], x * 2)
        except BaseException as exc:  # recorded and asserted on below
            errors.append(exc)

    with server:
        threads = [threading.Thread(target=client, args=(n,)) for n in "abcabc"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert 1 <= backend.most <= 2


def test_a_pool_shrinks_when_the_instance_that_needed_most_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    """As Triton's resource manager when instances are removed (a model update or an
    unload): the pool is the largest need left; ``--rate-limit-resource`` stays as set.
    Its verbose account is Triton's ``Max Resource Map``."""
    limiter = RateLimiter()
    four, three = Need((("R", 4, True),), 0), Need((("R", 3, True),), 0)
    caplog.set_level(logging.DEBUG, "tritonpy.ratelimiter")
    for need in (four, three):
        limiter.register(need)
    with limiter.lock:
        assert limiter.acquire("m", [four], lambda: None) == 0  # a pool of 4
        limiter.release(four)
    limiter.unregister(four)
    assert "Resource: R\t Count: 3" in caplog.text
    with limiter.lock:
        assert limiter.acquire("m", [four], lambda: None) is None  # 3 now: 4 never fits
        limiter.withdraw("m")
    flagged = RateLimiter(parse_resource_flags(["E:10"]))
    small, large = Need((("E", 2, False),), 0), Need((("E", 5, False),), 0)
    flagged.register(small)
    flagged.register(large)
    flagged.unregister(large)
    assert "Resource: E\t Count: 10" in caplog.records[-1].getMessage()


def test_flags_are_read_as_triton_reads_them() -> None:
    """Once any ``--rate-limit-resource`` is given, a resource no flag names has none; a
    device's pool takes the most of its own flag and the per-device one; a global pool
    the most any flag gives its name, on whatever device (NVIDIA's L0_rate_limiter)."""
    flags = parse_resource_flags(["R:10:10", "S:2", "T:3:0", "T:5", "G:4:9"])
    limiter = RateLimiter(flags)
    with pytest.raises(TritonError, match='"R" is limited to 0 .* the minimum required count is 4$'):
        limiter.register(Need((("R", 4, False),), 0))  # R only on device 10
    with pytest.raises(TritonError, match='"U" is limited to 0 '):
        limiter.register(Need((("U", 1, True),), 0))  # no flag names U
    limiter.register(Need((("T", 5, False),), 0))  # max(T on device 0: 3, per device: 5)
    limiter.register(Need((("G", 4, True),), 0))  # a global G: device 9's flag counts
    limiter.register(Need((("R", 10, False),), 10))
    with pytest.raises(TritonError, match='"S" is limited to 2 '):
        limiter.register(Need((("S", 3, False),), 1))


def test_a_resource_is_global_or_per_device_across_the_server() -> None:
    limiter = RateLimiter()
    limiter.register(Need((("R", 1, True),), 0))
    with pytest.raises(TritonError) as info:
        limiter.register(Need((("S", 1, False), ("R", 2, False)), 0))
    assert info.value.message == (  # Triton's words
        'Resource "R" is present as both global and device-specific resource in the model configuration.'
    )
    limiter.register(Need((("S", 1, False),), 0))  # the refused need changed nothing
    with pytest.raises(TritonError, match='"S" is present as both'):
        limiter.register(Need((("S", 1, True),), 1))
