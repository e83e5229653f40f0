"""``ensemble_scheduling.max_inflight_requests``: each step has at most that many requests
in flight at its member across the ensemble's requests; the rest wait in order, and a
waiting request whose ensemble request is cancelled is never sent."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_ensembles import StepBackend, serving, step, write_ensemble, write_step_model, write_streaming
from tritonpy_sdk import ErrorCode, TritonError

F = "TYPE_FP32"
FOUR = "instance_group [ { kind: KIND_CPU count: 4 } ]"


def write_repository(repo: Path) -> None:
    write_step_model(repo, "pre", add="1")
    # Two members alike (four instances, 0.15 s each): one behind a bound of 2, one not.
    write_step_model(repo, "slow", add="10", sleep="0.15", extra=FOUR)
    write_step_model(repo, "slow_free", add="10", sleep="0.15", extra=FOUR)
    chain = {"IN": F}, {"OUT": F}
    write_ensemble(
        repo,
        "bounded",
        [step("pre", {"X": "IN"}, {"Y": "t"}), step("slow", {"X": "t"}, {"Y": "OUT"})],
        *chain,
        max_inflight=2,
    )
    write_ensemble(
        repo,
        "unbounded",
        [step("pre", {"X": "IN"}, {"Y": "t"}), step("slow_free", {"X": "t"}, {"Y": "OUT"})],
        *chain,
    )
    # A decoupled member (3 responses) into a step that takes one at a time.
    write_streaming(repo, "streaming_bounded", max_inflight=1)
    write_step_model(repo, "held", add="5", sleep="0.5")
    # A member that takes rows of exactly 2: a wider one is refused when it is submitted.
    (repo / "pair" / "1").mkdir(parents=True)
    (repo / "pair" / "config.pbtxt").write_text(
        'backend: "stepbk"\nmax_batch_size: 8\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'parameters { key: "sleep" value: { string_value: "0.3" } }\n'
    )
    write_ensemble(repo, "pairs", [step("pair", {"X": "IN"}, {"Y": "OUT"})], *chain, max_inflight=1)
    write_ensemble(repo, "one_at_a_time", [step("held", {"X": "IN"}, {"Y": "OUT"})], *chain, max_inflight=1)


@pytest.fixture(scope="module")
def steps() -> StepBackend:
    return StepBackend()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, steps: StepBackend) -> Iterator[tritonpy.Server]:
    with serving(tmp_path_factory.mktemp("repo"), write_repository, steps) as server:
        yield server


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most of ``intervals`` that overlapped at any moment."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    now = peak = 0
    for _, change in events:
        now += change
        peak = max(peak, now)
    return peak


def run_at_once(server: tritonpy.Server, model: str, n: int) -> list[np.ndarray]:
    """``n`` requests to ``model`` from ``n`` threads at once; their outputs, in order."""
    outputs: list[np.ndarray | BaseException | None] = [None] * n

    def one(i: int) -> None:
        try:
            x = np.full((1, 2), float(i), np.float32)
            outputs[i] = server.model(model).predict({"IN": x})["OUT"]
        except BaseException as exc:  # checked below
            outputs[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not [o for o in outputs if not isinstance(o, np.ndarray)], outputs
    return [o for o in outputs if isinstance(o, np.ndarray)]


def test_a_bounded_step_never_has_more_requests_in_flight(
    server: tritonpy.Server, steps: StepBackend
) -> None:
    outputs = run_at_once(server, "bounded", 6)
    for i, out in enumerate(outputs):  # every request answered, with its own answer
        np.testing.assert_array_equal(out, np.full((1, 2), i + 11.0, np.float32))
    assert len(steps.log.intervals["slow"]) == 6
    assert most_at_once(steps.log.intervals["slow"]) == 2
    # The same member without the bound runs more at once: the bound is what held it.
    run_at_once(server, "unbounded", 6)
    assert most_at_once(steps.log.intervals["slow_free"]) > 2


def test_a_waiting_step_request_of_a_cancelled_request_is_never_sent(
    server: tritonpy.Server, steps: StepBackend
) -> None:
    model = server.model("one_at_a_time")
    gate = server.get_version("one_at_a_time")._scheduler.gates[0]  # type: ignore[union-attr]
    x = np.ones((1, 2), np.float32)
    first = threading.Thread(target=lambda: model.predict({"IN": x}, request_id="first"))
    first.start()
    waiting = model.create_request({"IN": x}, request_id="waiting")
    got: list[object] = []

    def second() -> None:
        try:
            got.append(server.infer(waiting))
        except TritonError as exc:
            got.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    deadline = time.monotonic() + 10
    while gate.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert gate.waiting == 1  # "waiting" is queued behind "first" at the step
    waiting.cancel()
    thread.join(10)
    assert len(got) == 1 and isinstance(got[0], TritonError) and got[0].code is ErrorCode.CANCELLED
    first.join(10)
    # The step ran "first" only; the next request goes through as usual.
    out = model.predict({"IN": x}, request_id="after")
    np.testing.assert_array_equal(out["OUT"], x + 5)
    ran = [s.id for s in steps.log.requests if s.model == "held"]
    assert ran == ["first", "after"]
    assert gate.waiting == 0


def test_a_decoupled_steps_responses_wait_their_turn(server: tritonpy.Server) -> None:
    a = np.array([[1, 2, 3, 4]], np.int32)
    b = np.array([[1, 1, 1, 1]], np.int32)
    for _ in range(3):
        responses = list(server.model("streaming_bounded").infer({"A": a, "B": b}, request_id="dec"))
        assert len(responses) == 3
        for r in responses:
            np.testing.assert_array_equal(r.outputs["OUT"].to_numpy(), a + 2 * b)
    gate = server.get_version("streaming_bounded")._scheduler.gates[1]  # type: ignore[union-attr]
    assert gate.waiting == 0


def test_many_waiting_requests_refused_by_the_member_each_get_its_error(server: tritonpy.Server) -> None:
    # One request holds the step; 400 more wait behind it, each refused by the member
    # when its turn comes (a row of 3). Each refusal frees the slot for the next: they
    # are sent one after another on one thread, and each ensemble request gets the
    # member's own error (a nested send per refusal would run out of stack).
    gate = server.get_version("pairs")._scheduler.gates[0]  # type: ignore[union-attr]
    model = server.model("pairs")
    holder = threading.Thread(target=lambda: model.predict({"IN": np.ones((1, 2), np.float32)}))
    holder.start()
    deadline = time.monotonic() + 10
    while gate._inflight == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    answers: list[object] = []
    done = threading.Event()

    def answered(response: object, flags: int) -> None:
        answers.append(response)
        if len(answers) == 400:
            done.set()

    for i in range(400):
        request = model.create_request({"IN": np.ones((1, 3), np.float32)}, request_id=f"wide{i}")
        server.submit(request, answered)
    assert gate.waiting == 400
    assert done.wait(30)
    holder.join(10)
    assert len(answers) == 400
    for response in answers:
        error = response.error  # type: ignore[attr-defined]
        assert error is not None and error.message.startswith("in ensemble 'pairs', [request id: wide")
        assert "unexpected shape for input 'X' for model 'pair'. Expected [-1,2], got [1,3]" in error.message
    assert gate.waiting == 0 and gate._inflight == 0  # no slot lost
    out = model.predict({"IN": np.ones((1, 2), np.float32)})
    np.testing.assert_array_equal(out["OUT"], np.ones((1, 2), np.float32))


def test_the_load_logs_the_bound_in_triton_s_words(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # NVIDIA's L0_simple_ensemble greps this line (case and all) to see the bound taken.
    caplog.set_level(logging.INFO)
    with serving(tmp_path, lambda repo: write_streaming(repo, "bounded_3", max_inflight=3), StepBackend()):
        pass
    assert "Ensemble model 'bounded_3' configured with max_inflight_requests: 3" in caplog.text
