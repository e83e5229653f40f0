"""The in-process API with a backend registered in-process: no network."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)


class AddSub:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1; can be told to block or raise."""

    def __init__(self) -> None:
        self.barrier: threading.Barrier | None = None
        self.release = threading.Event()
        self.release.set()
        self.executing: list[str] = []

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        self.executing.append(instance.name)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        self.release.wait(timeout=10)
        if instance.model.parameters.get("raise") == "yes":
            raise RuntimeError("model exploded")
        out = []
        for r in requests:
            a, b = r.inputs["INPUT0"].data, r.inputs["INPUT1"].data
            out.append(
                InferenceResponse(
                    {
                        "OUTPUT0": Tensor.from_numpy("OUTPUT0", a + b),
                        "OUTPUT1": Tensor.from_numpy("OUTPUT1", a - b),
                    }
                )
            )
        return out


CONFIG = """
backend: "addsub"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] }},
        {{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] }} ]
instance_group [ {{ count: {count}, kind: {kind} }} ]
{extra}
"""


def _model(repo: Path, name: str, count: int = 1, kind: str = "KIND_CPU", extra: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.txt").write_text("")
    (repo / name / "config.pbtxt").write_text(CONFIG.format(count=count, kind=kind, extra=extra))


@pytest.fixture(scope="module")
def backend() -> AddSub:
    return AddSub()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: AddSub) -> Iterator[tritonpy.Server]:
    repo = tmp_path_factory.mktemp("repo")
    _model(repo, "addsub", count=2)
    _model(repo, "exploding", extra='parameters { key: "raise" value: { string_value: "yes" } }')
    _model(repo, "on_gpu", kind="KIND_GPU")
    server = tritonpy.Server(model_repository=repo, exit_on_error=False)
    server.backends.register("addsub", backend)
    with server:
        yield server


A = np.array([[1, 2, 3, 4]], np.int32)
B = np.array([[4, 3, 2, 1]], np.int32)


def test_infer_like_tritonserver(server: tritonpy.Server) -> None:
    model = server.model("addsub")
    (response,) = list(model.infer(inputs={"INPUT0": A, "INPUT1": B}, request_id="r1"))
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), A + B)
    assert (response.id, response.model_name, response.model_version) == ("r1", "addsub", 1)


def test_requests_as_tritonserver_builds_them(server: tritonpy.Server) -> None:
    """Inputs set after the request was made, as tritonserver's own example does; its
    InferenceRequest(model, ...) with its fields; infer(inference_request=...)."""
    model = server.model("addsub")
    request = model.create_request()
    request.inputs["INPUT0"] = A
    request.inputs["INPUT1"] = B.tolist()  # anything a Tensor is made from
    request.request_id = "late"
    (response,) = list(model.infer(request))
    np.testing.assert_array_equal(response.outputs["OUTPUT0"].to_numpy(), A + B)
    assert response.id == "late"

    responses: queue.SimpleQueue[tritonpy.InferenceResponse] = queue.SimpleQueue()
    built = tritonpy.InferenceRequest(
        model,
        request_id="r2",
        timeout=5_000_000,
        inputs={"INPUT0": A},
        parameters={"k": 1},
        output_memory_type="cpu",
        response_queue=responses,
    )
    built.inputs["INPUT1"] = B
    assert (built.model, built.request_id, built.timeout, built.timeout_us) == (
        model,
        "r2",
        5_000_000,
        5_000_000,
    )
    assert isinstance(built, InferenceRequest)  # also the backend SDK's request
    (response,) = list(model.infer(inference_request=built))
    np.testing.assert_array_equal(response.outputs["OUTPUT1"].to_numpy(), A - B)
    assert responses.get(timeout=10).id == "r2"  # the request's own queue got it too

    # By model name, it is the SDK's request (what Server.infer takes).
    by_name = tritonpy.InferenceRequest("addsub", 1, {"INPUT0": Tensor.from_numpy("INPUT0", A)})
    assert (by_name.model_name, by_name.model_version, by_name.model) == ("addsub", 1, None)
    by_keyword = tritonpy.InferenceRequest(model_name="addsub", model_version=1, inputs={})
    assert by_keyword.model_name == "addsub"


def test_values_set_on_a_request_are_checked_when_it_is_submitted(server: tritonpy.Server) -> None:
    model = server.model("addsub")
    request = model.create_request(inputs={"INPUT0": A, "INPUT1": B})
    request.parameters["bad"] = [1]  # type: ignore[assignment]
    with pytest.raises(
        tritonpy.InvalidArgumentError, match="parameter 'bad' must be a bool, int, float or str"
    ):
        model.infer(request)
    request = model.create_request(inputs={"INPUT0": A})
    request.inputs["INPUT1"] = object()  # type: ignore[assignment]
    with pytest.raises(tritonpy.InvalidArgumentError, match="input 'INPUT1' for model 'addsub' must be"):
        model.infer(request)
    with pytest.raises(tritonpy.InvalidArgumentError):
        model.infer(
            tritonpy.InferenceRequest(model, inputs={"INPUT0": A, "INPUT1": B}, output_memory_type="tpu")
        )


def test_predict_and_requested_outputs(server: tritonpy.Server) -> None:
    out = server.model("addsub").predict({"INPUT0": A, "INPUT1": B}, requested_output_names=["OUTPUT1"])
    assert list(out) == ["OUTPUT1"]
    np.testing.assert_array_equal(out["OUTPUT1"], A - B)


async def test_async_infer(server: tritonpy.Server) -> None:
    responses = [r async for r in server.model("addsub").async_infer(inputs={"INPUT0": A, "INPUT1": B})]
    np.testing.assert_array_equal(responses[0].outputs["OUTPUT0"].to_numpy(), A + B)


def test_inputs_that_are_not_arrays_are_refused_by_name(server: tritonpy.Server) -> None:
    """A value numpy would wrap as a one-element object array (read as BYTES) is refused."""
    import tritonclient.http as httpclient

    model = server.model("addsub")
    wrapped = httpclient.InferInput("INPUT0", [1, 4], "INT32")
    wrapped.set_data_from_numpy(A)
    cases = {
        "tritonclient.http._infer_input.InferInput": wrapped,
        "dict": {"data": [1, 2, 3, 4]},
        "NoneType": None,
        "list whose rows differ in length": [[1, 2, 3, 4], [1]],
        "list: its elements are neither all numbers nor all str/bytes": [[1, None, 3, 4]],
    }
    for given, value in cases.items():
        for call in (model.predict, lambda inputs: list(model.infer(inputs=inputs))):
            with pytest.raises(TritonError) as refused:
                call({"INPUT0": value, "INPUT1": B})
            assert refused.value.code.name == "INVALID_ARG"
            message = refused.value.message
            assert message.startswith("input 'INPUT0' for model 'addsub' must be a numpy array"), message
            assert f"got {given}" in message, message
    with pytest.raises(TritonError, match="InferInput is for the network clients"):
        model.predict({"INPUT0": wrapped, "INPUT1": B})


def test_array_likes_are_taken(server: tritonpy.Server) -> None:
    """SDK Tensors, objects numpy converts (``__array__``) and lists are inputs like arrays.
    Python numbers take the model's data type; arrays keep theirs, and floats are never
    truncated to an integer type: validation names both types."""

    class Column:
        def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
            return A

    model = server.model("addsub")
    for value in (Tensor.from_numpy("INPUT0", A), Column(), A.tolist(), tuple(map(tuple, A.tolist()))):
        np.testing.assert_array_equal(model.predict({"INPUT0": value, "INPUT1": B})["OUTPUT0"], A + B)
    out = model.predict({"INPUT0": [[1, 2, 3, 4]], "INPUT1": [[1, 1, 1, 1]]})["OUTPUT0"]
    assert out.dtype == np.int32 and out.tolist() == [[2, 3, 4, 5]]
    with pytest.raises(TritonError, match="data-type is 'INT64', but model 'addsub' expects 'INT32'"):
        model.predict({"INPUT0": np.array([[1, 2, 3, 4]], np.int64), "INPUT1": B})
    with pytest.raises(TritonError, match="data-type is 'FP64', but model 'addsub' expects 'INT32'"):
        model.predict({"INPUT0": [[1.5, 2, 3, 4]], "INPUT1": B})
    with pytest.raises(TritonError, match="data-type is 'INT64', but model 'addsub' expects 'INT32'"):
        model.predict({"INPUT0": [[2**40, 2, 3, 4]], "INPUT1": B})  # out of INT32's range


def test_server_metadata_name_is_triton_unless_id_given() -> None:
    from tritonpy.cli import build_parser, options_from_args

    def server_id(*flags: str) -> str:
        args = build_parser().parse_args(["serve", "--model-repository", "m", *flags])
        return options_from_args(args).server_id

    assert server_id() == "triton"
    assert server_id("--id", "edge-7") == "edge-7"
    assert tritonpy.Server(model_repository=[]).metadata()["name"] == "triton"


def test_metadata_and_readiness(server: tritonpy.Server) -> None:
    assert server.live()
    assert not server.ready()  # strict readiness: on_gpu failed on this GPU-less host
    meta = server.model("addsub").metadata()
    assert meta["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 4]}
    assert server.model("addsub").config()["instance_group"][0]["count"] == 2


def test_models_and_model_properties_as_tritonserver_gives_them(server: tritonpy.Server) -> None:
    models = server.models()
    assert models[("addsub", 1)] == {"name": "addsub", "version": 1, "state": "READY"}
    (failed,) = [row for key, row in models.items() if key[0] == "on_gpu"]
    assert failed["state"] == "UNAVAILABLE" and "gpu" in failed["reason"].lower()
    assert set(server.models(exclude_not_ready=True)) == {("addsub", 1), ("exploding", 1)}
    handle = models["addsub"]  # a name alone: the model's handle
    assert isinstance(handle, tritonpy.ModelHandle)
    assert handle.predict({"INPUT0": A, "INPUT1": B})["OUTPUT0"].tolist() == (A + B).tolist()
    with pytest.raises(KeyError, match="Unknown Model: nope"):
        models["nope"]
    assert handle.batch_properties() is tritonpy.ModelBatchFlag.FIRST_DIM
    assert handle.transaction_properties() is tritonpy.ModelTxnPropertyFlag.ONE_TO_ONE
    (stats,) = handle.statistics()["model_stats"]
    assert (stats["name"], stats["version"]) == ("addsub", "1") and stats["inference_count"] >= 1
    assert handle.config(config_version=1)["name"] == "addsub"
    with pytest.raises(TritonError, match="model configuration version 2 not supported"):
        handle.config(config_version=2)


def test_metrics_in_process(server: tritonpy.Server) -> None:
    server.model("addsub").predict({"INPUT0": A, "INPUT1": B})
    text = server.metrics()
    assert "# TYPE nv_inference_request_success counter" in text
    (line,) = [x for x in text.splitlines() if x.startswith('nv_inference_request_success{model="addsub"')]
    assert int(line.rsplit(" ", 1)[1]) >= 1
    assert server.metrics(tritonpy.MetricFormat.PROMETHEUS) != ""
    with pytest.raises(TritonError, match="not supported"):
        server.metrics(7)  # type: ignore[arg-type]
    with pytest.raises(TritonError, match="^polling is disabled$"):
        server.poll_model_repository()


def test_tritonserver_options_and_enums_are_taken(tmp_path: Path) -> None:
    """A program written for ``tritonserver`` (its option names, enums and helper
    classes) runs with the import changed."""
    repo = tmp_path / "repo"
    _model(repo, "addsub")
    _model(repo, "other")
    options = tritonpy.Options(
        model_repository=str(repo),
        model_control_mode=tritonpy.ModelControlMode.EXPLICIT,
        strict_model_config=True,
        rate_limiter_mode=tritonpy.RateLimitMode.EXEC_COUNT,
        rate_limiter_resources=[tritonpy.RateLimiterResource("R", 2, 0)],
        log_warn=True,
        exit_timeout=5,
        metrics=False,
        cache_config={"local": {"size": 1 << 20}},
        cache_directory="/opt/tritonserver/caches",  # no effect here
        enable_peer_access=False,
    )
    options.startup_models = ["addsub"]  # attribute style, as tritonserver's examples
    assert (options.load_model, options.model_control_mode) == (["addsub"], "explicit")
    assert (options.disable_auto_complete_config, options.rate_limit, options.rate_limit_resource) == (
        True,
        "execution_count",
        ["R:2:0"],
    )
    assert (options.exit_timeout_secs, options.allow_metrics, options.cache_config) == (
        5.0,
        False,
        {"local": {"size": "1048576"}},
    )
    server = tritonpy.Server(options)
    server.backends.register("addsub", AddSub())
    with server:
        assert set(server.models()) == {("addsub", 1), ("other", -1)}
        other = server.load("other")
        assert other.predict({"INPUT0": A, "INPUT1": B})["OUTPUT1"].tolist() == (A - B).tolist()
    with pytest.raises(TypeError, match="unknown server option 'nope'"):
        tritonpy.Server(nope=1)
    assert tritonpy.Options(model_namespacing=True).model_namespacing  # tests/core/test_model_namespacing.py


def test_infer_submits_at_once_and_fills_a_response_queue(server: tritonpy.Server) -> None:
    inbox: queue.SimpleQueue[tritonpy.InferenceResponse] = queue.SimpleQueue()
    responses = server.model("addsub").infer({"INPUT0": A, "INPUT1": B}, response_queue=inbox)
    queued = inbox.get(timeout=10)  # there before any iteration
    np.testing.assert_array_equal(np.from_dlpack(queued.outputs["OUTPUT0"]), A + B)
    (iterated,) = list(responses)
    assert iterated is queued and inbox.empty()
    with pytest.raises(tritonpy.InvalidArgumentError, match="Unsupported Memory Type String"):
        server.model("addsub").infer({"INPUT0": A, "INPUT1": B}, output_memory_type="unsupported")
    with pytest.raises(
        tritonpy.InvalidArgumentError, match="parameter 'p' must be a bool, int, float or str"
    ):
        server.model("addsub").infer({"INPUT0": A, "INPUT1": B}, parameters={"p": None})
    (cpu,) = server.model("addsub").infer({"INPUT0": A, "INPUT1": B}, output_memory_type="cpu")
    assert cpu.outputs["OUTPUT1"].memory_type == tritonpy.MemoryType.CPU


async def test_async_infer_fills_an_asyncio_queue(server: tritonpy.Server) -> None:
    inbox: asyncio.Queue[tritonpy.InferenceResponse] = asyncio.Queue()
    responses = server.model("addsub").async_infer({"INPUT0": A, "INPUT1": B}, response_queue=inbox)
    queued = await asyncio.wait_for(inbox.get(), 10)
    assert [r async for r in responses] == [queued]


def test_a_server_not_started_and_bad_options_raise_as_tritonserver(tmp_path: Path) -> None:
    with pytest.raises(tritonpy.InvalidArgumentError, match="^Server not started$"):
        tritonpy.Server(model_repository=tmp_path).ready()
    odd = tritonpy.Server(server_id=1, model_repository=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="server_id must be a str"):
        odd.start()
    with pytest.raises(tritonpy.InvalidArgumentError, match="Model repository must be specified"):
        tritonpy.Server(model_repository=None).start()
    with pytest.raises(tritonpy.InternalError, match="failed to stat model repository path"):
        tritonpy.Server(model_repository=tmp_path / "nope").start()


def test_what_front_ends_read_of_a_model_is_plain_values(server: tritonpy.Server) -> None:
    """``model_spec`` and ``model_config_proto``: what a front end decodes against and
    gRPC's ModelConfig, with the lookup's errors; no ``LoadedVersion`` crosses."""
    spec = server.model_spec("addsub", "1")
    assert sorted(spec.inputs) == ["INPUT0", "INPUT1"] and spec.version == 1
    config = server.model_config_proto("addsub")
    assert config.name == "addsub" and config.instance_group[0].count == 2
    for lookup in (server.model_spec, server.model_config_proto):
        with pytest.raises(TritonError, match="unknown model: 'nope'") as info:
            lookup("nope")
        assert info.value.code.name == "NOT_FOUND"
        with pytest.raises(TritonError) as unavailable:
            lookup("on_gpu")
        assert unavailable.value.code.name == "NOT_FOUND"


def test_kind_gpu_without_gpu_is_a_clear_load_error(server: tritonpy.Server) -> None:
    (entry,) = [e for e in server.repository_index() if e["name"] == "on_gpu"]
    assert entry["state"] == "UNAVAILABLE"
    assert "gpu" in entry["reason"].lower()
    with pytest.raises(TritonError) as info:
        server.model("on_gpu").predict({"INPUT0": A, "INPUT1": B})
    assert info.value.code.name == "NOT_FOUND"  # Triton: "has no available versions" is 404


def test_errors(server: tritonpy.Server) -> None:
    nope = server.model("nope")  # a handle may be taken before its model loads, as in tritonserver
    with pytest.raises(tritonpy.NotFoundError, match="unknown model: 'nope'") as info:
        nope.infer({"INPUT0": A, "INPUT1": B})  # refused when submitted, before any iteration
    assert info.value.code.name == "NOT_FOUND"
    (refused,) = nope.infer({"INPUT0": A, "INPUT1": B}, raise_on_error=False)
    assert isinstance(refused.error, tritonpy.NotFoundError)
    assert not nope.ready()
    with pytest.raises(TritonError, match="missing required input"):
        server.model("addsub").predict({"INPUT0": A})
    with pytest.raises(TritonError, match="model exploded") as boom:
        server.model("exploding").predict({"INPUT0": A, "INPUT1": B})
    assert boom.value.code.name == "INTERNAL"
    (failed,) = server.model("exploding").infer({"INPUT0": A, "INPUT1": B}, raise_on_error=False)
    assert failed.error is not None
    # and the server still serves
    assert server.model("addsub").predict({"INPUT0": A, "INPUT1": B})["OUTPUT0"].shape == (1, 4)


def test_instances_execute_concurrently(server: tritonpy.Server, backend: AddSub) -> None:
    """Two requests, two instances: both are inside execute at once (a barrier of 2)."""
    backend.barrier = threading.Barrier(2)
    backend.executing.clear()
    try:
        results: list[object] = []

        def call() -> None:
            results.append(server.model("addsub").predict({"INPUT0": A, "INPUT1": B}))

        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert len(results) == 2, "a barrier of 2 was never passed: instances ran one at a time"
        assert sorted(backend.executing) == ["addsub_0_0", "addsub_0_1"]
    finally:
        backend.barrier = None


async def test_event_loop_never_blocks_on_execute(server: tritonpy.Server, backend: AddSub) -> None:
    backend.release.clear()
    try:
        task = asyncio.ensure_future(
            server.infer_async(server.model("addsub").create_request({"INPUT0": A, "INPUT1": B}))
        )
        ticks = 0
        for _ in range(5):  # the loop keeps running while execute is blocked
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 5 and not task.done()
        backend.release.set()
        response = await asyncio.wait_for(task, 10)
        np.testing.assert_array_equal(response.outputs["OUTPUT0"].data, A + B)
    finally:
        backend.release.set()


def test_stop_waits_for_in_flight_requests(tmp_path: Path) -> None:
    slow = AddSub()
    slow.release.clear()
    _model(tmp_path, "addsub")
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("addsub", slow)
    server.start()
    result: dict[str, object] = {}
    caller = threading.Thread(
        target=lambda: result.setdefault("out", server.model("addsub").predict({"INPUT0": A, "INPUT1": B}))
    )
    caller.start()
    while not slow.executing:
        threading.Event().wait(0.005)
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive(), "stop returned while a request was in flight"
    with pytest.raises(TritonError, match="Server is stopping"):
        server.model("addsub").predict({"INPUT0": A, "INPUT1": B})
    slow.release.set()
    stopper.join(10)
    caller.join(10)
    np.testing.assert_array_equal(result["out"]["OUTPUT0"], A + B)  # type: ignore[index]


class Gated(AddSub):
    """AddSub whose instances say they are ready only while ``open`` names them."""

    def __init__(self) -> None:
        super().__init__()
        self.open: set[str] = set()

    @hookimpl
    def instance_ready(self, instance: ModelInstance) -> bool:
        return instance.name in self.open


def test_backend_readiness_hook(tmp_path: Path) -> None:
    backend = Gated()
    _model(tmp_path, "gated", count=2)
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("addsub", backend)
    with server:
        assert not server.model_ready("gated")  # loaded, but the backend says no
        backend.open = {"gated_0_0"}
        assert not server.model_ready("gated")  # every instance must say yes
        backend.open = {"gated_0_0", "gated_0_1"}
        assert server.model_ready("gated") and asyncio.run(server.model_ready_async("gated"))
        backend.open = set()
        assert not asyncio.run(server.model_ready_async("gated"))
        # Requests are still served: readiness is advice for the orchestrator.
        assert "OUTPUT0" in server.model("gated").predict({"INPUT0": A, "INPUT1": B})
