"""Triton's model update: a load that changes only the instance groups keeps the model
and the instances the new groups keep, starts the new ones and finalizes the rest
(NVIDIA's L0_model_update checks these counts); anything else reloads the model."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend


class Counting(CpuBackend):
    """Echo; counts model and instance (de)initializations, and which instance ran what."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        # Instances start in parallel, as the Python backend's do (an update may start none).
        return BackendInfo(default_instance_kind="KIND_CPU", parallel_instance_init=True)

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.live: list[str] = []
        self.ran: Counter[str] = Counter()
        self._lock = threading.Lock()
        #: Notified whenever ``calls`` changes (a reload finalizes on a thread of its own).
        self.changed = threading.Condition(self._lock)
        #: A request with id "slow" runs until ``finish_slow`` is set.
        self.running_slow = threading.Event()
        self.finish_slow = threading.Event()

    @hookimpl
    def model_initialize(self, model: Model) -> None:
        with self.changed:
            self.calls["model_initialize"] += 1
            self.changed.notify_all()

    @hookimpl
    def model_finalize(self, model: Model) -> None:
        with self.changed:
            self.calls["model_finalize"] += 1
            self.changed.notify_all()

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        if instance.model.parameters.get("fail_new") and self.calls["instance_initialize"] >= 1:
            raise TritonError.internal("no room for another instance")
        with self.changed:
            self.calls["instance_initialize"] += 1
            self.live.append(instance.name)
            self.changed.notify_all()

    @hookimpl
    def instance_finalize(self, instance: ModelInstance) -> None:
        with self.changed:
            self.calls["instance_finalize"] += 1
            self.live.remove(instance.name)
            self.changed.notify_all()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        with self._lock:
            self.ran[instance.name] += 1
        if any(r.id == "slow" for r in requests):
            self.running_slow.set()
            assert self.finish_slow.wait(30)
        return self.echo(requests)


def _config(groups: str, extra: str = "") -> str:
    return f"""
backend: "counting"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
instance_group [ {groups} ]
{extra}
"""


CPU = "{{ count: {n} kind: KIND_CPU }}"


class Harness:
    def __init__(self, root: Path, groups: str, extra: str = "", **options: Any) -> None:
        self.folder = root / "m"
        (self.folder / "1").mkdir(parents=True)
        (self.folder / "1" / "model.bin").write_bytes(b"weights")
        self.write(groups, extra)
        self.backend = Counting()
        self.server = tritonpy.Server(
            model_repository=root, model_control_mode="explicit", load_model=["m"], **options
        )
        self.server.backends.register("counting", self.backend)
        self.server.start()

    def write(self, groups: str, extra: str = "") -> None:
        (self.folder / "config.pbtxt").write_text(_config(groups, extra))

    def infer(self) -> np.ndarray:
        x = np.array([[1, 2]], np.float32)
        return self.server.model("m").predict({"X": x})["Y"]

    def infer_slow(self) -> threading.Thread:
        """A request that holds its instance until ``backend.finish_slow`` is set."""
        x = np.array([[1, 2]], np.float32)
        thread = threading.Thread(target=lambda: self.server.model("m").infer({"X": x}, request_id="slow"))
        thread.start()
        assert self.backend.running_slow.wait(30)
        return thread

    def counts(self) -> tuple[int, int, int, int]:
        c = self.backend.calls
        return c["model_initialize"], c["model_finalize"], c["instance_initialize"], c["instance_finalize"]


def _counts_become(h: Harness, expected: tuple[int, int, int, int]) -> None:
    """Wait for the backend's counts to be ``expected``: a reload finalizes what it
    replaced on a thread of its own, after the load returned."""
    with h.backend.changed:
        assert h.backend.changed.wait_for(lambda: h.counts() == expected, 30), h.counts()


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def factory(groups: str, extra: str = "", **options: Any) -> Harness:
        h = Harness(tmp_path / str(len(made)), groups, extra, **options)
        made.append(h)
        return h

    yield factory
    for h in made:
        h.server.stop()


def test_adding_and_removing_instances_keeps_the_model_and_the_instances_kept(make: Any) -> None:
    h = make(CPU.format(n=2))
    assert h.counts() == (1, 0, 2, 0)
    h.write(CPU.format(n=3))
    h.server.load_model("m")
    assert h.counts() == (1, 0, 3, 0)  # one instance started; the model and the others stay
    assert sorted(h.backend.live) == ["m_0_0", "m_0_1", "m_0_2"]
    h.infer()
    h.write(CPU.format(n=1))
    h.server.load_model("m")
    assert h.counts() == (1, 0, 3, 2)  # two finalized by the time the load returns
    assert h.backend.live == ["m_0_0"]
    np.testing.assert_array_equal(h.infer(), [[1, 2]])
    config = h.server.model_config("m")
    assert [(g["count"], g["kind"]) for g in config["instance_group"]] == [(1, "KIND_CPU")]
    h.server.unload_model("m")
    h.server.stop()
    assert h.counts() == (1, 1, 3, 3)


def test_an_unchanged_instance_group_in_other_words_changes_nothing(make: Any) -> None:
    # Triton's signature: a group's settings but its name and count. Two groups of one
    # CPU instance each are the one group of two, renamed.
    h = make('{ name: "a" count: 2 kind: KIND_CPU }')
    h.write('{ name: "b" count: 1 kind: KIND_CPU }, { name: "c" count: 1 kind: KIND_CPU }')
    h.server.load_model("m")
    assert h.counts() == (1, 0, 2, 0)
    assert sorted(h.backend.live) == ["a_0", "a_1"]  # kept, with their names
    h.infer()


def test_statistics_go_on_across_an_update(make: Any) -> None:
    h = make(CPU.format(n=1))
    for _ in range(3):
        h.infer()
    h.write(CPU.format(n=2))
    h.server.load_model("m")
    h.infer()
    (stats,) = h.server.model_statistics("m")
    assert stats["inference_count"] == 4


def test_requests_during_an_update_are_all_answered(make: Any) -> None:
    h = make(CPU.format(n=2))
    errors: list[BaseException] = []
    answered = [0]
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                np.testing.assert_array_equal(h.infer(), [[1, 2]])
                answered[0] += 1
            except BaseException as exc:  # noqa: BLE001 - every failure is the test's
                errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for n in (3, 1, 4, 2):
            h.write(CPU.format(n=n))
            h.server.load_model("m")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:3]
    assert answered[0] > 0
    assert h.counts()[:2] == (1, 0)
    assert len(h.backend.live) == 2


def test_another_config_change_reloads_the_model(make: Any) -> None:
    h = make(CPU.format(n=1))
    h.write(CPU.format(n=2), extra="dynamic_batching { }")
    h.server.load_model("m")
    _counts_become(h, (2, 1, 3, 1))  # a new model with two instances; the old one gone
    assert "dynamic_batching" in h.server.model_config("m")


def test_a_changed_model_file_reloads_the_model(make: Any) -> None:
    h = make(CPU.format(n=1))
    (h.folder / "1" / "model.bin").write_bytes(b"new weights")
    h.write(CPU.format(n=2))
    h.server.load_model("m")
    _counts_become(h, (2, 1, 3, 1))


def test_a_config_given_to_the_load_updates_too(make: Any) -> None:
    h = make(CPU.format(n=1))
    config = h.server.model_config("m")
    config["instance_group"][0]["count"] = 3  # NVIDIA's test_load_api_with_config
    h.server.load_model("m", config=json.dumps(config))
    assert h.counts() == (1, 0, 3, 0)
    assert h.server.model_config("m")["instance_group"][0]["count"] == 3


def test_an_update_that_fails_leaves_the_model_serving_as_it_was(make: Any) -> None:
    h = make(CPU.format(n=1), extra='parameters { key: "fail_new" value { string_value: "yes" } }')
    h.write(CPU.format(n=2), extra='parameters { key: "fail_new" value { string_value: "yes" } }')
    with pytest.raises(TritonError, match="no room for another instance"):
        h.server.load_model("m")
    assert h.counts() == (1, 0, 1, 0)
    assert h.server.model_config("m")["instance_group"][0]["count"] == 1
    np.testing.assert_array_equal(h.infer(), [[1, 2]])


def test_an_invalid_instance_group_fails_the_load_and_the_model_serves_on(make: Any) -> None:
    h = make(CPU.format(n=2))
    h.write("{ count: 1 kind: KIND_GPU gpus: [ 7 ] }")
    with pytest.raises(TritonError):
        h.server.load_model("m")
    assert h.counts() == (1, 0, 2, 0)
    h.infer()


def test_an_added_instance_serves_while_a_kept_one_finishes_its_batch(make: Any) -> None:
    """NVIDIA's test_update_while_inferencing: adding does not wait for the batches that
    run; the new instance takes requests at once; the kept one takes none until its
    batch under the previous instance set has ended."""
    h = make(CPU.format(n=1))
    slow = h.infer_slow()
    h.write(CPU.format(n=2))
    h.server.load_model("m")  # returns with the slow batch still running
    assert slow.is_alive()
    np.testing.assert_array_equal(h.infer(), [[1, 2]])
    assert h.backend.ran["m_0_1"] == 1  # the new instance; m_0_0 still runs "slow"
    h.backend.finish_slow.set()
    slow.join(30)
    assert h.server.model("m").ready()
    for _ in range(4):
        h.infer()


def test_a_removed_instance_is_finalized_once_its_batch_ends(make: Any) -> None:
    h = make(CPU.format(n=2))
    slow = h.infer_slow()
    busy = next(name for name, n in h.backend.ran.items() if n)
    h.write(CPU.format(n=1))
    loading = threading.Thread(target=h.server.load_model, args=("m",))
    loading.start()
    loading.join(0.3)
    assert loading.is_alive() and h.counts() == (1, 0, 2, 0)  # waits for the batch to end
    h.backend.finish_slow.set()
    slow.join(30)
    loading.join(30)
    assert h.counts() == (1, 0, 2, 1)
    assert len(h.backend.live) == 1
    np.testing.assert_array_equal(h.infer(), [[1, 2]])
    assert busy  # the instance that ran "slow" was either kept or removed: both are fine


def test_an_update_after_a_failed_load_is_still_an_update(make: Any) -> None:
    # NVIDIA's test_invalid_config.
    h = make(CPU.format(n=4))
    (h.folder / "config.pbtxt").write_text("--- invalid config ---")
    with pytest.raises(TritonError):
        h.server.load_model("m")
    h.write(CPU.format(n=2))
    h.server.load_model("m")
    assert h.counts() == (1, 0, 4, 2)


def test_a_sequence_model_is_updated_when_no_sequence_is_live(make: Any) -> None:
    # NVIDIA's test_*_scheduler_update_no_ongoing_sequences; with a live sequence the
    # model is loaded anew (Triton keeps the sequence on its instance: a difference).
    h = make(CPU.format(n=2), extra="sequence_batching { }")
    x = {"X": np.array([[1, 2]], np.float32)}
    model = h.server.model("m")
    list(model.infer(x, parameters={"sequence_id": 1, "sequence_start": True}))
    list(model.infer(x, parameters={"sequence_id": 1, "sequence_end": True}))
    h.write(CPU.format(n=3), extra="sequence_batching { }")
    h.server.load_model("m")
    assert h.counts() == (1, 0, 3, 0)
    list(h.server.model("m").infer(x, parameters={"sequence_id": 2, "sequence_start": True}))
    h.write(CPU.format(n=1), extra="sequence_batching { }")
    h.server.load_model("m")  # sequence 2 is live
    _counts_become(h, (2, 1, 4, 3))


def test_an_update_asking_more_than_an_explicit_resource_has_fails_before_starting_anything(
    make: Any,
) -> None:
    # NVIDIA's test_instance_resource_increase_above_explicit.
    limited = '{{ count: {n} kind: KIND_CPU rate_limiter {{ resources [ {{ name: "R1" count: {r} }} ] }} }}'
    h = make(limited.format(n=1, r=2), rate_limit="execution_count", rate_limit_resource=["R1:10"])
    h.write(limited.format(n=2, r=32))
    with pytest.raises(TritonError, match="R1"):
        h.server.load_model("m")
    assert h.counts() == (1, 0, 1, 0)
    h.write(limited.format(n=1, r=10))  # other settings: a new instance for the old one
    h.server.load_model("m")
    assert h.counts() == (1, 0, 2, 1)
    np.testing.assert_array_equal(h.infer(), [[1, 2]])
