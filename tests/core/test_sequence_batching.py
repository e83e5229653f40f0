"""The sequence batcher through the in-process API: an accumulator backend over many
interleaved sequences (direct and oldest, several instances), correlation ids of both
types, Triton's refusals, the backlog, idle sequences, null requests, statistics."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    SEQUENCE_END,
    SEQUENCE_START,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend


def _scalar(request: InferenceRequest, name: str) -> Any:
    return request.inputs[name].data.reshape(-1)[0]


class Accumulator(CpuBackend):
    """Y = the running sum of X over the sequence, as Triton's ``simple_sequence``:
    START resets it, READY false leaves it alone. The sum lives in the backend, keyed by
    batch position (direct: a sequence keeps its slot) or by CORRID (``by_corrid``).
    Records every batch as (instance, [(corrid, ready, start, end)]); ``gate`` (when
    set) is waited on before each execution."""

    def __init__(self, by_corrid: bool = False) -> None:
        self.by_corrid = by_corrid
        self.sums: dict[tuple[str, Any], int] = {}
        self.batches: list[tuple[str, list[tuple[Any, bool, bool, bool]]]] = []
        self.gate: threading.Event | None = None
        self._lock = threading.Lock()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        if self.gate is not None:
            assert self.gate.wait(30)
        seen = []
        out = []
        for pos, r in enumerate(requests):
            ready = bool(_scalar(r, "READY"))
            start = bool(_scalar(r, "START"))
            end = bool(_scalar(r, "END"))
            corrid = _scalar(r, "CORRID")
            corrid = corrid.decode() if isinstance(corrid, bytes) else int(corrid)
            seen.append((corrid, ready, start, end))
            key = (instance.name, corrid if self.by_corrid else pos)
            x = int(_scalar(r, "X"))
            with self._lock:
                if ready:
                    self.sums[key] = x if start else self.sums.get(key, 0) + x
                y = self.sums.get(key, 0)
            out.append(InferenceResponse({"Y": Tensor.from_numpy("Y", np.array([[y]], np.int32))}))
        with self._lock:
            self.batches.append((instance.name, seen))
        return out


CONFIG = """
backend: "acc"
max_batch_size: {max_batch}
input [ {{ name: "X" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: {instances}, kind: KIND_CPU }} ]
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  {strategy}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
  ]
}}
"""


class Harness:
    def __init__(
        self,
        root: Path,
        strategy: str = "direct { }",
        max_batch: int = 4,
        instances: int = 2,
        corrid: str = "TYPE_UINT64",
        idle_us: int = 10_000_000,
        by_corrid: bool = False,
    ) -> None:
        (root / "m" / "1").mkdir(parents=True)
        (root / "m" / "config.pbtxt").write_text(
            CONFIG.format(
                max_batch=max_batch, instances=instances, strategy=strategy, corrid=corrid, idle_us=idle_us
            )
        )
        self.backend = Accumulator(by_corrid=by_corrid)
        self.server = tritonpy.Server(model_repository=root, model_control_mode="explicit", load_model=["m"])
        self.server.backends.register("acc", self.backend)
        self.server.start()
        self.model = self.server.model("m")

    def infer(self, x: int, **parameters: Any) -> int:
        (response,) = self.model.infer({"X": np.array([[x]], np.int32)}, parameters=parameters)
        return int(response.outputs["Y"].data.reshape(-1)[0])

    def close(self) -> None:
        if self.backend.gate is not None:
            self.backend.gate.set()
        self.server.stop()


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    made: list[Harness] = []

    def factory(**kwargs: Any) -> Harness:
        h = Harness(tmp_path / str(len(made)), **kwargs)
        made.append(h)
        return h

    yield factory
    for h in made:
        h.close()


def _run_sequences(h: Harness, ids: list[Any], steps: int, workers: int = 8) -> None:
    """Run one sequence per id, interleaved from ``workers`` threads; each answer must
    be the running sum of that sequence alone."""
    rng = random.Random(7)
    values = {sid: [rng.randrange(1, 100) for _ in range(steps)] for sid in ids}

    def run(sid: Any) -> list[int]:
        got = []
        for i, x in enumerate(values[sid]):
            params: dict[str, Any] = {"sequence_id": sid}
            if i == 0:
                params["sequence_start"] = True
            if i == steps - 1:
                params["sequence_end"] = True
            got.append(h.infer(x, **params))
            time.sleep(rng.random() / 1000)
        return got

    with ThreadPoolExecutor(workers) as pool:
        results = dict(zip(ids, pool.map(run, ids)))
    for sid in ids:
        assert results[sid] == list(np.cumsum(values[sid])), sid


@pytest.mark.parametrize(
    "strategy, by_corrid",
    [
        ("direct { }", False),
        ("oldest { max_candidate_sequences: 3 }", True),
        (
            "oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] "
            "max_queue_delay_microseconds: 500 }",
            True,
        ),
    ],
)
def test_interleaved_sequences_accumulate_independently(make: Any, strategy: str, by_corrid: bool) -> None:
    # 16 sequences on 2 instances with 6 or 8 slots: some wait in the backlog.
    h = make(strategy=strategy, by_corrid=by_corrid)
    _run_sequences(h, list(range(1, 17)), steps=6)
    instances = {name for name, _ in h.backend.batches}
    assert instances == {"m_0_0", "m_0_1"}
    (stats,) = h.server.model_statistics("m")
    assert stats["inference_count"] == 16 * 6


def test_string_correlation_ids(make: Any) -> None:
    h = make(corrid="TYPE_STRING")
    _run_sequences(h, [f"user-{i}" for i in range(10)], steps=4)
    assert {c for _, batch in h.backend.batches for c, ready, _, _ in batch if ready} == {
        f"user-{i}" for i in range(10)
    }


def test_uint64_ids_to_the_largest(make: Any) -> None:
    h = make(instances=1)
    big = 2**64 - 1
    assert h.infer(3, sequence_id=big, sequence_start=True) == 3
    assert h.infer(4, sequence_id=big, sequence_end=True) == 7
    assert [c for _, batch in h.backend.batches for c, *_ in batch] == [big, big]


def test_control_values_as_configured(make: Any) -> None:
    h = make(instances=1)
    h.infer(1, sequence_id=5, sequence_start=True)
    h.infer(1, sequence_id=5)
    h.infer(1, sequence_id=5, sequence_end=True)
    assert [batch for _, batch in h.backend.batches] == [
        [(5, True, True, False)],
        [(5, True, False, False)],
        [(5, True, False, True)],
    ]


def test_in_process_request_fields_and_flags(make: Any) -> None:
    # In process (and BLS), correlation_id and flags may be set on the request itself.
    h = make(instances=1)

    def request(x: int, flags: int) -> InferenceRequest:
        r = h.model.create_request({"X": np.array([[x]], np.int32)})
        r.correlation_id, r.flags = 42, flags
        return r

    assert next(h.model.infer(request(2, SEQUENCE_START))).outputs["Y"].data.tolist() == [[2]]
    assert next(h.model.infer(request(5, SEQUENCE_END))).outputs["Y"].data.tolist() == [[7]]


# Triton 2.51's messages (HTTP 400 / gRPC INVALID_ARGUMENT), as the reference server answers.
NO_ID = "inference request to model 'm' must specify a non-zero or non-empty correlation ID"
BATCH = "inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher"


def _no_start(sid: Any) -> str:
    return (
        f"inference request for sequence {sid} to model 'm' must specify the START flag on the first "
        "request of the sequence"
    )


def _refusal(h: Harness, x: int = 1, batch: int = 1, **parameters: Any) -> str:
    with pytest.raises(TritonError) as info:
        next(h.model.infer({"X": np.full((batch, 1), x, np.int32)}, parameters=parameters))
    assert info.value.code.name == "INVALID_ARG"
    return info.value.message


def test_refusals_in_tritons_words(make: Any) -> None:
    h = make(instances=1)
    assert _refusal(h) == NO_ID
    assert _refusal(h, sequence_id=0, sequence_start=True) == NO_ID
    assert _refusal(h, sequence_id=77) == _no_start(77)
    assert _refusal(h, batch=2, sequence_id=8, sequence_start=True) == BATCH
    h.infer(1, sequence_id=11, sequence_start=True, sequence_end=True)
    assert _refusal(h, sequence_id=11) == _no_start(11)  # ended: a new sequence needs START
    assert _refusal(h, sequence_id=5, sequence_start=1) == (
        "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"
    )
    assert _refusal(h, sequence_id=-3, sequence_start=True).startswith("Unable to parse 'sequence_id'")
    # As later Triton releases word it (NVIDIA's L0_sequence_corrid_batcher).
    assert _refusal(h, sequence_id="abc", sequence_start=True) == (
        "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'BYTES', "
        "but model 'm' expects 'UINT64'"
    )


def test_ids_a_narrow_corrid_cannot_hold_are_refused(make: Any) -> None:
    h = make(instances=1, corrid="TYPE_INT32")
    assert "cannot hold" in _refusal(h, sequence_id=2**31, sequence_start=True)
    assert h.infer(3, sequence_id=2**31 - 1, sequence_start=True, sequence_end=True) == 3


def test_an_int64_corrid_gets_the_64_bits_of_an_unsigned_id(make: Any) -> None:
    """A gRPC client's negative id (taken as its unsigned value) reaches an INT64 control as
    sent, as Triton copies the id's bits; UINT64 gets the unsigned value."""
    h = make(instances=1, corrid="TYPE_INT64")
    assert h.infer(5, sequence_id=2**64 - 3, sequence_start=True, sequence_end=True) == 5
    assert h.backend.batches[-1][1][0][0] == -3
    u = make(instances=1, corrid="TYPE_UINT64")
    assert u.infer(5, sequence_id=2**64 - 3, sequence_start=True, sequence_end=True) == 5
    assert u.backend.batches[-1][1][0][0] == 2**64 - 3


def test_string_model_refusals(make: Any) -> None:
    h = make(instances=1, corrid="TYPE_STRING")
    assert _refusal(h, sequence_id="", sequence_start=True) == NO_ID
    assert _refusal(h, sequence_id="zz") == _no_start("zz")
    # An integer id for a TYPE_STRING CORRID is refused, as later Triton releases do.
    assert _refusal(h, sequence_id=12, sequence_start=True) == (
        "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', "
        "but model 'm' expects 'BYTES'"
    )
    assert h.infer(4, sequence_id="12", sequence_start=True, sequence_end=True) == 4


def test_start_again_restarts_in_the_same_slot(make: Any) -> None:
    h = make(instances=1)
    assert h.infer(5, sequence_id=1, sequence_start=True) == 5
    assert h.infer(6, sequence_id=1, sequence_start=True) == 6
    assert h.infer(1, sequence_id=1, sequence_end=True) == 7


def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn(*args, **kwargs)), daemon=True)
    t.start()
    return t, box


def test_backlog_waits_for_a_free_slot(make: Any) -> None:
    h = make(instances=1, max_batch=1)  # one slot in all
    assert h.infer(1, sequence_id=1, sequence_start=True) == 1
    t, box = _in_thread(h.infer, 10, sequence_id=2, sequence_start=True)
    t.join(0.3)
    assert t.is_alive() and not box  # sequence 2 waits in the backlog
    assert h.infer(2, sequence_id=1, sequence_end=True) == 3
    t.join(10)
    assert box == [10]
    assert h.infer(5, sequence_id=2, sequence_end=True) == 15


def _until_refused(h: Harness, sid: Any, idle_s: float) -> str:
    """Send non-START requests of ``sid``, each after more than ``idle_s`` of silence,
    until the server has forgotten it (each request it takes keeps it alive)."""
    for attempt in range(1, 6):
        time.sleep(idle_s * (1 + attempt))
        try:
            h.infer(0, sequence_id=sid)
        except TritonError as exc:
            return exc.message
    raise AssertionError(f"sequence {sid} never idled out")


def test_idle_sequence_is_released_and_its_slot_reused(make: Any) -> None:
    h = make(instances=1, max_batch=1, idle_us=300_000)
    h.infer(1, sequence_id=1, sequence_start=True)
    t, box = _in_thread(h.infer, 7, sequence_id=2, sequence_start=True)
    t.join(10)  # sequence 1 idles out: its slot goes to sequence 2
    assert box == [7]
    time.sleep(0.1)
    assert h.infer(1, sequence_id=2) == 8  # still live: a request keeps it from idling
    assert _until_refused(h, 1, 0.3) == _no_start(1)


def test_idle_timeout_forgets_the_sequence(make: Any) -> None:
    h = make(instances=1, idle_us=200_000)
    h.infer(1, sequence_id=9, sequence_start=True)
    assert _until_refused(h, 9, 0.2) == _no_start(9)


def test_direct_batches_pad_empty_slots_with_null_requests(make: Any) -> None:
    h = make(instances=1)
    h.infer(1, sequence_id=10, sequence_start=True)  # slot 0
    h.infer(1, sequence_id=11, sequence_start=True)  # slot 1
    h.infer(1, sequence_id=10, sequence_end=True)  # slot 0 free again
    assert h.infer(5, sequence_id=11) == 6
    assert h.backend.batches[-1][1] == [(0, False, False, False), (11, True, False, False)]
    (stats,) = h.server.model_statistics("m")
    # As Triton: null requests count in the batch size, not as inferences (slot 1's
    # START ran beside slot 0's null request too).
    assert stats["inference_count"] == 4 and stats["execution_count"] == 4
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [(1, 2), (2, 2)]
    assert stats["inference_stats"]["success"]["count"] == 4


def test_direct_waits_for_minimum_slot_utilization(make: Any) -> None:
    h = make(
        instances=1,
        strategy="direct { max_queue_delay_microseconds: 20000000 minimum_slot_utilization: 0.5 }",
    )
    t1, box1 = _in_thread(h.infer, 1, sequence_id=1, sequence_start=True)
    t1.join(0.3)
    assert t1.is_alive()  # 1 ready slot of 4: below 0.5, the batch waits
    t2, box2 = _in_thread(h.infer, 2, sequence_id=2, sequence_start=True)
    t1.join(10)
    t2.join(10)
    assert box1 == [1] and box2 == [2]
    assert [len(b) for _, b in h.backend.batches] == [2]


def test_oldest_sends_a_preferred_batch_at_once(make: Any) -> None:
    h = make(
        instances=1,
        by_corrid=True,
        strategy="oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] "
        "max_queue_delay_microseconds: 20000000 }",
    )
    t1, box1 = _in_thread(h.infer, 1, sequence_id=1, sequence_start=True)
    t1.join(0.3)
    assert t1.is_alive()  # one request: waits for the preferred size or the delay
    t2, box2 = _in_thread(h.infer, 2, sequence_id=2, sequence_start=True)
    t1.join(10)
    t2.join(10)
    assert box1 == [1] and box2 == [2]
    assert [sorted(c for c, *_ in b) for _, b in h.backend.batches] == [[1, 2]]


def test_oldest_batches_hold_one_request_per_sequence(make: Any) -> None:
    h = make(instances=1, by_corrid=True, strategy="oldest { max_candidate_sequences: 4 }")
    h.backend.gate = threading.Event()
    threads = [_in_thread(h.infer, 1, sequence_id=1, sequence_start=True)[0]]
    time.sleep(0.1)
    threads += [_in_thread(h.infer, 1, sequence_id=1)[0] for _ in range(2)]
    threads += [_in_thread(h.infer, 1, sequence_id=2, sequence_start=True)[0]]
    time.sleep(0.2)
    h.backend.gate.set()
    for t in threads:
        t.join(10)
    for _, batch in h.backend.batches:
        ids = [c for c, *_ in batch]
        assert len(ids) == len(set(ids)), h.backend.batches


def test_unload_answers_the_backlog(make: Any) -> None:
    h = make(instances=1, max_batch=1)
    h.infer(1, sequence_id=1, sequence_start=True)
    t, box = _in_thread(lambda: _refusal_any(h, sequence_id=2, sequence_start=True))
    time.sleep(0.2)
    h.server.unload_model("m")
    t.join(10)
    assert box and "not accepting requests" in box[0]


def _refusal_any(h: Harness, **parameters: Any) -> str:
    try:
        h.infer(1, **parameters)
    except TritonError as exc:
        return exc.message
    return ""


class Iterating(CpuBackend):
    """Hands each request back (``request.reschedule()``) until it ran X times, then
    answers Y = its runs. Records (corrid, start, ready) of every execution."""

    def __init__(self, answer_anyway: bool = False) -> None:
        self.runs: dict[int, int] = {}
        self.seen: list[tuple[int, bool, bool]] = []
        #: Also answer the requests it hands back (breaking the contract).
        self.answer_anyway = answer_anyway

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse | None]:
        out: list[InferenceResponse | None] = []
        for r in requests:
            corrid = int(_scalar(r, "CORRID"))
            self.seen.append((corrid, bool(_scalar(r, "START")), bool(_scalar(r, "READY"))))
            runs = self.runs[corrid] = self.runs.get(corrid, 0) + 1
            if runs < int(_scalar(r, "X")):
                r.reschedule()
                y = InferenceResponse({"Y": Tensor.from_numpy("Y", np.array([[-runs]], np.int32))})
                out.append(y if self.answer_anyway else None)
            else:
                out.append(InferenceResponse({"Y": Tensor.from_numpy("Y", np.array([[runs]], np.int32))}))
        return out


def _iterating(
    tmp_path: Path, strategy: str, answer_anyway: bool = False
) -> tuple[tritonpy.Server, Iterating]:
    (tmp_path / "m" / "1").mkdir(parents=True)
    config = CONFIG.format(max_batch=4, instances=1, strategy=strategy, corrid="TYPE_UINT64", idle_us=10**7)
    (tmp_path / "m" / "config.pbtxt").write_text(config)
    server = tritonpy.Server(model_repository=tmp_path)
    backend = Iterating(answer_anyway)
    server.backends.register("acc", backend)
    server.start()
    return server, backend


def test_iterative_sequence_runs_a_handed_back_request_again(tmp_path: Path) -> None:
    server, backend = _iterating(tmp_path, "iterative_sequence: true")
    try:
        model = server.model("m")
        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(lambda x: model.predict({"X": np.array([[x]], np.int32)})["Y"], (3, 2)))
        assert [int(y.reshape(-1)[0]) for y in runs] == [3, 2]
        # Each request got a sequence of its own (fresh ids), START on its first run only.
        by_id: dict[int, list[tuple[bool, bool]]] = {}
        for corrid, start, ready in backend.seen:
            if ready:
                by_id.setdefault(corrid, []).append((start, ready))
        assert sorted(len(v) for v in by_id.values()) == [2, 3]
        assert all(v[0][0] and not any(s for s, _ in v[1:]) for v in by_id.values())
        stats = server.model_statistics("m")[0]
        assert stats["inference_stats"]["success"]["count"] == 5  # every execution counts
    finally:
        server.stop()


@pytest.mark.parametrize("strategy", ["direct { }", "oldest { max_candidate_sequences: 2 }"])
def test_rescheduling_needs_iterative_sequence(tmp_path: Path, strategy: str) -> None:
    server, _ = _iterating(tmp_path, strategy)
    try:
        with pytest.raises(TritonError) as info:
            server.model("m").predict(
                {"X": np.array([[2]], np.int32)}, parameters={"sequence_id": 5, "sequence_start": True}
            )
        assert info.value.code.name == "INVALID_ARG"
        assert (
            "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is "
            "not configured to handle such a flag." in info.value.message
        )
    finally:
        server.stop()


class DecoupledEcho(CpuBackend):
    """Decoupled: two responses per request (X, then X + START), sent from execute."""

    @hookimpl
    def execute(self, instance: ModelInstance, requests: Sequence[InferenceRequest]) -> None:
        for r in requests:
            sender = r.response_sender
            assert sender is not None
            x = r.inputs["X"].data
            sender.send(InferenceResponse({"Y": Tensor.from_numpy("Y", x)}))
            y = x + r.inputs["START"].data.astype(np.int32)
            sender.send(InferenceResponse({"Y": Tensor.from_numpy("Y", y)}), flags=1)


def test_decoupled_sequence_model(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    config = CONFIG.format(
        max_batch=4, instances=1, strategy="direct { }", corrid="TYPE_UINT64", idle_us=10**7
    )
    (tmp_path / "m" / "config.pbtxt").write_text(config + "model_transaction_policy { decoupled: true }\n")
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("acc", DecoupledEcho())
    server.start()
    try:
        model = server.model("m")

        def ys(x: int, **parameters: Any) -> list[int]:
            return [
                int(r.outputs["Y"].data.reshape(-1)[0])
                for r in model.infer({"X": np.array([[x]], np.int32)}, parameters=parameters)
            ]

        assert ys(5, sequence_id=1, sequence_start=True) == [5, 6]
        assert ys(7, sequence_id=2, sequence_start=True) == [7, 8]  # slot 1, beside a null request
        assert ys(1, sequence_id=2, sequence_end=True) == [1, 1]
        (stats,) = server.model_statistics("m")
        assert stats["inference_count"] == 3
        assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [
            (1, 1),
            (2, 2),
        ]
    finally:
        server.stop()


def test_a_response_for_a_handed_back_request_stands(tmp_path: Path) -> None:
    server, backend = _iterating(tmp_path, "iterative_sequence: true", answer_anyway=True)
    try:
        y = server.model("m").predict({"X": np.array([[3]], np.int32)})["Y"]
        assert int(y.reshape(-1)[0]) == -1  # the first execution's answer; not run again
        assert len(backend.seen) == 1
    finally:
        server.stop()


class Concatenating(CpuBackend):
    """Runs a batch as one array, as the ONNX and PyTorch backends do: X of every
    request concatenated (which fails when their shapes differ); Y = each row's sum.
    Records each batch as [(corrid, ready, X's length)]."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, bool, int]]] = []
        self.gate = threading.Event()

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        assert self.gate.wait(30)
        x = np.concatenate([r.inputs["X"].data for r in requests])
        self.batches.append(
            [
                (int(_scalar(r, "CORRID")), bool(_scalar(r, "READY")), r.inputs["X"].data.shape[1])
                for r in requests
            ]
        )
        sums = x.sum(axis=1, keepdims=True).astype(np.int32)
        return [
            InferenceResponse({"Y": Tensor.from_numpy("Y", sums[i : i + 1])}) for i in range(len(requests))
        ]


VARIABLE = """
backend: "cat"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
sequence_batching {
  %s
  control_input [
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
"""


@pytest.mark.parametrize("strategy", ["direct { }", "oldest { max_candidate_sequences: 4 }"])
def test_requests_of_different_shapes_never_share_a_batch(tmp_path: Path, strategy: str) -> None:
    """As Triton's sequence batcher: a sequence whose next request's shape differs from
    the batch's waits for a later batch (direct: its slot gets a null request)."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(VARIABLE % strategy)
    server = tritonpy.Server(model_repository=tmp_path)
    backend = Concatenating()
    server.backends.register("cat", backend)
    server.start()
    try:
        model = server.model("m")

        def infer(sid: int, length: int, **flags: bool) -> int:
            x = np.full((1, length), sid, np.int32)
            (response,) = model.infer({"X": x}, parameters={"sequence_id": sid, **flags})
            return int(response.outputs["Y"].data[0, 0])

        first, box = _in_thread(infer, 1, 2, sequence_start=True)  # runs alone, held at the gate
        time.sleep(0.2)
        waiting = [
            _in_thread(infer, 1, 2),  # sequence 1's slot: 2 values
            _in_thread(infer, 2, 3, sequence_start=True),  # 3 values: not with those of 2
            _in_thread(infer, 3, 2, sequence_start=True),
        ]
        time.sleep(0.3)
        backend.gate.set()
        for t, _ in [(first, box), *waiting]:
            t.join(10)
        assert box == [2] and [b for _, b in waiting] == [[2], [6], [6]]
        for batch in backend.batches:
            assert len({length for _, _, length in batch}) == 1, backend.batches
        ran = sorted(
            (corrid, length) for batch in backend.batches for corrid, ready, length in batch if ready
        )
        assert ran == [(1, 2), (1, 2), (2, 3), (3, 2)]
        if strategy.startswith("direct"):  # sequence 2's slot held a null request beside 1 and 3
            assert [(1, True, 2), (0, False, 2), (3, True, 2)] in backend.batches
    finally:
        backend.gate.set()
        server.stop()


def test_oldest_cuts_at_a_preferred_size_without_waiting_out_the_delay(make: Any) -> None:
    """As Triton's dynamic batcher: three sequences queued, preferred [1, 2], a long
    delay: 2 go at once (not 3 once the delay is up), then the last alone."""
    h = make(
        instances=1,
        by_corrid=True,
        strategy="oldest { max_candidate_sequences: 4 preferred_batch_size: [ 1, 2 ] "
        "max_queue_delay_microseconds: 60000000 }",
    )
    h.backend.gate = threading.Event()
    threads = [_in_thread(h.infer, 1, sequence_id=1, sequence_start=True)[0]]
    time.sleep(0.1)  # sequence 1 executes (held at the gate); the others queue behind it
    threads += [_in_thread(h.infer, 1, sequence_id=s, sequence_start=True)[0] for s in (2, 3, 4)]
    time.sleep(0.2)
    h.backend.gate.set()
    for t in threads:
        t.join(30)
    assert [len(b) for _, b in h.backend.batches] == [1, 2, 1]


def test_triton_delay_scheduler_holds_a_direct_batch_until_that_many_are_queued(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONSERVER_DELAY_SCHEDULER", "3")
    h = make(instances=1, by_corrid=True)
    threads = []
    for s in (1, 2, 3):
        threads.append(_in_thread(h.infer, s, sequence_id=s, sequence_start=True)[0])
        time.sleep(0.1)
        assert s == 3 or not h.backend.batches  # held: without it 1 would run alone
    for t in threads:
        t.join(30)
    assert [sorted(c for c, *_ in b) for _, b in h.backend.batches] == [[1, 2, 3]]


def test_triton_backlog_delay_holds_until_the_backlog_has_that_many(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONSERVER_DELAY_SCHEDULER", "1")
    monkeypatch.setenv("TRITONSERVER_BACKLOG_DELAY_SCHEDULER", "1")
    h = make(instances=1, max_batch=1, by_corrid=True)  # one slot: sequence 2 waits in the backlog
    first, box = _in_thread(h.infer, 1, sequence_id=1, sequence_start=True)
    first.join(0.3)
    assert first.is_alive() and not h.backend.batches  # one queued, but none in the backlog
    second, box2 = _in_thread(h.infer, 10, sequence_id=2, sequence_start=True)
    first.join(30)
    assert box == [1]
    assert h.infer(5, sequence_id=1, sequence_end=True) == 6
    second.join(30)
    assert box2 == [10]


def test_the_delay_hold_releases_every_worker_at_once(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's test_backlog_same_correlation_id: once the counts are reached every worker
    goes. A worker still held after another had moved the backlog's sequence into its
    freed slot would otherwise find the backlog short for ever."""
    monkeypatch.setenv("TRITONSERVER_DELAY_SCHEDULER", "3")
    monkeypatch.setenv("TRITONSERVER_BACKLOG_DELAY_SCHEDULER", "1")
    h = make(instances=2, max_batch=1, by_corrid=True)  # one slot per instance
    start_end = {"sequence_start": True, "sequence_end": True}
    threads = []
    for x, parameters in (
        (1, {"sequence_id": 1, **start_end}),
        (2, {"sequence_id": 2, "sequence_start": True}),
    ):
        threads.append(_in_thread(h.infer, x, **parameters)[0])
        time.sleep(0.05)  # in this order: a sequence's START first
    threads.append(_in_thread(h.infer, 3, sequence_id=2)[0])
    time.sleep(0.2)
    assert not h.backend.batches  # 3 queued, none in the backlog yet
    last, box = _in_thread(h.infer, 4, sequence_id=3, **start_end)  # to the backlog
    for t in [*threads, last]:
        t.join(30)
    assert box == [4]
    assert h.infer(5, sequence_id=2, sequence_end=True) == 10


def test_a_backlog_sequence_whose_timeout_runs_out_is_rejected(make: Any) -> None:
    """NVIDIA's SequenceBatcherRequestTimeoutTest: a sequence waiting in the backlog past
    its requests' ``timeout`` is answered UNAVAILABLE, in Triton's words; the sequence is
    gone, so its next request is refused for want of START. The running one goes on."""
    h = make(instances=1, max_batch=1, by_corrid=True)  # one slot in all
    h.backend.gate = threading.Event()
    first, box = _in_thread(h.infer, 1, sequence_id=1, sequence_start=True)
    time.sleep(0.1)  # sequence 1 holds the slot (at the gate)
    with pytest.raises(TritonError, match="timeout of the corresponding sequence has been expired") as err:
        h.infer(5, sequence_id=2, sequence_start=True, timeout=100_000)
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert "must specify the START flag" in _refusal_any(h, sequence_id=2)
    h.backend.gate.set()
    first.join(30)
    assert box == [1]
    assert h.infer(2, sequence_id=1, sequence_end=True) == 3
    (stats,) = h.server.model_statistics("m")
    assert stats["inference_stats"]["fail"]["count"] >= 1


def _queued(
    h: Harness, sid: int, x: int, flags: int = 0
) -> tuple[InferenceRequest, list[Any], threading.Event]:
    """A request of sequence ``sid`` submitted without waiting: (it, its answers, answered)."""
    request = InferenceRequest("m", -1, {"X": Tensor.from_numpy("X", np.array([[x]], np.int32))})
    request.correlation_id, request.flags = sid, flags
    answers: list[Any] = []
    answered = threading.Event()

    def done(response: InferenceResponse | None, _flags: int) -> None:
        answers.append(response)
        answered.set()

    h.server.submit(request, done)
    return request, answers, answered


def _cancelled(answers: list[Any]) -> bool:
    return len(answers) == 1 and answers[0].error is not None and answers[0].error.code is ErrorCode.CANCELLED


@pytest.mark.parametrize("strategy", ["direct { }", "oldest { max_candidate_sequences: 1 }"])
def test_a_cancelled_queued_request_cancels_its_whole_sequence(make: Any, strategy: str) -> None:
    """NVIDIA's L0_request_cancellation scheduler_test: with a sequence's request executing
    and two more queued, cancelling the first queued one answers both CANCELLED once the
    instance is free (not executing the second), and the sequence is over."""
    h = make(strategy=strategy, instances=1, max_batch=1, by_corrid=True)
    h.backend.gate = threading.Event()
    _, first, first_done = _queued(h, 1, 1, SEQUENCE_START)
    time.sleep(0.1)  # executing, at the gate
    queued = [_queued(h, 1, x) for x in (2, 3)]
    queued[0][0].cancel()
    h.backend.gate.set()
    assert first_done.wait(30) and first[0].error is None
    for _, answers, answered in queued:
        assert answered.wait(30) and _cancelled(answers), answers
    assert len(h.backend.batches) == 1  # the queued ones never ran
    assert "must specify the START flag" in _refusal_any(h, sequence_id=1)
    (stats,) = h.server.model_statistics("m")
    assert stats["inference_stats"]["fail"]["count"] == 2


def test_a_backlog_sequence_with_a_cancelled_request_is_cancelled_when_a_slot_frees(make: Any) -> None:
    """The backlog's sequence whose request was cancelled is cancelled whole when it would
    get the slot (Triton's ReleaseSequenceSlot); the next backlog sequence takes it."""
    h = make(instances=1, max_batch=1, by_corrid=True)  # one slot in all
    assert h.infer(1, sequence_id=1, sequence_start=True) == 1
    backlog = [_queued(h, 2, x, SEQUENCE_START if x == 5 else 0) for x in (5, 6)]
    _, third, third_done = _queued(h, 3, 7, SEQUENCE_START)
    time.sleep(0.1)
    assert not any(answers for _, answers, _ in backlog) and not third  # all wait in the backlog
    backlog[0][0].cancel()
    assert h.infer(2, sequence_id=1, sequence_end=True) == 3  # sequence 1 ends: its slot frees
    for _, answers, answered in backlog:
        assert answered.wait(30) and _cancelled(answers), answers
    assert third_done.wait(30) and third[0].error is None  # sequence 3 got the slot
    assert int(third[0].outputs["Y"].data.reshape(-1)[0]) == 7
