"""The torch backend served by ``tritonpy serve``: tritonclient over HTTP and gRPC against the
scripted models called directly; errors keep the server serving; two instances run at once."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonpy
from torch_testmodels import MLP, AddSub, Busy, Embed, Raises, Scale, TinyCNN, Words, config, io, save_script
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]

DYNAMIC = "dynamic_batching { max_queue_delay_microseconds: 2000 }"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("torch_repo")
    scripted = {
        "mlp": save_script(
            MLP(),
            root / "mlp",
            config([io("INPUT__0", "TYPE_FP32", [16])], [io("OUTPUT__0", "TYPE_FP32", [4])], 8, DYNAMIC),
        ),
        "addsub": save_script(
            AddSub(),
            root / "addsub",
            config(
                [io("A__0", "TYPE_FP32", [4]), io("B__1", "TYPE_FP32", [4])],
                [io("SUM__0", "TYPE_FP32", [4]), io("DIFF__1", "TYPE_FP32", [4])],
                4,
            ),
        ),
        # Only the backend: the core fills in platform pytorch_libtorch, as Triton's does.
        "scale": save_script(
            Scale(),
            root / "scale",
            'backend: "pytorch"\n'
            + 'input [ { name: "image" data_type: TYPE_FP32 dims: [ 3 ] }, '
            + '{ name: "scale" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
            + 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]\n',
        ),
        "embed": save_script(
            Embed(),
            root / "embed",
            config([io("ids__0", "TYPE_INT64", [5])], [io("vectors__0", "TYPE_FP32", [5, 8])], 4, DYNAMIC),
        ),
        "words": save_script(
            Words(),
            root / "words",
            config(
                [io("WORDS__0", "TYPE_STRING", [-1])],
                [io("UPPER__0", "TYPE_STRING", [-1]), io("LENGTHS__1", "TYPE_INT64", [-1])],
            ),
        ),
        "raises": save_script(
            Raises(), root / "raises", config([io("x__0", "TYPE_FP32", [2])], [io("y__0", "TYPE_FP32", [2])])
        ),
        "cnn": save_script(
            TinyCNN(),
            root / "cnn",
            config(
                [io("image__0", "TYPE_FP32", [3, 16, 16])], [io("logits__0", "TYPE_FP32", [10])], 8, DYNAMIC
            ),
        ),
    }
    # A file that is not TorchScript: that model fails, the others serve.
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.pt").write_bytes(b"not TorchScript")
    (root / "broken" / "config.pbtxt").write_text(
        config([io("x", "TYPE_FP32", [1])], [io("y", "TYPE_FP32", [1])])
    )
    # A torch.export program and no config.pbtxt at all: platform torch_aoti from model.pt2,
    # the config auto-completed.
    torch.manual_seed(0)
    mlp = MLP(8, 8, 2).eval()
    batch = torch.export.Dim("batch", min=1, max=32)
    ep = torch.export.export(mlp, (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}})
    (root / "exported" / "1").mkdir(parents=True)
    torch.export.save(ep, str(root / "exported" / "1" / "model.pt2"))
    scripted["exported"] = ep.module()
    # Triton's Python-based runtime: an nn.Module class in model.py, its weights in model.pt.
    (root / "compiled" / "1").mkdir(parents=True)
    (root / "compiled" / "1" / "model.py").write_text(COMPILED_SOURCE)
    namespace: dict[str, Any] = {}
    exec(COMPILED_SOURCE, namespace)
    torch.manual_seed(3)
    compiled = namespace["Net"]().eval()
    torch.save(compiled.state_dict(), root / "compiled" / "1" / "model.pt")
    (root / "compiled" / "config.pbtxt").write_text(
        'backend: "pytorch"\nruntime: "model.py"\nmax_batch_size: 8\n'
        + 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 6 ] } ]\n'
        + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        + DYNAMIC
        + '\nparameters { key: "TORCH_COMPILE_OPTIONAL_PARAMETERS" '
        + 'value { string_value: \'{"backend": "eager"}\' } }\n'
    )
    scripted["compiled"] = compiled
    return root, scripted


COMPILED_SOURCE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 2)

    def forward(self, x):
        return torch.tanh(self.fc(x))
"""


@pytest.fixture(scope="module")
def server(
    models: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    proc = ServerProcess([models[0]], "--exit-on-error=false", "--strict-readiness=false", log=log)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(server.url, concurrency=16)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


def _infer(
    client: Any, module: Any, model: str, feeds: dict[str, np.ndarray], outputs: list[str] | None = None
) -> Any:
    inputs = []
    for name, array in feeds.items():
        dt = "BYTES" if array.dtype == object else {np.float32: "FP32", np.int64: "INT64"}[array.dtype.type]
        tensor = module.InferInput(name, list(array.shape), dt)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    requested = [module.InferRequestedOutput(n) for n in outputs] if outputs else None
    return client.infer(model, inputs, outputs=requested)


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, http: Any, grpc: Any) -> tuple[Any, Any]:
    return (http, httpclient) if request.param == "http" else (grpc, grpcclient)


def test_served_outputs_match_the_scripted_models(
    client: tuple[Any, Any], models: tuple[Path, dict[str, Any]]
) -> None:
    c, module = client
    direct = models[1]
    rng = np.random.default_rng(0)

    x = rng.normal(size=(3, 16)).astype(np.float32)
    got = _infer(c, module, "mlp", {"INPUT__0": x}).as_numpy("OUTPUT__0")
    np.testing.assert_allclose(got, direct["mlp"](torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)

    a, b = rng.normal(size=(2, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
    result = _infer(c, module, "addsub", {"A__0": a, "B__1": b})
    s, d = direct["addsub"](torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(result.as_numpy("SUM__0"), s.numpy())
    np.testing.assert_allclose(result.as_numpy("DIFF__1"), d.numpy())
    only = _infer(c, module, "addsub", {"A__0": a, "B__1": b}, outputs=["DIFF__1"])
    assert only.as_numpy("SUM__0") is None and only.as_numpy("DIFF__1") is not None

    img, sc = np.array([1, 2, 3], np.float32), np.array([0.5], np.float32)
    np.testing.assert_allclose(
        _infer(c, module, "scale", {"image": img, "scale": sc}).as_numpy("y"), [0.5, 1, 1.5]
    )

    ids = rng.integers(0, 100, size=(2, 5)).astype(np.int64)
    expected = direct["embed"](torch.from_numpy(ids)).detach().numpy()
    np.testing.assert_array_equal(
        _infer(c, module, "embed", {"ids__0": ids}).as_numpy("vectors__0"), expected
    )

    words = np.array([b"triton", "café".encode(), b"x"], dtype=object)
    result = _infer(c, module, "words", {"WORDS__0": words})
    upper, lengths = direct["words"]([w.decode() for w in words])
    assert result.as_numpy("UPPER__0").tolist() == [w.encode() for w in upper]
    assert result.as_numpy("LENGTHS__1").tolist() == lengths.tolist()

    image = rng.normal(size=(2, 3, 16, 16)).astype(np.float32)
    expected = direct["cnn"](torch.from_numpy(image)).detach().numpy()
    np.testing.assert_allclose(
        _infer(c, module, "cnn", {"image__0": image}).as_numpy("logits__0"), expected, rtol=1e-4, atol=1e-5
    )

    x = rng.normal(size=(3, 8)).astype(np.float32)
    expected = direct["exported"](torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(
        _infer(c, module, "exported", {"x": x}).as_numpy("OUTPUT__0"), expected, rtol=1e-5, atol=1e-6
    )

    x = rng.normal(size=(4, 6)).astype(np.float32)
    with torch.inference_mode():
        expected = direct["compiled"](torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(
        _infer(c, module, "compiled", {"INPUT0": x}).as_numpy("OUTPUT0"), expected, rtol=1e-5, atol=1e-6
    )


def test_configs_as_triton_reports_them(http: httpclient.InferenceServerClient) -> None:
    scale = http.get_model_config("scale")
    assert (scale["backend"], scale["platform"], scale["default_model_filename"]) == (
        "pytorch",
        "pytorch_libtorch",
        "model.pt",
    )
    compiled = http.get_model_config("compiled")
    assert (compiled["backend"], compiled["platform"], compiled["runtime"]) == (
        "pytorch",
        "pytorch_libtorch",
        "model.py",
    )
    assert compiled["default_model_filename"] == ""  # the runtime looks for model.py, then model.pt
    exported = http.get_model_config("exported")
    assert (exported["backend"], exported["platform"]) == ("pytorch", "torch_aoti")
    assert exported["max_batch_size"] == 4 and "dynamic_batching" in exported
    assert [(i["name"], i["data_type"], i["dims"]) for i in exported["input"]] == [("x", "TYPE_FP32", [8])]


def test_a_raising_model_answers_with_tritons_error_and_the_server_serves_on(client: tuple[Any, Any]) -> None:
    c, module = client
    with pytest.raises(InferenceServerException) as err:
        _infer(c, module, "raises", {"x__0": np.ones(2, np.float32)})
    assert "PyTorch execute failure: " in str(err.value) and "only non-positive inputs, please" in str(
        err.value
    )
    got = _infer(c, module, "raises", {"x__0": -np.ones(2, np.float32)}).as_numpy("y__0")
    assert got.tolist() == [1, 1]


def test_a_model_file_that_is_not_torchscript_fails_only_that_model(
    http: httpclient.InferenceServerClient,
) -> None:
    index = {m["name"]: m for m in http.get_model_repository_index()}
    assert index["broken"]["state"] == "UNAVAILABLE"
    assert "failed to load model 'broken': PytorchStreamReader" in index["broken"]["reason"]
    assert index["mlp"]["state"] == "READY"
    assert http.is_server_live()


@pytest.mark.parametrize(
    ("model", "input_name", "output_name", "features"),
    [("mlp", "INPUT__0", "OUTPUT__0", 16), ("compiled", "INPUT0", "OUTPUT0", 6)],
)
def test_dynamic_batcher_forms_batches_under_concurrency(
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
    models: tuple[Path, dict[str, Any]],
    model: str,
    input_name: str,
    output_name: str,
    features: int,
) -> None:
    before = http.get_inference_statistics(model)["model_stats"][0]
    rows = np.random.default_rng(5).normal(size=(48, 1, features)).astype(np.float32)
    done = threading.Semaphore(0)
    results: dict[int, Any] = {}

    def callback(index: int, result: Any, error: Any) -> None:
        results[index] = error or result.as_numpy(output_name)
        done.release()

    for index, row in enumerate(rows):
        tensor = grpcclient.InferInput(input_name, [1, features], "FP32")
        tensor.set_data_from_numpy(row)
        grpc.async_infer(model, [tensor], functools.partial(callback, index))
    for _ in range(48):
        assert done.acquire(timeout=30)
    with torch.no_grad():
        expected = [models[1][model](torch.from_numpy(row)).numpy() for row in rows]
    for index in range(48):  # each request got its own rows back out of the batch
        np.testing.assert_allclose(results[index], expected[index], rtol=1e-5, atol=1e-6)
    after = http.get_inference_statistics(model)["model_stats"][0]
    executions = int(after["execution_count"]) - int(before["execution_count"])
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    assert inferences == 48 and executions < 48  # some requests ran together in one forward


def test_two_instances_execute_at_the_same_time(tmp_path: Path) -> None:
    """Two KIND_CPU instances, each forward() busy for a while: their execution intervals overlap,
    so torch ran them in parallel (it releases the GIL inside forward)."""
    save_script(
        Busy(),
        tmp_path / "busy",
        config(
            [io("x__0", "TYPE_FP32", [128]), io("rounds__1", "TYPE_INT64", [1])],
            [io("y__0", "TYPE_FP32", [128])],
            extra="instance_group [ { count: 2 kind: KIND_CPU } ]\n"
            'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }',
        ),
    )
    server = tritonpy.Server(model_repository=tmp_path)
    with server:
        version = server.manager.get_version("busy", 1)
        intervals: list[tuple[float, float]] = []
        for instance in version.instances:
            program = instance.state.program
            inner = program.call

            def timed(*args: Any, inner: Any = inner) -> Any:
                start = time.monotonic()
                try:
                    return inner(*args)
                finally:
                    intervals.append((start, time.monotonic()))

            program.call = timed
        model = server.model("busy")
        feeds = {"x__0": np.ones(128, np.float32), "rounds__1": np.array([3000], np.int64)}
        model.predict(feeds)  # the JIT profiles its first runs: not those
        intervals.clear()
        threads = [threading.Thread(target=model.predict, args=(feeds,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert len(intervals) == 2
    (a0, a1), (b0, b1) = sorted(intervals)
    overlap = min(a1, b1) - max(a0, b0)
    assert overlap > 0.5 * min(a1 - a0, b1 - b0), intervals
