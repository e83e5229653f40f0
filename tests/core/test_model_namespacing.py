"""Model namespacing (``model_namespacing`` / ``--model-namespacing``) in process: one
model name in several repositories, as Triton resolves it (its QA test
L0_model_namespacing, and its answers checked against the real server).

Each repository holds a ``scale`` model ``composing`` with its own factor, and an
ensemble that runs it: the answer shows which ``composing`` a request reached.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_ensembles import step, write_ensemble
from tritonpy_scale import CONFIG, Scale
from tritonpy_sdk import ErrorCode, TritonError

AMBIGUOUS = (
    "There are 2 identifiers of model 'composing' in global map, "
    "model namespace must be provided to resolve ambiguity."
)


def write_scale(repo: Path, name: str, k: int) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.txt").write_text(str(k))
    (repo / name / "config.pbtxt").write_text(CONFIG)


def write_runner(repo: Path, name: str, member: str = "composing") -> None:
    """An ensemble ``name`` of one step: ``member``."""
    write_ensemble(
        repo,
        name,
        [step(member, {"INPUT0": "INPUT0"}, {"OUTPUT0": "OUTPUT0"})],
        {"INPUT0": "TYPE_INT32"},
        {"OUTPUT0": "TYPE_INT32"},
        dims="2",
    )


@pytest.fixture
def repos(tmp_path: Path) -> list[Path]:
    """``a``: composing (×2) and run_a; ``b``: composing (×3) and run_b; both: ``same``,
    an ensemble of each repository's composing."""
    a, b = tmp_path / "a", tmp_path / "b"
    for repo, k, runner in ((a, 2, "run_a"), (b, 3, "run_b")):
        write_scale(repo, "composing", k)
        write_runner(repo, runner)
        write_runner(repo, "same")
    return [a, b]


def make_server(repos: list[Path], **options: object) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repos, model_namespacing=True, **options)
    server.backends.register("scale", Scale())
    return server


def infer(server: tritonpy.Server, name: str) -> int:
    return int(server.model(name).predict({"INPUT0": np.array([[1, 1]], np.int32)})["OUTPUT0"][0, 0])


def refused(server: tritonpy.Server, name: str) -> TritonError:
    with pytest.raises(TritonError) as err:
        infer(server, name)
    return err.value


def test_each_ensemble_runs_the_member_of_its_own_repository(repos: list[Path]) -> None:
    with make_server(repos) as server:
        assert infer(server, "run_a") == 2
        assert infer(server, "run_b") == 3
        for name in ("composing", "same"):  # in both repositories: which one is not told
            err = refused(server, name)
            assert err.code is ErrorCode.INVALID_ARG
            assert err.message == AMBIGUOUS.replace("'composing'", f"'{name}'")
            assert not server.model_ready(name)
            with pytest.raises(TritonError, match="ambiguity"):
                server.model_metadata(name)
            with pytest.raises(TritonError, match=f"requested model '{name}' is not available"):
                server.model_statistics(name)
        err = refused(server, "nosuch")
        assert err.code is ErrorCode.INVALID_ARG
        assert err.message == "Request for unknown model: 'nosuch' is not found"
        # Every model is reported: the statistics of all models, the index (by
        # repository, then name: Triton's order), the metrics with their repository.
        names = [s["name"] for s in server.model_statistics()]
        assert sorted(names) == ["composing", "composing", "run_a", "run_b", "same", "same"]
        index = [(e["name"], e["state"]) for e in server.repository_index()]
        assert index == [(n, "READY") for n in ("composing", "run_a", "same", "composing", "run_b", "same")]
        metrics = server.metrics()
        for repo in repos:
            assert f'nv_inference_count{{model="composing",namespace="{repo}",version="1"}}' in metrics
        assert f'nv_inference_count{{model="composing",namespace="{repos[0]}",version="1"}} 1' in metrics
        assert f'nv_inference_count{{model="composing",namespace="{repos[1]}",version="1"}} 1' in metrics


def test_names_in_one_repository_only_need_no_namespace(repos: list[Path]) -> None:
    for repo in repos:
        shutil.rmtree(repo / "same")
    shutil.rmtree(repos[1] / "composing")
    with make_server(repos) as server:
        assert infer(server, "composing") == 2
        # run_b has no composing beside it: the only one there is (Triton's fuzzy match).
        assert infer(server, "run_b") == 2
        assert server.model_ready("composing")
        assert server.model_metadata("composing")["name"] == "composing"
        assert [s["name"] for s in server.model_statistics("composing")] == ["composing"]


def test_without_namespacing_one_name_in_two_repositories_is_refused(repos: list[Path]) -> None:
    server = tritonpy.Server(model_repository=repos, exit_on_error=False, strict_readiness=False)
    server.backends.register("scale", Scale())
    with server:
        err = refused(server, "composing")
        assert err.code is ErrorCode.NOT_FOUND
        assert "namespace" not in server.metrics()
        states = {e["name"]: e.get("reason", "") for e in server.repository_index()}
        assert "exists in multiple model repositories" in states["composing"]


def test_an_ensemble_with_no_member_it_can_tell_does_not_load(tmp_path: Path, repos: list[Path]) -> None:
    c = tmp_path / "c"
    write_runner(c, "run_c")  # composing is in a and b, not in c
    with make_server([*repos, c], exit_on_error=False, strict_readiness=False) as server:
        reasons = {e["name"]: e.get("reason", "") for e in server.repository_index()}
        assert "contains models that are not available or ambiguous: composing" in reasons["run_c"]
        assert infer(server, "run_a") == 2


def test_poll_follows_members_that_come_and_go(repos: list[Path], tmp_path: Path) -> None:
    """Triton's test_dynamic_resolution: with a's composing gone, both ensembles run b's."""
    with make_server(repos, model_control_mode="poll", repository_poll_secs=0) as server:
        aside = tmp_path / "aside"
        shutil.move(repos[0] / "composing", aside)
        server.poll_model_repository()
        assert infer(server, "run_a") == 3
        assert infer(server, "run_b") == 3
        assert infer(server, "composing") == 3  # its name means one model again
        shutil.move(aside, repos[0] / "composing")
        server.poll_model_repository()
        assert infer(server, "run_a") == 2
        assert infer(server, "run_b") == 3
        assert refused(server, "composing").message == AMBIGUOUS


def test_explicit_load_and_unload_take_every_model_of_the_name(repos: list[Path]) -> None:
    """As Triton: an ensemble's load loads each model its steps name from every
    repository; an unload by name unloads them all, and they stop answering to it."""
    with make_server(repos, model_control_mode="explicit") as server:
        server.load_model("run_a")
        assert infer(server, "run_a") == 2
        assert refused(server, "composing").message == AMBIGUOUS
        states = [e.get("state") for e in server.repository_index() if e["name"] == "composing"]
        assert states == ["READY", "READY"]
        server.load_model("same")  # both repositories' ensembles
        with pytest.raises(TritonError, match="ambiguity"):
            server.model_metadata("same")
        server.unload_model("composing")  # both, and the ensembles that use them
        assert server.manager.wait_unloaded("composing", 10)
        assert server.manager.wait_unloaded("same", 10)
        states = [(e["name"], e.get("state")) for e in server.repository_index()]
        assert ("composing", "READY") not in states and ("same", "READY") not in states
        err = refused(server, "composing")
        assert err.code is ErrorCode.NOT_FOUND
        assert err.message == "Identifier of model 'composing' is not found in global map"
        err = refused(server, "run_a")  # unloaded as a user of composing: still known
        assert err.code is ErrorCode.NOT_FOUND
        assert err.message == f"Request for unknown model: '{repos[0]}::run_a' has no available versions"
        server.load_model("composing")  # brings back the ensembles unloading it took down
        assert infer(server, "run_a") == 2
        assert refused(server, "composing").message == AMBIGUOUS
        assert not server.model_ready("run_b")  # never loaded


def test_load_model_at_start_takes_every_model_a_step_names(repos: list[Path]) -> None:
    with make_server(repos, model_control_mode="explicit", load_model=["run_a"]) as server:
        assert infer(server, "run_a") == 2
        assert refused(server, "composing").message == AMBIGUOUS  # both loaded, as a load does
        assert not server.model_ready("run_b")
