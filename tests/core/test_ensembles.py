"""Ensembles through the in-process API: pipelines, a diamond whose branches run at
once, errors, output subsets, statistics, decoupled members and cancellation."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.scheduler.ensemble import batch_reshape
from tritonpy_ensembles import (
    StepBackend,
    serving,
    step,
    write_ensemble,
    write_pipe,
    write_step_model,
    write_streaming,
)
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    Tensor,
    TritonError,
)
from tritonpy_testbackend import CANCELLED, WAITING

F = "TYPE_FP32"
X = np.array([[1.0, 2.0, 3.0]], np.float32)


def write_repository(repo: Path) -> None:
    write_pipe(repo)
    write_step_model(repo, "a", add="1")
    write_step_model(repo, "b", add="10", sleep="0.3")
    write_step_model(repo, "c", add="20", sleep="0.3")
    write_step_model(repo, "join", inputs=2)
    write_ensemble(
        repo,
        "diamond",
        [
            step("a", {"X": "IN"}, {"Y": "t"}),
            step("b", {"X": "t"}, {"Y": "U"}),
            step("c", {"X": "t"}, {"Y": "v"}),
            step("join", {"X": "U", "X2": "v"}, {"Y": "OUT"}),
        ],
        {"IN": F},
        {"OUT": F, "U": F},
    )
    write_step_model(repo, "minus10", add="-10")
    write_step_model(repo, "checker")
    write_step_model(repo, "last", add="100")
    write_ensemble(
        repo,
        "fails_in_middle",
        [
            step("minus10", {"X": "IN"}, {"Y": "t"}),
            step("checker", {"X": "t"}, {"Y": "u"}),
            step("last", {"X": "u"}, {"Y": "OUT"}),
        ],
        {"IN": F},
        {"OUT": F},
    )
    write_step_model(repo, "batched", extra="dynamic_batching { max_queue_delay_microseconds: 300000 }")
    write_ensemble(repo, "batching", [step("batched", {"X": "IN"}, {"Y": "OUT"})], {"IN": F}, {"OUT": F})
    write_ensemble(repo, "nested", [step("pipe", {"IN": "IN"}, {"OUT": "OUT"})], {"IN": F}, {"OUT": F})
    # Decoupled: "decoupled" (testbk) streams 3 responses; each goes on through addsub.
    write_streaming(repo, "streaming")


@pytest.fixture(scope="module")
def steps() -> StepBackend:
    return StepBackend()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, steps: StepBackend) -> Iterator[tritonpy.Server]:
    with serving(tmp_path_factory.mktemp("repo"), write_repository, steps) as server:
        yield server


def counts(server: tritonpy.Server, model: str) -> tuple[int, int, int]:
    """(inference_count, execution_count, failures) of ``model``."""
    (stats,) = server.model_statistics(model)
    return stats["inference_count"], stats["execution_count"], stats["inference_stats"]["fail"]["count"]


def test_every_model_loads_and_the_server_is_ready(server: tritonpy.Server) -> None:
    assert server.failed_models() == []
    assert server.ready()
    assert {e["name"] for e in server.repository_index(ready=True)} >= {"pipe", "diamond", "streaming"}


def test_pipeline_runs_its_steps_in_order(server: tritonpy.Server) -> None:
    out = server.model("pipe").predict({"IN": X})
    np.testing.assert_array_equal(out["MID"], X + 1)
    np.testing.assert_array_equal(out["OUT"], X + 101)


def test_tensors_flow_between_steps_without_copies(server: tritonpy.Server, steps: StepBackend) -> None:
    server.model("pipe").predict({"IN": X}, request_id="nocopy")
    produced = steps.log.of("pre", "nocopy").output
    consumed = steps.log.of("post", "nocopy").inputs["X"]
    assert produced is not None and np.shares_memory(produced, consumed)


def test_request_id_and_parameters_reach_every_step(server: tritonpy.Server, steps: StepBackend) -> None:
    response = next(
        server.model("pipe").infer({"IN": X}, request_id="rid-7", parameters={"tag": "x", "n": 3})
    )
    assert (response.id, response.model_name, response.model_version) == ("rid-7", "pipe", 1)
    for model in ("pre", "post"):
        assert steps.log.of(model, "rid-7").parameters == {"tag": "x", "n": 3}


def test_nested_ensemble(server: tritonpy.Server) -> None:
    np.testing.assert_array_equal(server.model("nested").predict({"IN": X})["OUT"], X + 101)


def test_diamond_branches_run_concurrently(server: tritonpy.Server, steps: StepBackend) -> None:
    started = time.monotonic()
    out = server.model("diamond").predict({"IN": X}, request_id="diamond-1")
    np.testing.assert_array_equal(out["OUT"], (X + 11) + (X + 21))
    np.testing.assert_array_equal(out["U"], X + 11)
    (b_start, b_end), (c_start, c_end) = steps.log.intervals["b"][-1], steps.log.intervals["c"][-1]
    assert b_start < c_end and c_start < b_end, "the two branches did not overlap"
    assert b_start >= started and c_start >= started


def test_output_subset_runs_only_the_steps_it_needs(server: tritonpy.Server, steps: StepBackend) -> None:
    c_before, join_before = counts(server, "c")[1], counts(server, "join")[1]
    out = server.model("diamond").predict({"IN": X}, requested_output_names=["U"], request_id="subset")
    assert list(out) == ["U"]
    np.testing.assert_array_equal(out["U"], X + 11)
    assert (counts(server, "c")[1], counts(server, "join")[1]) == (c_before, join_before)


def test_an_error_in_a_middle_step_fails_the_request(server: tritonpy.Server, steps: StepBackend) -> None:
    before = counts(server, "fails_in_middle")
    with pytest.raises(TritonError) as info:
        server.model("fails_in_middle").predict({"IN": np.array([[5.0]], np.float32)}, request_id="mid-err")
    assert info.value.message == "in ensemble 'fails_in_middle', negative input on purpose"
    assert info.value.code is ErrorCode.INVALID_ARG
    assert not any(s.model == "last" and s.id == "mid-err" for s in steps.log.requests)
    # As Triton documents it: no execution, reason OTHER, counted twice (the step's
    # failure and the ensemble request's).
    assert counts(server, "fails_in_middle") == (before[0], before[1], before[2] + 2)
    failures = {
        line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in server.metrics().splitlines()
        if line.startswith('nv_inference_request_failure{model="fails_in_middle"')
    }
    assert failures == {"REJECTED": 0, "CANCELED": 0, "BACKEND": 0, "OTHER": before[2] + 2}
    # The server, the ensemble and its members serve on.
    out = server.model("fails_in_middle").predict({"IN": np.array([[20.0]], np.float32)})
    np.testing.assert_array_equal(out["OUT"], [[110.0]])


def test_invalid_requests_are_refused_as_for_any_model(server: tritonpy.Server) -> None:
    with pytest.raises(TritonError) as info:
        server.model("pipe").predict({}, request_id="x")
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message.startswith(
        "[request id: x] expected 1 inputs but got 0 inputs for model 'pipe'"
    )
    with pytest.raises(TritonError) as info:
        server.model("pipe").predict({"IN": X}, requested_output_names=["NOPE"])
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message.endswith("unexpected inference output 'NOPE' for model 'pipe'")


def test_statistics_count_the_ensemble_and_each_member(server: tritonpy.Server) -> None:
    ensemble, pre, post = counts(server, "pipe"), counts(server, "pre"), counts(server, "post")
    server.model("pipe").predict({"IN": np.ones((2, 3), np.float32)})  # a batch of 2
    assert counts(server, "pipe") == (ensemble[0] + 2, ensemble[1] + 1, ensemble[2])
    assert counts(server, "pre") == (pre[0] + 2, pre[1] + 1, pre[2])
    assert counts(server, "post") == (post[0] + 2, post[1] + 1, post[2])
    (stats,) = server.model_statistics("pipe")
    assert set(stats) == {
        "name",
        "version",
        "last_inference",
        "inference_count",
        "execution_count",
        "inference_stats",
        "response_stats",
        "batch_stats",
        "memory_usage",
    }
    assert stats["inference_stats"]["success"]["count"] == stats["execution_count"]


def test_members_batch_across_ensemble_requests(server: tritonpy.Server) -> None:
    before = counts(server, "batched")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: server.model("batching").predict({"IN": X * i}), range(8)))
    for i, out in enumerate(results):
        np.testing.assert_array_equal(out["OUT"], X * i)
    inferences, executions, _ = counts(server, "batched")
    assert inferences - before[0] == 8
    assert executions - before[1] < 8, "the member ran each ensemble request alone"


def test_a_decoupled_member_streams_through(server: tritonpy.Server) -> None:
    assert server.is_decoupled("streaming")
    assert server.model_config("streaming")["model_transaction_policy"] == {"decoupled": True}
    a = np.array([[1, 2, 3, 4]], np.int32)
    b = np.array([[1, 1, 1, 1]], np.int32)
    responses = list(server.model("streaming").infer({"A": a, "B": b}, request_id="dec"))
    assert len(responses) == 3
    for r in responses:
        assert r.id == "dec"
        np.testing.assert_array_equal(r.outputs["OUT"].to_numpy(), a + 2 * b)


def test_the_last_answer_of_a_decoupled_ensemble_carries_the_final_flag(server: tritonpy.Server) -> None:
    """As Triton's ensemble: the answer that completes the request carries FINAL, so a
    gRPC stream client that does not ask for empty final responses sees the request end
    (NVIDIA's L0_simple_ensemble backpressure tests wait for it)."""
    a = np.array([[1, 2, 3, 4]], np.int32)
    got: list[tuple[bool, int]] = []
    ended = threading.Event()

    def done(response: InferenceResponse | None, flags: int) -> None:
        got.append((response is not None, flags))
        if flags & RESPONSE_COMPLETE_FINAL:
            ended.set()

    request = InferenceRequest(
        "streaming", -1, {"A": Tensor.from_numpy("A", a), "B": Tensor.from_numpy("B", a)}
    )
    server.submit(request, done)
    assert ended.wait(30)
    assert got == [(True, 0), (True, 0), (True, RESPONSE_COMPLETE_FINAL)]


def test_cancelling_the_request_reaches_the_running_step(server: tritonpy.Server) -> None:
    a = np.array([[1, 2, 3, 4]], np.int32)
    responses = server.model("streaming").infer(
        {"A": a, "B": a}, request_id="ens-cancel", parameters={"wait_cancel": True}
    )
    assert isinstance(next(responses), InferenceResponse)
    assert WAITING.saw("ens-cancel")
    responses.close()  # the client leaves: the ensemble request is cancelled
    assert CANCELLED.saw("ens-cancel")


def test_concurrent_requests_each_get_their_own_answer(server: tritonpy.Server) -> None:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            x = np.full((1, 3), float(i), np.float32)
            out = server.model("diamond").predict({"IN": x})
            np.testing.assert_array_equal(out["OUT"], (x + 11) + (x + 21))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_an_ensemble_with_response_cache_answers_repeats_from_it(tmp_path: Path) -> None:
    # Triton's top-level ensemble caching: a hit answers without running any step.
    write_step_model(tmp_path, "pre", add="1")
    write_ensemble(
        tmp_path,
        "cached",
        [step("pre", {"X": "IN"}, {"Y": "OUT"})],
        {"IN": F},
        {"OUT": F},
        extra="response_cache { enable: true }",
    )
    server = tritonpy.Server(model_repository=tmp_path, cache_config={"local": {"size": "1048576"}})
    server.backends.register("stepbk", StepBackend())
    with server:
        first = server.model("cached").predict({"IN": X})
        second = server.model("cached").predict({"IN": X})
        np.testing.assert_array_equal(first["OUT"], second["OUT"])
        assert counts(server, "pre")[1] == 1
        (stats,) = server.model_statistics("cached")
        assert stats["inference_stats"]["cache_hit"]["count"] == 1
        assert stats["inference_stats"]["cache_miss"]["count"] == 1


def test_response_cache_refusals_are_triton_s(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """NVIDIA's L0_response_cache: an ensemble made decoupled by a member cannot cache
    (Triton's message); a response larger than the cache is answered, not kept, and
    logged with Triton's line."""
    write_step_model(tmp_path, "pre", add="1")
    write_step_model(tmp_path, "streams", extra="model_transaction_policy { decoupled: true }")
    cache = "response_cache { enable: true }"
    write_ensemble(
        tmp_path, "cached", [step("pre", {"X": "IN"}, {"Y": "OUT"})], {"IN": F}, {"OUT": F}, extra=cache
    )
    write_ensemble(
        tmp_path,
        "cached_stream",
        [step("streams", {"X": "IN"}, {"Y": "OUT"})],
        {"IN": F},
        {"OUT": F},
        extra=cache,
    )
    server = tritonpy.Server(model_repository=tmp_path, cache_config={"local": {"size": "200"}})
    server.backends.register("stepbk", StepBackend())
    with server:
        ((model, _, reason),) = server.failed_models()
        assert model == "cached_stream"
        assert reason.endswith(
            "Response Cache does not currently support model cached_stream with 'decoupled' "
            "transaction policy. Please disable the response cache."
        )
        for _ in range(2):
            np.testing.assert_array_equal(server.model("cached").predict({"IN": X})["OUT"], X + 1)
        (stats,) = server.model_statistics("cached")
        assert stats["inference_stats"]["cache_miss"]["count"] == 2
        assert stats["inference_stats"]["cache_hit"]["count"] == 0
    inserts = [r.getMessage() for r in caplog.records if "Failed to insert key" in r.getMessage()]
    assert len(inserts) == 2
    assert inserts[0].endswith(
        "into response cache: Requested byte_size: 268 is greater than total cache size: 200"
    )


def _write_optional(repo: Path) -> None:
    write_step_model(repo, "either", inputs=2, optional=True, add="1000")
    write_step_model(repo, "silent", no_output="yes")
    ensemble = repo / "pick"
    pick = [step("either", {"X": "A", "X2": "B"}, {"Y": "OUT"})]
    write_ensemble(repo, "pick", pick, {"A": F, "B": F}, {"OUT": F})
    config = ensemble / "config.pbtxt"
    head, outputs = config.read_text().split("output [", 1)
    config.write_text(head.replace("dims: [ -1 ] }", "dims: [ -1 ] optional: true }") + "output [" + outputs)
    write_ensemble(
        repo,
        "gap",
        [step("silent", {"X": "IN"}, {"Y": "t"}), step("either", {"X": "t", "X2": "IN"}, {"Y": "OUT"})],
        {"IN": F},
        {"OUT": F, "t": F},
    )


def test_tensors_without_data_let_steps_with_optional_inputs_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As Triton (NVIDIA's L0_optional_input): an optional ensemble input the request
    leaves out, and an output a step's response does not hold, are there without data;
    the step that reads one runs without that input, and an ensemble output without
    data is left out of the answer (logged at verbose level, as Triton's)."""
    caplog.set_level(logging.DEBUG, "tritonpy.scheduler.ensemble")
    steps = StepBackend()
    with serving(tmp_path, _write_optional, steps) as server:
        pick = server.model("pick")
        assert pick.predict({"A": X})["OUT"].tolist() == (X + 1000).tolist()
        assert pick.predict({"B": 2 * X})["OUT"].tolist() == (2 * X + 1000).tolist()
        assert pick.predict({"A": X, "B": X})["OUT"].tolist() == (2 * X + 1000).tolist()
        given = sorted(tuple(sorted(s.inputs)) for s in steps.log.requests if s.model == "either")
        assert given == [("X",), ("X", "X2"), ("X2",)]
        answer = server.model("gap").predict({"IN": X})
        assert set(answer) == {"OUT"} and answer["OUT"].tolist() == (X + 1000).tolist()
    assert "Composing models did not output tensor t" in caplog.text  # NVIDIA's L0_simple_ensemble


def _write_batch_kinds(repo: Path) -> None:
    write_step_model(repo, "batched_step", add="1")  # batches, dims [-1]
    (repo / "plain_step" / "1").mkdir(parents=True)
    (repo / "plain_step" / "config.pbtxt").write_text(
        'backend: "stepbk"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'parameters { key: "add" value: { string_value: "10" } }\n'
    )
    flow = [step("batched_step", {"X": "IN"}, {"Y": "t"}), step("batched_step", {"X": "t"}, {"Y": "OUT"})]
    write_ensemble(repo, "unbatched_over_batched", flow, {"IN": F}, {"OUT": F}, max_batch_size=0)
    once = [step("plain_step", {"X": "IN"}, {"Y": "OUT"})]
    write_ensemble(repo, "batched_over_unbatched", once, {"IN": F}, {"OUT": F}, dims="3")


def test_tensors_cross_between_batching_and_non_batching_models(tmp_path: Path) -> None:
    """As Triton's ensembles (its ReshapeTensorDims, NVIDIA's L0_infer_zero): a model that
    batches gets a batch of 1 in front of a tensor from a request that does not, and one
    that does not batch gets a batch of 1 without its batch dimension; the answer has
    the ensemble's own shape."""
    steps = StepBackend()
    with serving(tmp_path, _write_batch_kinds, steps) as server:
        x = np.array([1.0, 2.0, 3.0], np.float32)
        out = server.model("unbatched_over_batched").predict({"IN": x})["OUT"]
        assert out.shape == (3,) and out.tolist() == [3.0, 4.0, 5.0]
        assert [s.inputs["X"].shape for s in steps.log.requests] == [(1, 3), (1, 3)]
        out = server.model("batched_over_unbatched").predict({"IN": x.reshape(1, 3)})["OUT"]
        assert out.shape == (1, 3) and out.tolist() == [[11.0, 12.0, 13.0]]
        assert steps.log.requests[-1].inputs["X"].shape == (3,)


@pytest.mark.parametrize(
    ("config_dims", "batching", "batch", "shape", "expected"),
    [
        ((-1,), True, 0, (3,), (1, 3)),  # fits the batching model's dims: a batch of 1
        ((-1,), True, 0, (2, 3), None),  # taken to be batched already
        ((3,), False, 1, (1, 3), (3,)),  # a batch of 1 for a model that does not batch
        ((-1, -1), False, 1, (1, 3), None),  # fits as it is
        ((3,), False, 2, (2, 3), None),  # a batch of 2 cannot lose its dimension
        ((-1,), True, 4, (4, 3), None),  # same kind on both sides
        ((), True, 0, (3,), None),  # dims not known
    ],
)
def test_batch_reshape_follows_tritons_rules(
    config_dims: tuple[int, ...],
    batching: bool,
    batch: int,
    shape: tuple[int, ...],
    expected: tuple[int, ...] | None,
) -> None:
    assert batch_reshape(config_dims, batching, batch, shape) == expected


def _write_labelled(repo: Path) -> None:
    (repo / "labelled" / "1").mkdir(parents=True)
    (repo / "labelled" / "config.pbtxt").write_text(
        'backend: "stepbk"\nmax_batch_size: 8\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] label_filename: "l.txt" } ]\n'
    )
    (repo / "labelled" / "l.txt").write_text("cat\ndog\nbird\n")
    once = [step("labelled", {"X": "IN"}, {"Y": "OUT"})]
    write_ensemble(repo, "inherits", once, {"IN": F}, {"OUT": F})
    nested = [step("inherits", {"IN": "IN"}, {"OUT": "OUT"})]
    write_ensemble(repo, "nested_inherits", nested, {"IN": F}, {"OUT": F})
    write_ensemble(repo, "own_labels", once, {"IN": F}, {"OUT": F})
    config = repo / "own_labels" / "config.pbtxt"
    head, outputs = config.read_text().split("output [", 1)
    labelled = outputs.replace("dims: [ -1 ] }", 'dims: [ -1 ] label_filename: "o.txt" }', 1)
    config.write_text(head + "output [" + labelled)
    (repo / "own_labels" / "o.txt").write_text("x\ny\nz\n")


def test_an_ensemble_output_without_labels_takes_its_makers(tmp_path: Path) -> None:
    """As Triton completes an ensemble's labels at load (NVIDIA's L0_infer
    test_ensemble_label_lookup): from the member that makes the output, through nested
    ensembles too; an output with a label file of its own keeps it."""
    steps = StepBackend()
    with serving(tmp_path, _write_labelled, steps) as server:
        x = np.array([[0.1, 0.9, 0.5]], np.float32)
        for model, top in (("inherits", "dog"), ("nested_inherits", "dog"), ("own_labels", "y")):
            handle = server.model(model)
            request = handle.create_request({"IN": x})
            request.requested_outputs = [RequestedOutput("OUT", {"classification": 1})]
            (response,) = handle.infer(request)
            assert response.outputs["OUT"].data.tolist() == [[f"0.900000:1:{top}".encode()]], model
