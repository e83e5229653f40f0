"""Real engines, served: tiny ONNX graphs built into plans with TensorRT's builder on the GPU
(identity; add with a dynamic batch; one input with two profiles; add with CUDA graphs;
NonZero, whose output's shape depends on the data; a ragged input with a batch_input and a
batch_output; a resize by a shape tensor, built with the network API),
served by ``tritonpy serve`` over HTTP and gRPC, outputs into clients' CUDA shared-memory
regions without the host. Marked ``gpu``: skipped without tensorrt, cuda-python or a CUDA
device (so everywhere this project's machines have run so far)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _gpu_with_tensorrt() -> str:
    """Why these tests cannot run here ("" when they can)."""
    if importlib.util.find_spec("tensorrt") is None:
        return "tensorrt is not installed (pip install 'tritonpy-backend-tensorrt[cu12]')"
    from tritonpy_backend_tensorrt._runtime import TensorRT

    return TensorRT.probe().reason


SKIP = _gpu_with_tensorrt()
if SKIP:
    pytest.skip(SKIP, allow_module_level=True)

import tensorrt as trt  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from tritonpy_cudaregions import Region, said_on_gpu  # noqa: E402
from tritonpy_serverprocess import ServerProcess  # noqa: E402

Shapes = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def _onnx(kind: str, dims: list[Any]) -> bytes:
    outputs = [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, dims)]
    if kind in ("identity", "nonzero"):
        op = "Identity" if kind == "identity" else "NonZero"
        nodes = [helper.make_node(op, ["INPUT0"], ["OUTPUT0"])]
        inputs = [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, dims)]
        if kind == "nonzero":  # [rank, count of nonzero values]: known once it has run
            outputs = [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT64, [len(dims), "K"])]
    else:
        nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"])]
        inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("INPUT0", "INPUT1")]
    graph = helper.make_graph(nodes, kind, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _ragged_onnx() -> bytes:
    """Y = 2 * X for a flat X; OFFSETS (a batch_input) is read too (added times 0), so that
    TensorRT keeps it as an input."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [
        helper.make_node("Mul", ["X", "two"], ["doubled"]),
        helper.make_node("ReduceSum", ["OFFSETS"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nothing"]),
        helper.make_node("Add", ["doubled", "nothing"], ["Y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N"]),
        helper.make_tensor_value_info("OFFSETS", TensorProto.FLOAT, ["B"]),
    ]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N"])]
    graph = helper.make_graph(nodes, "ragged", inputs, outputs, initializer=[two, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _plan(onnx_bytes: bytes, profiles: list[Shapes]) -> bytes:
    """An engine built here, on this GPU, by this TensorRT."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(onnx_bytes), [parser.get_error(i) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    for shapes in profiles:
        profile = builder.create_optimization_profile()
        for name, (low, opt, high) in shapes.items():
            profile.set_shape(name, low, opt, high)
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    assert plan is not None
    return bytes(plan)


def _model(root: Path, name: str, plan: bytes, config: str = "") -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.plan").write_bytes(plan)
    if config:
        (root / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("plans")
    batch = ((1, 4), (4, 4), (8, 4))
    _model(root, "identity", _plan(_onnx("identity", [2, 4]), []))
    _model(root, "nonzero", _plan(_onnx("nonzero", [6]), []))
    _model(root, "add", _plan(_onnx("add", ["N", 4]), [{"INPUT0": batch, "INPUT1": batch}]))
    two = [
        {"INPUT0": ((1, 4), (2, 4), (4, 4))},
        {"INPUT0": ((5, 4), (8, 4), (16, 4))},
    ]
    plan = _plan(_onnx("identity", ["N", 4]), two)
    _model(root, "profiles", plan, 'instance_group [ { kind: KIND_GPU profile: ["0", "1"] } ]\n')
    _model(root, "profile1", plan, 'instance_group [ { kind: KIND_GPU profile: ["1"] } ]\n')
    _model(
        root,
        "graphs",
        _plan(_onnx("add", ["N", 4]), [{"INPUT0": batch, "INPUT1": batch}]),
        "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 20000 }\n"
        "optimization { cuda { graphs: true\n"
        "  graph_spec [ { batch_size: 4 graph_lower_bound { batch_size: 2 } } ] } }\n",
    )
    _model(
        root,
        "add_mixed",  # four requests wait for each other (up to half a second): one batch mixes them
        _plan(_onnx("add", ["N", 4]), [{"INPUT0": batch, "INPUT1": batch}]),
        "max_batch_size: 8\n"
        "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 500000 }\n",
    )
    _model(
        root,
        "ragged",
        _plan(_ragged_onnx(), [{"X": ((1,), (8,), (64,)), "OFFSETS": ((1,), (4,), (8,))}]),
        "max_batch_size: 8\n"
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "OFFSETS"\n'
        '                data_type: TYPE_FP32 source_input: "X" } ]\n'
        'batch_output [ { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]\n'
        "dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 500000 }\n",
    )
    log = tmp_path_factory.mktemp("logs") / "server.log"
    proc = ServerProcess([root], "--exit-on-error=false", "--allow-client-shm=true", log=log)
    yield proc
    proc.stop()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[tuple[Any, Any]]:
    if request.param == "http":
        http = httpclient.InferenceServerClient(server.url, concurrency=8)
        yield http, httpclient
        http.close()
    else:
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        yield grpc, grpcclient
        grpc.close()


def _infer(client: Any, module: Any, model: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    inputs = []
    for name, array in feeds.items():
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return np.asarray(client.infer(model, inputs).as_numpy("OUTPUT0"))


def test_auto_complete_reads_the_engines(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.url)
    identity = http.get_model_config("identity")
    assert identity["platform"] == "tensorrt_plan" and identity["max_batch_size"] == 0
    assert [(i["name"], i["data_type"], i["dims"]) for i in identity["input"]] == [
        ("INPUT0", "TYPE_FP32", [2, 4])
    ]
    add = http.get_model_config("add")
    assert add["max_batch_size"] == 8 and "dynamic_batching" in add
    assert [i["dims"] for i in add["input"]] == [[4], [4]]
    assert http.get_model_config("profile1")["max_batch_size"] == 16
    http.close()


def test_identity_and_add_answer(client: tuple[Any, Any]) -> None:
    c, module = client
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(_infer(c, module, "identity", {"INPUT0": x}), x)
    for rows in (1, 3, 8):
        a = np.random.default_rng(rows).normal(size=(rows, 4)).astype(np.float32)
        np.testing.assert_allclose(_infer(c, module, "add", {"INPUT0": a, "INPUT1": a}), 2 * a, rtol=1e-6)


def test_an_output_whose_shape_depends_on_the_data(client: tuple[Any, Any]) -> None:
    c, module = client
    for values, where in (
        ([0, 2, 0, 0, 5, 1], [[1, 4, 5]]),
        ([0.0] * 6, np.zeros((1, 0))),
        ([1.0] * 6, [range(6)]),
    ):
        got = _infer(c, module, "nonzero", {"INPUT0": np.array(values, np.float32)})
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.asarray(where, np.int64).reshape(1, -1))


def test_the_profile_is_chosen_by_shape_and_checked(client: tuple[Any, Any]) -> None:
    c, module = client
    for rows in (2, 12):
        x = np.full((rows, 4), rows, np.float32)
        np.testing.assert_array_equal(_infer(c, module, "profiles", {"INPUT0": x}), x)
    with pytest.raises(Exception, match="model expected the shape of dimension 0 to be between 5 and 16"):
        _infer(c, module, "profile1", {"INPUT0": np.ones((2, 4), np.float32)})


def test_dynamic_batches_of_several_sizes_through_cuda_graphs(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.url, concurrency=8)
    arrays = [np.full((1, 4), i, np.float32) for i in range(8)]
    pending = []
    for a in arrays:
        inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        for t in inputs:
            t.set_data_from_numpy(a)
        pending.append(http.async_infer("graphs", inputs))
    for a, p in zip(arrays, pending):
        np.testing.assert_array_equal(p.get_result().as_numpy("OUTPUT0"), 2 * a)
    http.close()


def _add_request(module: Any, a: np.ndarray, region: Region | None) -> tuple[list[Any], list[Any]]:
    inputs = [module.InferInput(n, list(a.shape), "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    out = module.InferRequestedOutput("OUTPUT0")
    if region is not None:
        out.set_shared_memory(region.name, a.nbytes)
    return inputs, [out]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_output_goes_into_a_cuda_region_without_the_host(server: ServerProcess, protocol: str) -> None:
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.url if protocol == "http" else server.grpc_url)
    a = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float32)
    region = Region(client, f"trt_out_{protocol}", a.nbytes)
    try:
        inputs, outputs = _add_request(module, a, region)
        client.infer("add", inputs, outputs=outputs)
        np.testing.assert_allclose(region.contents([3, 4]), 2 * a, rtol=1e-6)
    finally:
        region.close()
        client.close()
    assert said_on_gpu(server, "add", "OUTPUT0"), (
        f"the server's log ({server.log}): the output went via the host"
    )


def test_a_batch_mixing_cuda_regions_and_plain_outputs(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url, concurrency=4)
    feeds = [np.full((1, 4), float(i + 1), np.float32) for i in range(4)]
    regions = [Region(client, f"trt_mixed_{i}", 16) if i % 2 == 0 else None for i in range(4)]
    try:
        pending = []
        for a, region in zip(feeds, regions):
            inputs, outputs = _add_request(httpclient, a, region)
            pending.append(client.async_infer("add_mixed", inputs, outputs=outputs))
        results = [p.get_result() for p in pending]
        for i, (a, region, result) in enumerate(zip(feeds, regions, results)):
            got = region.contents([1, 4]) if region is not None else result.as_numpy("OUTPUT0")
            np.testing.assert_array_equal(got, 2 * a, err_msg=f"request {i}")
        stats = client.get_inference_statistics("add_mixed")["model_stats"][0]
        assert int(stats["execution_count"]) < 4, "the 4 requests never shared a batch"
    finally:
        for region in regions:
            if region is not None:
                region.close()
        client.close()


def test_ragged_requests_run_as_one_batch_and_get_their_own_shapes(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.url, concurrency=3)
    feeds = [np.arange(n, dtype=np.float32).reshape(1, n) + 10 * n for n in (2, 5, 1)]
    try:
        pending = []
        for x in feeds:
            tensor = httpclient.InferInput("X", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            pending.append(client.async_infer("ragged", [tensor]))
        for x, p in zip(feeds, pending):
            np.testing.assert_array_equal(p.get_result().as_numpy("Y"), 2 * x)
        stats = client.get_inference_statistics("ragged")["model_stats"][0]
        assert int(stats["execution_count"]) < 3, "the 3 ragged requests never shared a batch"
    finally:
        client.close()


def test_a_plan_that_is_not_one_is_refused_saying_why(tmp_path: Path) -> None:
    _model(tmp_path, "bad", b"not a plan")
    log = tmp_path / "server.log"
    proc = ServerProcess([tmp_path], "--exit-on-error=false", "--strict-readiness=false", log=log)
    try:
        http = httpclient.InferenceServerClient(proc.url)
        (entry,) = http.get_model_repository_index()
        assert entry["state"] == "UNAVAILABLE"
        assert "cannot deserialize model.plan on GPU 0" in entry["reason"]
        http.close()
    finally:
        proc.stop()


def _shape_tensor_plan() -> bytes:
    """The model of Triton's own shape tensor tests: DUMMY_INPUT0 [-1,-1,-1] resized to the
    values of INPUT0 (an INT32 shape tensor: the batch size, then 2 values), and OUTPUT0,
    an INT64 shape tensor of DUMMY_OUTPUT0's shape."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    dummy = network.add_input("DUMMY_INPUT0", trt.float32, (-1, -1, -1))
    values = network.add_input("INPUT0", trt.int32, (3,))
    resize = network.add_resize(dummy)
    resize.set_input(1, values)  # the output's shape, from the shape tensor's values
    resized = resize.get_output(0)
    resized.name = "DUMMY_OUTPUT0"
    network.mark_output(resized)
    shape_tensor = network.add_shape(resized).get_output(0)
    shape_tensor.name = "OUTPUT0"
    assert network.mark_output_for_shapes(shape_tensor)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    low, opt, high = (1, 1, 1), (4, 16, 16), (8, 32, 32)
    profile.set_shape("DUMMY_INPUT0", low, opt, high)
    profile.set_shape_input("INPUT0", low, opt, high)
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    assert plan is not None
    return bytes(plan)


@pytest.fixture(scope="module")
def shapes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("shape_plans")
    _model(
        root,
        "shapes",  # requests wait for each other (up to half a second): equal values batch together
        _shape_tensor_plan(),
        "max_batch_size: 8\n"
        "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 500000 }\n",
    )
    proc = ServerProcess([root], "--exit-on-error=false", log=tmp_path_factory.mktemp("logs") / "server.log")
    yield proc
    proc.stop()


def _shape_request(module: Any, batch: int, values: list[int]) -> tuple[list[Any], list[Any]]:
    dummy = module.InferInput("DUMMY_INPUT0", [batch, 4, 4], "FP32")
    dummy.set_data_from_numpy(np.ones((batch, 4, 4), np.float32))
    shape = module.InferInput("INPUT0", [len(values)], "INT32")
    shape.set_data_from_numpy(np.array(values, np.int32))
    outputs = [module.InferRequestedOutput("DUMMY_OUTPUT0"), module.InferRequestedOutput("OUTPUT0")]
    return [dummy, shape], outputs


def test_shape_tensors_set_the_output_shape_and_come_back(shapes_server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(shapes_server.url, concurrency=4)
    try:
        config = http.get_model_config("shapes")
        assert [(i["name"], i["is_shape_tensor"]) for i in config["input"]] == [
            ("DUMMY_INPUT0", False),
            ("INPUT0", True),
        ]
        # batches 1 and 2 with [8, 8], one with [16, 16]: only the equal values share a batch
        sent = [(1, [8, 8]), (2, [8, 8]), (1, [16, 16])]
        pending = [http.async_infer("shapes", *_shape_request(httpclient, b, v)) for b, v in sent]
        for (batch, values), p in zip(sent, pending):
            result = p.get_result()
            assert result.as_numpy("DUMMY_OUTPUT0").shape == (batch, *values)
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([values] * batch, np.int64))
        inputs, outputs = _shape_request(httpclient, 1, [8, 33])
        with pytest.raises(
            Exception, match="The shape value at index 2 is expected to be in range from 1 to 32"
        ):
            http.infer("shapes", inputs, outputs=outputs)
    finally:
        http.close()
