"""Loading ensembles: the checks against their members (Triton 2.51's messages),
cycles, members that fail, and model control (members loaded with the ensemble,
unloaded with ``unload_dependents``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_ensembles import StepBackend, step, write_ensemble, write_step_model
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_testbackend import CANCELLED, TestBackend, write_model, write_sender_models

F = "TYPE_FP32"
ONE_STEP = [step("pre", {"X": "IN"}, {"Y": "OUT"})]

#: Ensembles refused when they load, and Triton's reason (recorded from Triton 2.51).
BAD: dict[str, tuple[dict[str, object], str]] = {
    "missing_member": (
        {"steps": [step("nope", {"X": "IN"}, {"Y": "OUT"})]},
        "ensemble missing_member contains models that are not available or ambiguous: nope",
    ),
    "member_version": (
        {"steps": [step("pre", {"X": "IN"}, {"Y": "OUT"}, version=7)]},
        "ensemble 'member_version' depends on 'pre' whose required version 7 is not loaded.",
    ),
    "member_version_unset": (
        {"steps": [step("pre", {"X": "IN"}, {"Y": "OUT"}, version=0)]},
        "ensemble 'member_version_unset' depends on 'pre' whose required version 0 is not loaded.",
    ),
    "batch_too_big": (
        {"steps": ONE_STEP, "max_batch_size": 16},
        "ensemble batch_too_big allows maximum batch size 16, but it contains model pre which only "
        "allows maximum batch size to be 8",
    ),
    "wrong_type": (
        {"steps": ONE_STEP, "inputs": {"IN": "TYPE_INT32"}},
        "in ensemble wrong_type, ensemble tensor IN: inconsistent data type: TYPE_INT32 is inferred "
        "from model wrong_type while TYPE_FP32 is inferred from model pre",
    ),
    "wrong_shape": (
        {"steps": ONE_STEP, "dims": "3, 2, 1", "max_batch_size": 0},
        "in ensemble wrong_shape, ensemble tensor IN: inconsistent shape: [3,2,1] is inferred from model "
        "wrong_shape while [-1,-1] is inferred from model pre",
    ),
    "no_such_input": (
        {"steps": [step("pre", {"X": "IN", "Z": "IN"}, {"Y": "OUT"})]},
        "in ensemble no_such_input, ensemble tensor IN is mapping to non-existing input Z in model pre",
    ),
    "no_such_output": (
        {"steps": [step("pre", {"X": "IN"}, {"Y": "OUT", "Z": "OUT2"})], "outputs": {"OUT": F, "OUT2": F}},
        "in ensemble no_such_output, ensemble tensor OUT2 is mapped from non-existing output Z in model pre",
    ),
    "input_not_mapped": (
        {"steps": [step("join", {"X": "IN"}, {"Y": "OUT"})]},
        "in ensemble input_not_mapped, input X2 in model join is not mapped to any ensemble tensors",
    ),
    "decoupled_branches": (
        {
            "steps": [
                step("dec", {"X": "IN"}, {"Y": "a"}),
                step("pre", {"X": "IN"}, {"Y": "b"}),
                step("join", {"X": "a", "X2": "b"}, {"Y": "c"}),
                step("post", {"X": "c"}, {"Y": "OUT"}),
            ]
        },
        "in ensemble decoupled_branches, step of model 'join' receives inputs originated from different "
        "decoupled models",
    ),
    "decoupled_outputs": (
        {
            "steps": [step("dec", {"X": "IN"}, {"Y": "OUT"}), step("pre", {"X": "IN"}, {"Y": "OUT2"})],
            "outputs": {"OUT": F, "OUT2": F},
        },
        "in ensemble decoupled_outputs, step of model 'decoupled_outputs' receives inputs originated from "
        "different decoupled models",
    ),
    "self_loop": (
        {"steps": [step("self_loop", {"IN": "IN"}, {"OUT": "OUT"})]},
        "circular dependency between ensembles: self_loop -> ... -> self_loop -> self_loop",
    ),
    "loop_a": (
        {"steps": [step("loop_b", {"IN": "IN"}, {"OUT": "OUT"})]},
        "circular dependency between ensembles: loop_a -> ... -> loop_b -> loop_a",
    ),
    "loop_b": (
        {"steps": [step("loop_a", {"IN": "IN"}, {"OUT": "OUT"})]},
        "circular dependency between ensembles: loop_b -> ... -> loop_a -> loop_b",
    ),
}


def write_bad(repo: Path) -> None:
    for name, (spec, _) in BAD.items():
        write_ensemble(
            repo,
            name,
            spec["steps"],  # type: ignore[arg-type]
            spec.get("inputs", {"IN": F}),  # type: ignore[arg-type]
            spec.get("outputs", {"OUT": F}),  # type: ignore[arg-type]
            dims=str(spec.get("dims", "-1")),
            max_batch_size=int(spec.get("max_batch_size", 8)),  # type: ignore[call-overload]
        )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    write_step_model(repo, "pre", add="1")
    write_step_model(repo, "post", add="100")
    write_step_model(repo, "join", inputs=2)
    write_step_model(repo, "dec", add="1", extra="model_transaction_policy { decoupled: true }\n")
    # One decoupled step feeding the rest: what it sends flows on together.
    write_ensemble(
        repo,
        "dec_pipe",
        [step("dec", {"X": "IN"}, {"Y": "t"}), step("post", {"X": "t"}, {"Y": "OUT"})],
        {"IN": F},
        {"OUT": F},
    )
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text('backend: "stepbk"\nmax_batch_size: -1\n')
    write_ensemble(
        repo,
        "pipe",
        [step("pre", {"X": "IN"}, {"Y": "t"}), step("post", {"X": "t"}, {"Y": "OUT"})],
        {"IN": F},
        {"OUT": F},
    )
    write_ensemble(repo, "pre_only", ONE_STEP, {"IN": F}, {"OUT": F})
    write_ensemble(repo, "uses_broken", [step("broken", {"X": "IN"}, {"Y": "OUT"})], {"IN": F}, {"OUT": F})
    write_ensemble(repo, "outer", [step("pipe", {"IN": "IN"}, {"OUT": "OUT"})], {"IN": F}, {"OUT": F})
    write_bad(repo)
    return repo


def start(repo: Path, **options: object) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo, **options)
    server.backends.register("stepbk", StepBackend())
    return server.start()


@pytest.fixture(scope="module")
def all_loaded(repo: Path) -> Iterator[tritonpy.Server]:
    server = start(repo)
    yield server
    server.stop()


def reason(server: tritonpy.Server, name: str) -> str:
    (row,) = [r for r in server.repository_index() if r["name"] == name]
    assert row["state"] == "UNAVAILABLE"
    return row["reason"]


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_ensemble_is_unavailable_with_tritons_reason(all_loaded: tritonpy.Server, name: str) -> None:
    assert reason(all_loaded, name) == f"Invalid argument: {BAD[name][1]}"


def test_a_member_that_failed_makes_the_ensemble_unavailable(all_loaded: tritonpy.Server) -> None:
    assert reason(all_loaded, "uses_broken") == (
        "Invalid argument: ensemble 'uses_broken' depends on 'broken' which has no loaded version. "
        "Model 'broken' loading failed with error: version 1 is at UNAVAILABLE state: Invalid argument: "
        f"{all_loaded.options.model_repository[0]}/broken/config.pbtxt: 'max_batch_size' must be "  # type: ignore[index]
        "non-negative value for broken"
    )
    with pytest.raises(TritonError) as info:
        all_loaded.model("uses_broken").predict({"IN": np.ones((1, 2), np.float32)})
    assert info.value.code is ErrorCode.NOT_FOUND


def test_good_ensembles_load_beside_the_bad_ones(all_loaded: tritonpy.Server) -> None:
    for name in ("pipe", "pre_only", "outer"):
        assert all_loaded.model_ready(name)
    out = all_loaded.model("outer").predict({"IN": np.ones((1, 2), np.float32)})
    np.testing.assert_array_equal(out["OUT"], [[102.0, 102.0]])


def test_an_ensemble_with_a_decoupled_step_is_decoupled(all_loaded: tritonpy.Server) -> None:
    assert all_loaded.model_config("dec_pipe")["model_transaction_policy"] == {"decoupled": True}
    assert all_loaded.model_config("pipe")["model_transaction_policy"] == {"decoupled": False}


def test_metadata_and_config_answer_as_tritons(all_loaded: tritonpy.Server) -> None:
    assert all_loaded.model_metadata("pre_only") == {
        "name": "pre_only",
        "versions": ["1"],
        "platform": "ensemble",
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": [-1, -1]}],
        "outputs": [{"name": "OUT", "datatype": "FP32", "shape": [-1, -1]}],
    }
    config = all_loaded.model_config("pre_only")
    # The fields Triton 2.51 reports for an ensemble: no optimization, no instances.
    assert set(config) == {
        "name",
        "platform",
        "backend",
        "runtime",
        "version_policy",
        "max_batch_size",
        "input",
        "output",
        "batch_input",
        "batch_output",
        "ensemble_scheduling",
        "instance_group",
        "default_model_filename",
        "cc_model_filenames",
        "metric_tags",
        "parameters",
        "model_warmup",
        "model_transaction_policy",
    }
    assert (config["backend"], config["instance_group"]) == ("", [])
    # max_inflight_requests is newer than Triton 2.51 (docs/model_configuration.md).
    assert config["ensemble_scheduling"] == {
        "max_inflight_requests": 0,
        "step": [
            {
                "model_name": "pre",
                "model_version": -1,
                "input_map": {"X": "IN"},
                "output_map": {"Y": "OUT"},
                "model_namespace": "",
            }
        ],
    }
    assert config["model_transaction_policy"] == {"decoupled": False}


def test_explicit_load_brings_the_members_and_unload_dependents_takes_them(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit")
    try:
        assert server.repository_index(ready=True) == []
        server.load_model("outer")  # needs pipe, which needs pre and post
        ready = {r["name"] for r in server.repository_index(ready=True)}
        assert ready == {"outer", "pipe", "pre", "post"}
        server.load_model("pre_only")
        server.unload("outer", unload_dependents=True, wait_until_unloaded=True)
        # pre serves on: pre_only still uses it.
        assert {r["name"] for r in server.repository_index(ready=True)} == {"pre_only", "pre"}
        server.unload("pre_only", unload_dependents=True, wait_until_unloaded=True)
        assert server.repository_index(ready=True) == []
    finally:
        server.stop()


def test_unload_without_dependents_leaves_the_members(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit", load_model=["pipe"])
    try:
        assert {r["name"] for r in server.repository_index(ready=True)} == {"pipe", "pre", "post"}
        server.unload("pipe", wait_until_unloaded=True)
        assert {r["name"] for r in server.repository_index(ready=True)} == {"pre", "post"}
    finally:
        server.stop()


def test_explicit_load_of_an_ensemble_whose_member_fails(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit")
    try:
        with pytest.raises(TritonError) as info:
            server.load_model("uses_broken")
        assert "ensemble 'uses_broken' depends on 'broken' which has no loaded version" in info.value.message
        assert reason(server, "uses_broken").startswith("Invalid argument: ensemble 'uses_broken' depends on")
    finally:
        server.stop()


def test_a_repository_with_ensembles_is_ready(repo: Path, tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    write_step_model(good, "pre", add="1")
    write_ensemble(good, "pre_only", ONE_STEP, {"IN": F}, {"OUT": F})
    server = start(good)
    try:
        assert server.failed_models() == []
        assert server.ready()
    finally:
        server.stop()


def ready_names(server: tritonpy.Server) -> set[str]:
    return {r["name"] for r in server.repository_index(ready=True)}


def wait_unloaded(server: tritonpy.Server) -> None:
    for row in server.repository_index():
        if row.get("state") == "UNLOADING":
            server.unload(row["name"], wait_until_unloaded=True, timeout=10)


def test_unloading_a_member_takes_its_ensembles_down_until_it_loads_again(repo: Path) -> None:
    # As Triton 2.51: the ensembles using an unloaded model are unloaded with it
    # (requests: "has no available versions"), and come back when it loads.
    server = start(repo, model_control_mode="explicit", load_model=["outer", "pre_only"])
    try:
        assert ready_names(server) == {"outer", "pipe", "pre", "post", "pre_only"}
        server.unload("pre", wait_until_unloaded=True)
        wait_unloaded(server)
        assert ready_names(server) == {"post"}
        with pytest.raises(TritonError, match="'outer' has no available versions"):
            server.model("outer").predict({"IN": np.ones((1, 2), np.float32)})
        server.load_model("pre")
        assert ready_names(server) == {"outer", "pipe", "pre", "post", "pre_only"}
        out = server.model("outer").predict({"IN": np.ones((1, 2), np.float32)})
        np.testing.assert_array_equal(out["OUT"], [[102.0, 102.0]])
    finally:
        server.stop()


def test_unload_dependents_leaves_models_loaded_by_name(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit")
    try:
        server.load_model("post")
        server.load_model("pipe")
        server.unload("pipe", unload_dependents=True, wait_until_unloaded=True)
        wait_unloaded(server)
        assert ready_names(server) == {"post"}  # loaded by name: it stays (pre, loaded for pipe, goes)
    finally:
        server.stop()


def test_explicit_load_of_a_cycle_says_so(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit")
    try:
        with pytest.raises(TritonError) as info:
            server.load_model("loop_a")
        assert info.value.message == (
            "load failed for model 'loop_a': circular dependency between ensembles: "
            "loop_a -> ... -> loop_b -> loop_a"
        )
        assert info.value.code is ErrorCode.INVALID_ARG
    finally:
        server.stop()


def test_poll_loads_a_new_ensemble_after_its_new_member(tmp_path: Path) -> None:
    repo = tmp_path / "polled"
    repo.mkdir()
    server = start(repo, model_control_mode="poll", repository_poll_secs=0)
    try:
        # Named so that a plain name order would load the ensemble first.
        write_ensemble(
            repo, "a_pipeline", [step("z_member", {"X": "IN"}, {"Y": "OUT"})], {"IN": F}, {"OUT": F}
        )
        write_step_model(repo, "z_member", add="1")
        server.manager.poll()
        assert ready_names(server) == {"a_pipeline", "z_member"}
        out = server.model("a_pipeline").predict({"IN": np.ones((1, 2), np.float32)})
        np.testing.assert_array_equal(out["OUT"], [[2.0, 2.0]])
    finally:
        server.stop()


def test_a_member_gone_from_the_repository_fails_requests_as_unavailable(tmp_path: Path) -> None:
    repo = tmp_path / "polled"
    repo.mkdir()
    write_step_model(repo, "member", add="1")
    write_ensemble(repo, "uses_member", [step("member", {"X": "IN"}, {"Y": "OUT"})], {"IN": F}, {"OUT": F})
    server = start(repo, model_control_mode="poll", repository_poll_secs=0)
    try:
        shutil.rmtree(repo / "member")
        server.manager.poll()
        with pytest.raises(TritonError) as info:
            server.model("uses_member").predict({"IN": np.ones((1, 2), np.float32)})
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert info.value.message == (
            # The member stays known, unloaded (as Triton keeps a removed model).
            "in ensemble 'uses_member', Request for unknown model: 'member' has no available versions"
        )
    finally:
        server.stop()


def test_a_nested_streaming_ensemble_whose_next_step_is_refused_does_not_hang(tmp_path: Path) -> None:
    # The inner ensemble's response reaches the outer one, whose next step is refused
    # at once (its member is gone): the outer request fails and cancels the inner
    # one, on the thread that delivered the inner's response.
    repo = tmp_path / "polled"
    repo.mkdir()
    write_sender_models(repo)
    write_model(repo, "addsub")
    write_model(repo, "gone")
    i32 = "TYPE_INT32"
    write_ensemble(
        repo,
        "inner",
        [
            step("decoupled", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "s"}),
            step("addsub", {"INPUT0": "s", "INPUT1": "B"}, {"OUTPUT0": "OUT"}),
        ],
        {"A": i32, "B": i32},
        {"OUT": i32},
        dims="4",
    )
    write_ensemble(
        repo,
        "outer",
        [
            step("inner", {"A": "A", "B": "B"}, {"OUT": "t"}),
            step("gone", {"INPUT0": "t", "INPUT1": "t"}, {"OUTPUT0": "OUT"}),
        ],
        {"A": i32, "B": i32},
        {"OUT": i32},
        dims="4",
    )
    server = tritonpy.Server(model_repository=repo, model_control_mode="poll", repository_poll_secs=0)
    server.backends.register("stepbk", StepBackend())
    server.backends.register("testbk", TestBackend())
    server.start()
    try:
        assert server.failed_models() == []
        shutil.rmtree(repo / "gone")
        server.manager.poll()
        a = np.ones((1, 4), np.int32)
        responses = server.model("outer").infer(
            {"A": a, "B": a}, request_id="nested-refused", parameters={"wait_cancel": True}
        )
        with pytest.raises(TritonError, match="in ensemble 'outer', Request for unknown model: 'gone'"):
            next(responses)
        assert CANCELLED.saw("nested-refused")
    finally:
        server.stop()


def test_an_ensemble_unloaded_by_name_stays_unloaded_when_its_member_loads(repo: Path) -> None:
    server = start(repo, model_control_mode="explicit", load_model=["pre_only"])
    try:
        server.unload("pre", wait_until_unloaded=True)  # takes pre_only down with it
        server.unload("pre_only", wait_until_unloaded=True)  # ... and now by name
        server.load_model("pre")
        assert ready_names(server) == {"pre"}
    finally:
        server.stop()
