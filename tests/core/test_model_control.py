"""Model control in-process: explicit and poll modes, reloads, overrides, failures.

The ``scale`` backend multiplies INPUT0 by the number in its model file, so a
reload that brings new files changes what clients get back; a model file that
says ``fail`` fails instance initialization; ``slow`` takes a while to load.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    BackendInfo,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_wait import wait_until


class Scale:
    """OUTPUT0 = INPUT0 * k, k read from the version's model.txt at model initialization."""

    def __init__(self) -> None:
        self.finalized: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.loading = 0  # model initializations under way now
        self.most_loading = 0

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def model_initialize(self, model: Model) -> None:
        text = (model.version_path / "model.txt").read_text().strip()
        if text == "slow":
            with self.lock:
                self.loading += 1
                self.most_loading = max(self.most_loading, self.loading)
            time.sleep(0.3)
            with self.lock:
                self.loading -= 1
            text = "5"
        model.state = text

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        if instance.model.state == "fail":
            raise TritonError.internal("this model file says fail")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        k = int(instance.model.state)
        return [
            InferenceResponse({"OUTPUT0": Tensor.from_numpy("OUTPUT0", r.inputs["INPUT0"].data * k)})
            for r in requests
        ]

    @hookimpl
    def model_finalize(self, model: Model) -> None:
        with self.lock:
            self.finalized.append((model.name, model.version))


CONFIG = """backend: "scale"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""

OVERRIDE = {
    "backend": "scale",
    "max_batch_size": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
}


def write_model(repo: Path, name: str, versions: dict[int, str], config: str = CONFIG) -> Path:
    folder = repo / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(config)
    for version, text in versions.items():
        (folder / str(version)).mkdir(exist_ok=True)
        (folder / str(version) / "model.txt").write_text(text)
    return folder


def bump(path: Path) -> None:
    """Move a file's modification time on, as an edit a second later would."""
    later = time.time() + 2
    os.utime(path, (later, later))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    write_model(repo, "a", {1: "2"})
    write_model(repo, "b", {1: "3"})
    write_model(repo, "c", {1: "4"})
    return repo


@pytest.fixture
def backend() -> Scale:
    return Scale()


def make_server(repo: Path, backend: Scale, **options: object) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo, **options)
    server.backends.register("scale", backend)
    return server


@pytest.fixture
def explicit(repo: Path, backend: Scale) -> Iterator[tritonpy.Server]:
    server = make_server(repo, backend, model_control_mode="explicit", load_model=["a"])
    server.start()
    yield server
    server.stop()


def infer(server: tritonpy.Server, name: str, version: int = -1) -> int:
    out = server.model(name, version).predict({"INPUT0": np.array([[1, 1]], np.int32)})
    return int(out["OUTPUT0"][0, 0])


def states(server: tritonpy.Server) -> list[tuple[str, str, str]]:
    return [(e["name"], e.get("version", ""), e.get("state", "")) for e in server.repository_index()]


def version_rows(server: tritonpy.Server, name: str) -> dict[str, tuple[str, str]]:
    """Model ``name``'s rows of the repository index: version -> (state, reason)."""
    return {
        e["version"]: (e["state"], e.get("reason", ""))
        for e in server.repository_index()
        if e["name"] == name
    }


def wait_for(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    wait_until(check, "the awaited state", timeout)


# -- explicit mode ------------------------------------------------------------------------------


def test_explicit_mode_loads_only_the_named_models(explicit: tritonpy.Server) -> None:
    # Models never loaded are listed by name only, as Triton's index lists them.
    assert states(explicit) == [("a", "1", "READY"), ("b", "", ""), ("c", "", "")]
    assert explicit.repository_index(ready=True) == [{"name": "a", "version": "1", "state": "READY"}]
    assert infer(explicit, "a") == 2
    with pytest.raises(TritonError, match="Request for unknown model: 'b' is not found"):
        infer(explicit, "b")
    assert explicit.ready()


def test_star_loads_every_model(repo: Path, backend: Scale) -> None:
    with make_server(repo, backend, model_control_mode="explicit", load_model=["*"]) as server:
        assert [s for _, _, s in states(server)] == ["READY"] * 3


def test_an_unknown_startup_model_is_a_failure(repo: Path, backend: Scale) -> None:
    with make_server(repo, backend, model_control_mode="explicit", load_model=["a", "nosuch"]) as server:
        assert ("nosuch", "", "failed to poll model 'nosuch': model not found in any model repository") in (
            server.failed_models()
        )
        assert not server.ready()  # strict readiness, as Triton refuses to start
        assert infer(server, "a") == 2


def test_load_and_unload(explicit: tritonpy.Server, backend: Scale) -> None:
    explicit.load_model("b")
    assert infer(explicit, "b") == 3
    explicit.unload_model("b")
    with pytest.raises(TritonError, match="'b' has no available versions"):
        infer(explicit, "b")
    explicit.unload("b", wait_until_unloaded=True, timeout=10)
    assert ("b", "1", "UNAVAILABLE") in states(explicit)
    assert {"name": "b", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"} in (
        explicit.repository_index()
    )
    assert ("b", 1) in backend.finalized
    assert explicit.ready()  # an unloaded model does not make the server unready
    handle = explicit.load("b")  # tritonserver's spelling
    assert handle.ready() and infer(explicit, "b") == 3


def test_unloading_what_is_not_loaded_is_a_no_op(explicit: tritonpy.Server) -> None:
    explicit.unload_model("b")
    explicit.unload_model("nosuch")
    assert states(explicit)[1:] == [("b", "", ""), ("c", "", "")]


def test_an_unknown_model_fails_to_load_with_triton_s_words(explicit: tritonpy.Server) -> None:
    with pytest.raises(TritonError) as raised:
        explicit.load_model("nosuch")
    assert raised.value.message.startswith("failed to load 'nosuch', failed to poll from model repository")
    assert raised.value.code is ErrorCode.INTERNAL


def test_a_load_of_an_unchanged_model_reloads_nothing(explicit: tritonpy.Server, backend: Scale) -> None:
    before = explicit.get_version("a")
    explicit.load_model("a")
    assert explicit.get_version("a") is before and not backend.finalized


def test_a_changed_model_is_reloaded_and_the_old_version_unloaded(
    explicit: tritonpy.Server, repo: Path, backend: Scale
) -> None:
    before = explicit.get_version("a")
    (repo / "a" / "1" / "model.txt").write_text("7")
    bump(repo / "a" / "1" / "model.txt")
    explicit.load_model("a")  # returns once the new version serves
    assert infer(explicit, "a") == 7
    assert explicit.get_version("a") is not before
    wait_for(lambda: ("a", 1) in backend.finalized)


def test_a_config_override_replaces_config_pbtxt_until_a_plain_load(explicit: tritonpy.Server) -> None:
    override = {**OVERRIDE, "instance_group": [{"kind": "KIND_CPU", "count": 3}]}
    explicit.load_model("a", json.dumps(override))
    assert explicit.model_config("a")["instance_group"][0]["count"] == 3
    assert len(explicit.get_version("a").instances) == 3
    assert infer(explicit, "a") == 2  # same files
    explicit.load_model("a")  # no override: the repository's config again
    assert explicit.model_config("a")["instance_group"][0]["count"] == 1


def test_file_overrides_bring_the_model_and_change_its_behaviour(
    explicit: tritonpy.Server, repo: Path
) -> None:
    explicit.load_model("a", json.dumps(OVERRIDE), {"1/model.txt": b"11"})
    assert infer(explicit, "a") == 11
    folder = explicit.get_version("a").model.repository_path
    assert repo not in folder.parents and folder.is_dir()
    explicit.load_model("a")  # back to the repository's files; the private folder goes
    assert infer(explicit, "a") == 2
    wait_for(lambda: not folder.exists())


def test_file_overrides_can_switch_versions(explicit: tritonpy.Server) -> None:
    explicit.load_model("a", json.dumps(OVERRIDE), {"3/model.txt": b"9"})
    assert infer(explicit, "a") == 9 and explicit.get_version("a").version == 3
    wait_for(lambda: ("a", "1", "UNAVAILABLE") in states(explicit))
    assert ("a", "3", "READY") in states(explicit)


@pytest.mark.parametrize(
    ("config", "files"),
    [
        ({**OVERRIDE, "backend": "nosuch"}, None),
        ({**OVERRIDE, "max_batch_size": -1}, None),
        (OVERRIDE, {"1/model.txt": b"fail"}),
    ],
)
def test_a_failed_reload_keeps_the_old_version_serving(
    explicit: tritonpy.Server, config: dict[str, object], files: dict[str, bytes] | None
) -> None:
    before = explicit.get_version("a")
    with pytest.raises(TritonError) as raised:
        explicit.load_model("a", json.dumps(config), files)
    assert raised.value.message.startswith("load failed for model 'a': ")
    assert raised.value.code is ErrorCode.INVALID_ARG
    assert explicit.get_version("a") is before and infer(explicit, "a") == 2
    assert ("a", "1", "READY") in states(explicit)
    assert explicit.ready()


def test_a_failed_first_load_is_reported_and_cleared_by_an_unload(
    explicit: tritonpy.Server, repo: Path
) -> None:
    (repo / "b" / "1" / "model.txt").write_text("fail")
    with pytest.raises(TritonError, match="version 1 is at UNAVAILABLE state: .*this model file says fail"):
        explicit.load_model("b")
    row = next(e for e in explicit.repository_index() if e["name"] == "b")
    assert row["state"] == "UNAVAILABLE" and "this model file says fail" in row["reason"]
    assert not explicit.ready()  # strict readiness, as Triton
    explicit.unload_model("b")
    assert explicit.ready()  # tritonpy: unloading the failed model clears its failure


def test_a_load_that_fails_for_one_version_serves_none(
    explicit: tritonpy.Server, repo: Path, backend: Scale
) -> None:
    """As Triton 2.51 (observed): the versions that did load are unloaded ("unloaded" in
    the index) and the model has no available version; version 0 is a version too."""
    folder = write_model(repo, "v", {0: "2", 1: "3", 2: "fail"})
    with (folder / "config.pbtxt").open("a") as config:
        config.write("version_policy: { all: { } }\n")
    with pytest.raises(TritonError, match="^load failed for model 'v': version 2 is at UNAVAILABLE state: "):
        explicit.load_model("v")
    # The unload runs on a thread of its own: UNLOADING until its requests finish.
    wait_for(lambda: "UNLOADING" not in {state for state, _ in version_rows(explicit, "v").values()})
    rows = version_rows(explicit, "v")
    assert rows["0"] == rows["1"] == ("UNAVAILABLE", "unloaded")
    assert rows["2"][0] == "UNAVAILABLE" and "this model file says fail" in rows["2"][1]
    with pytest.raises(TritonError, match="Request for unknown model: 'v' has no available versions"):
        explicit.model("v").metadata()
    (folder / "2" / "model.txt").write_text("4")
    explicit.load_model("v")
    assert [infer(explicit, "v", version) for version in (0, 1, 2)] == [2, 3, 4]


def test_a_model_one_of_whose_versions_fails_at_start_serves_none(repo: Path, backend: Scale) -> None:
    folder = write_model(repo, "v", {1: "2", 2: "fail"})
    with (folder / "config.pbtxt").open("a") as config:
        config.write("version_policy: { all: { } }\n")
    with make_server(repo, backend, exit_on_error=False) as server:
        # Version 1 loaded, then is unloaded on a thread of its own (UNLOADING a moment).
        wait_for(lambda: version_rows(server, "v").get("1", ("",))[0] != "UNLOADING")
        rows = version_rows(server, "v")
        assert rows["1"] == ("UNAVAILABLE", "unloaded") and rows["2"][1].startswith("Internal")
        assert infer(server, "a") == 2  # the other models serve


def test_load_and_unload_are_refused_outside_explicit_mode(repo: Path, backend: Scale) -> None:
    for mode in ("none", "poll"):
        with make_server(repo, backend, model_control_mode=mode, repository_poll_secs=0) as server:
            for call in (lambda: server.load_model("a"), lambda: server.unload_model("a")):
                with pytest.raises(TritonError, match="explicit model load / unload is not allowed"):
                    call()
            assert infer(server, "a") == 2


def test_an_unknown_mode_is_refused(repo: Path, backend: Scale) -> None:
    with pytest.raises(TritonError, match="--model-control-mode"):
        make_server(repo, backend, model_control_mode="sometimes")


def test_a_model_may_load_another_and_itself_from_execute(explicit: tritonpy.Server) -> None:
    """BLS ``load_model`` from inside execute: the caller's own version is replaced
    while its request is in flight; the load must not wait for that request."""
    api = explicit.backends.server_api
    result: list[object] = []

    class Loader(Scale):
        @hookimpl
        def execute(
            self, instance: ModelInstance, requests: Sequence[InferenceRequest]
        ) -> list[InferenceResponse]:
            api.load_model("b")
            api.load_model(instance.model.name, json.dumps({**OVERRIDE, "backend": "loader"}))
            result.append(api.is_model_ready("b"))
            return super().execute(instance, requests)

    explicit.backends.register("loader", Loader())
    explicit.load_model("c", json.dumps({**OVERRIDE, "backend": "loader"}))
    assert infer(explicit, "c") == 4
    assert result == [True]
    assert infer(explicit, "b") == 3


# -- reloads under traffic ---------------------------------------------------------------------


def test_reloads_under_traffic_fail_no_request(explicit: tritonpy.Server, repo: Path) -> None:
    """Six threads infer while the model is reloaded over and over (its files, its instance
    count, a file override); every request is answered, none fails, and once a load
    returned every later request sees the new model."""
    stop = threading.Event()
    failures: list[str] = []
    counts = [0] * 6

    def client(index: int) -> None:
        while not stop.is_set():
            try:
                infer(explicit, "a")
                counts[index] += 1
            except Exception as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(counts))]
    for t in threads:
        t.start()
    try:
        for round_ in range(4):
            k = 20 + round_
            (repo / "a" / "1" / "model.txt").write_text(str(k))
            bump(repo / "a" / "1" / "model.txt")
            explicit.load_model("a")
            assert infer(explicit, "a") == k
            override = {**OVERRIDE, "instance_group": [{"kind": "KIND_CPU", "count": 1 + round_ % 2 + 1}]}
            explicit.load_model("a", json.dumps(override))
            explicit.load_model("a", json.dumps(override), {"1/model.txt": str(k + 100).encode()})
            assert infer(explicit, "a") == k + 100
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert failures == []
    assert all(counts), counts


# -- poll mode ------------------------------------------------------------------------------------


@pytest.fixture
def polled(repo: Path, backend: Scale) -> Iterator[tritonpy.Server]:
    # Polls are driven by the test (manager.poll) for determinism; one test lets the thread run.
    server = make_server(repo, backend, model_control_mode="poll", repository_poll_secs=0)
    server.start()
    yield server
    server.stop()


def test_poll_picks_up_added_removed_and_changed_models(polled: tritonpy.Server, repo: Path) -> None:
    assert [s for _, _, s in states(polled)] == ["READY"] * 3
    write_model(repo, "d", {1: "6"})
    (repo / "b" / "1" / "model.txt").write_text("8")
    bump(repo / "b" / "1" / "model.txt")
    kept = repo.parent / "c_kept"
    shutil.copytree(repo / "c", kept)  # modification times kept: the same stamp when it comes back
    shutil.rmtree(repo / "c")
    polled.manager.poll()
    assert infer(polled, "d") == 6 and infer(polled, "b") == 8
    assert "c" not in [e["name"] for e in polled.repository_index()]
    # As Triton 2.51 (observed): a removed model stays known, unloaded.
    with pytest.raises(TritonError, match="^Request for unknown model: 'c' has no available versions$"):
        infer(polled, "c")
    with pytest.raises(TritonError, match="'c' version 1 is not at ready state") as info:
        polled.get_version("c", 1)
    assert info.value.code is ErrorCode.UNAVAILABLE
    polled.manager.poll()  # nothing more to do for it
    shutil.move(kept, repo / "c")  # back, unchanged: loaded again
    polled.poll_model_repository()  # tritonserver's spelling of the same poll
    assert ("c", "1", "READY") in states(polled)


def test_a_poll_asked_for_outside_poll_mode_is_refused(explicit: tritonpy.Server) -> None:
    with pytest.raises(TritonError, match="^polling is disabled$") as info:
        explicit.poll_model_repository()
    assert info.value.code is ErrorCode.UNAVAILABLE


def test_poll_follows_the_version_policy_without_a_gap(polled: tritonpy.Server, repo: Path) -> None:
    write_model(repo, "a", {2: "9"})  # latest policy: version 2 replaces version 1
    polled.manager.poll()
    assert infer(polled, "a") == 9 and polled.get_version("a").version == 2


def test_a_broken_change_does_not_take_down_what_serves(polled: tritonpy.Server, repo: Path) -> None:
    (repo / "a" / "config.pbtxt").write_text('backend: "scale"\nmax_batch_size: [')  # half written
    polled.manager.poll()
    assert infer(polled, "a") == 2
    polled.manager.poll()  # not tried again until it changes
    (repo / "a" / "config.pbtxt").write_text(CONFIG.replace("dims: [ 2 ]", "dims: [ -1 ]"))
    (repo / "a" / "1" / "model.txt").write_text("12")
    bump(repo / "a" / "config.pbtxt")
    polled.manager.poll()
    assert infer(polled, "a") == 12


def test_the_poll_thread_runs_every_interval(repo: Path, backend: Scale) -> None:
    with make_server(repo, backend, model_control_mode="poll", repository_poll_secs=0.1) as server:
        write_model(repo, "e", {1: "13"})
        wait_for(lambda: any(e == ("e", "1", "READY") for e in states(server)))
        assert infer(server, "e") == 13


def test_models_load_in_parallel(tmp_path: Path, backend: Scale) -> None:
    repo = tmp_path / "slow"
    for i in range(4):
        write_model(repo, f"s{i}", {1: "slow"})
    with make_server(repo, backend, model_load_thread_count=4) as server:
        assert all(infer(server, f"s{i}") == 5 for i in range(4))
    assert backend.most_loading > 1  # a slow model does not hold the others back
    backend.most_loading = 0
    with make_server(repo, backend, model_load_thread_count=1) as server:
        assert all(infer(server, f"s{i}") == 5 for i in range(4))
    assert backend.most_loading == 1


def test_a_failed_version_is_retried(tmp_path: Path) -> None:
    attempts: list[int] = []

    class Flaky(Scale):
        @hookimpl
        def instance_initialize(self, instance: ModelInstance) -> None:
            attempts.append(1)
            if len(attempts) < 3:
                raise TritonError.unavailable("not yet")

    repo = tmp_path / "flaky"
    write_model(repo, "f", {1: "2"}, CONFIG.replace('"scale"', '"flaky"'))
    server = tritonpy.Server(model_repository=repo, model_load_retry_count=2)
    server.backends.register("flaky", Flaky())
    with server:
        assert infer(server, "f") == 2 and len(attempts) == 3


def test_a_request_that_found_a_replaced_version_goes_to_the_new_one(
    explicit: tritonpy.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between a request's lookup and its queueing, made wide: the lookup
    returns the version a reload just retired; the request is served by the new one."""
    old = explicit.get_version("a")
    explicit.load_model("a", json.dumps(OVERRIDE), {"1/model.txt": b"31"})
    lookup = explicit.manager.get_version
    stale = [old, old]  # infer() looks the model up twice: decoupled or not, then to queue

    def racing(name: str, version: int | str | None = None, namespace: str = "") -> object:
        return stale.pop() if stale else lookup(name, version, namespace)

    monkeypatch.setattr(explicit.manager, "get_version", racing)
    assert infer(explicit, "a") == 31
    assert not stale and old.stats.snapshot()["inference_stats"]["fail"]["count"] == 0


# -- repositories registered at run time -------------------------------------------------------


def test_a_registered_repository_serves_its_folders_some_under_mapped_names(
    explicit: tritonpy.Server, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    write_model(extra, "d", {1: "6"})
    write_model(
        extra, "folder", {1: "7"}, CONFIG.replace('backend: "scale"', 'name: "folder"\nbackend: "scale"')
    )
    with pytest.raises(TritonError, match="model not found in any model repository"):
        explicit.load_model("d")
    explicit.register_model_repository(str(extra), {"folder": "archive.tar.gz"})
    assert ("d", "", "") in states(explicit)
    assert ("archive.tar.gz", "", "") in states(explicit)
    assert "folder" not in {name for name, _, _ in states(explicit)}
    explicit.load_model("d")
    explicit.load_model("archive.tar.gz")  # the config's own name is replaced, as Triton does
    assert (infer(explicit, "d"), infer(explicit, "archive.tar.gz")) == (6, 7)
    assert explicit.model("archive.tar.gz").config()["name"] == "archive.tar.gz"
    with pytest.raises(TritonError, match="model not found in any model repository"):
        explicit.load_model("folder")  # a mapped folder is found under its mapped name only

    explicit.unregister_model_repository(str(extra))
    assert infer(explicit, "d") == 6  # loaded models stay loaded
    assert {name for name, _, _ in states(explicit)} == {"a", "b", "c"}  # the index no longer shows them
    with pytest.raises(TritonError, match="model not found in any model repository"):
        explicit.load_model("d")
    explicit.register_model_repository(str(extra))  # again, without the mapping
    explicit.load_model("folder")
    assert infer(explicit, "folder") == 7


def test_registration_refusals_in_tritons_words(
    explicit: tritonpy.Server, repo: Path, tmp_path: Path, backend: Scale
) -> None:
    extra, other = tmp_path / "extra", tmp_path / "other"
    write_model(extra, "d", {1: "6"})
    write_model(other, "e", {1: "8"})

    def refused(call, code: ErrorCode, message: str) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(TritonError) as caught:
            call()
        assert (caught.value.code, caught.value.message) == (code, message)

    missing = str(tmp_path / "missing")
    refused(
        lambda: explicit.register_model_repository(missing),
        ErrorCode.INVALID_ARG,
        f"failed to register '{missing}', repository not found",
    )
    refused(
        lambda: explicit.register_model_repository(str(extra), {"d": "x", "e": "x"}),
        ErrorCode.INVALID_ARG,
        f"failed to register '{extra}', there is a conflicting mapping for 'x'",
    )
    refused(
        lambda: explicit.register_model_repository(str(repo)),
        ErrorCode.ALREADY_EXISTS,
        f"model repository '{repo}' has already been registered",
    )
    explicit.register_model_repository(str(extra), {"d": "x"})
    refused(
        lambda: explicit.register_model_repository(str(extra) + "/"),
        ErrorCode.ALREADY_EXISTS,
        f"model repository '{extra}/' has already been registered",
    )
    refused(
        lambda: explicit.register_model_repository(str(other), {"e": "x"}),
        ErrorCode.ALREADY_EXISTS,
        "failed to register 'x', there is a conflicting mapping for 'x'",
    )
    refused(
        lambda: explicit.unregister_model_repository(missing),
        ErrorCode.INVALID_ARG,
        f"failed to unregister '{missing}', repository not found",
    )
    explicit.unregister_model_repository(str(repo))  # a repository given at start, too
    with pytest.raises(TritonError, match="model not found in any model repository"):
        explicit.load_model("b")
    assert infer(explicit, "a") == 2

    with make_server(repo, backend) as static:
        refused(
            lambda: static.register_model_repository(str(extra)),
            ErrorCode.UNSUPPORTED,
            "repository registration is not allowed if model control mode is not EXPLICIT",
        )
        refused(
            lambda: static.unregister_model_repository(str(repo)),
            ErrorCode.UNSUPPORTED,
            "repository unregistration is not allowed if model control mode is not EXPLICIT",
        )


def test_a_mapped_name_wins_over_a_folder_of_that_name(explicit: tritonpy.Server, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    write_model(extra, "d", {1: "9"})
    explicit.register_model_repository(str(extra), {"d": "b"})  # the start repository has a folder 'b'
    explicit.load_model("b")
    assert infer(explicit, "b") == 9
    assert [row for row in states(explicit) if row[0] == "b"] == [("b", "1", "READY")]


def test_a_load_of_a_blank_name_or_one_that_leaves_the_repository_is_refused(
    explicit: tritonpy.Server, tmp_path: Path
) -> None:
    """Triton's core (since 26.04) checks the name of a model to load; an unload is not
    checked. Names that only look odd are looked for as usual."""
    (tmp_path / "outside").mkdir()  # a folder next to the repository, for '../outside'
    for name in ("", " ", "\t \n", "\v\f\r"):
        with pytest.raises(TritonError) as info:
            explicit.load_model(name)
        assert info.value.code is ErrorCode.INVALID_ARG
        assert info.value.message == "Model name cannot be empty. Please enter a valid name to deploy."
    for name in ("..", " ..", "../outside", "a/../b", "/etc/passwd", "a/", "a/b"):
        with pytest.raises(TritonError) as info:
            explicit.load_model(name)
        assert info.value.code is ErrorCode.INVALID_ARG
        assert info.value.message == (
            f"invalid model name '{name}', model name must not contain path traversal characters"
        )
    for name in ("...", "..a", "a.b"):
        with pytest.raises(TritonError, match="not found in any model repository"):
            explicit.load_model(name)
    explicit.unload_model("../outside")  # no such model: nothing to unload, no complaint
    assert infer(explicit, "a") == 2
