"""The identity backend in process (``tritonpy.Server``, one per module): outputs are the inputs
(numbers and BYTES, batching or not, reshaped), optional inputs left out answer zeros, the
dynamic batcher's requests each get their own data back, the response parameters, the delay
parameters, the custom metric, the in-process ``predict`` lane, and the response cache keeping
what was answered. The error for a missing input, which the core's validation never lets
through, is driven with the SDK's harness."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
import tritonpy.devices
import tritonpy_backend_identity as backend
from tritonpy_sdk import ErrorCode
from tritonpy_sdk.testing import BackendHarness

PARAMETERS = {"param0": "an example string parameter", "param1": 42, "param2": False, "param3": 123.123}

MODELS = {
    "plain": """
backend: "identity"
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "INPUT1" data_type: TYPE_STRING dims: [ -1 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUTPUT1" data_type: TYPE_STRING dims: [ -1 ] }
]
instance_group [ { kind: KIND_CPU } ]
""",
    "batched": """
backend: "identity"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 2, -1 ] optional: true }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 2, -1 ] }
]
instance_group [ { kind: KIND_CPU count: 2 } ]
# Long enough that requests queued together always form one batch; a full batch never waits.
dynamic_batching { max_queue_delay_microseconds: 2000000 }
""",
    "quick": """
backend: "identity"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 2, -1 ] optional: true }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 2, -1 ] }
]
instance_group [ { kind: KIND_CPU count: 2 } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
""",
    "optional": """
backend: "identity"
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "INPUT1" data_type: TYPE_INT8 dims: [ -1, 2 ] optional: true },
  { name: "INPUT2" data_type: TYPE_STRING dims: [ 2 ] optional: true }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "OUTPUT1" data_type: TYPE_INT8 dims: [ -1, 2 ] },
  { name: "OUTPUT2" data_type: TYPE_STRING dims: [ 2 ] }
]
instance_group [ { kind: KIND_MODEL } ]
""",
    "reshaped": """
backend: "identity"
max_batch_size: 2
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]
instance_group [ { kind: KIND_CPU } ]
""",
    "delayed": """
backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU } ]
parameters [
  { key: "execute_delay_ms" value { string_value: "30" } },
  { key: "instance_wise_delay_multiplier" value { string_value: "4" } },
  { key: "creation_delay_sec" value { string_value: "7" } }
]
""",
    "cached": """
backend: "identity"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU } ]
response_cache { enable: true }
""",
}


class Sleeps:
    """Stands in for the backend's ``time`` module: records each sleep instead of sleeping."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture(scope="module")
def creation_sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, creation_sleeps: Sleeps) -> Iterator[tritonpy.Server]:
    repo = tmp_path_factory.mktemp("identity")
    for name, config in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    server = tritonpy.Server(model_repository=repo, cache_config={"local": {"size": "1048576"}})
    with pytest.MonkeyPatch.context() as patch:  # creation_delay_sec recorded, not slept
        patch.setattr(backend, "time", creation_sleeps)
        server.start()
    try:
        assert server.failed_models() == []
        yield server
    finally:
        server.stop()


def _infer(server: tritonpy.Server, model: str, inputs: dict[str, Any], **kwargs: Any) -> Any:
    (response,) = server.model(model).infer(inputs=inputs, **kwargs)
    return response


def _outputs(response: Any) -> dict[str, np.ndarray[Any, Any]]:
    return {name: tensor.to_numpy() for name, tensor in response.outputs.items()}


def _counter(server: tritonpy.Server, model: str) -> float:
    pattern = rf'^input_byte_size_counter{{model="{model}",version="1"}} (\S+)$'
    found = re.search(pattern, server.metrics(), re.M)
    assert found is not None, server.metrics()
    return float(found.group(1))


def test_outputs_are_the_inputs(server: tritonpy.Server) -> None:
    x = np.array([1.5, -2.0, np.nan], np.float32)
    words = np.array([b"", b"\x00\xff binary", "ü".encode()], np.object_)
    response = _infer(server, "plain", {"INPUT0": x, "INPUT1": words})
    out = _outputs(response)
    assert out["OUTPUT0"].dtype == np.float32
    np.testing.assert_array_equal(out["OUTPUT0"], x)
    assert out["OUTPUT1"].tolist() == words.tolist()
    assert response.parameters == PARAMETERS


def test_only_the_requested_outputs_come_back(server: tritonpy.Server) -> None:
    inputs = {"INPUT0": np.ones(2, np.float32), "INPUT1": np.array([b"a"], np.object_)}
    response = _infer(server, "plain", inputs, requested_output_names=["OUTPUT1"])
    assert list(response.outputs) == ["OUTPUT1"]


def test_reshaped_inputs_come_back_in_the_configs_dims(server: tritonpy.Server) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = _outputs(_infer(server, "reshaped", {"INPUT0": x}))
    np.testing.assert_array_equal(out["OUTPUT0"], x)


def test_a_left_out_optional_input_answers_zeros(server: tritonpy.Server) -> None:
    """Zeros of the config's type and shape, -1 read as 1; BYTES: empty elements."""
    x = np.array([1, 2, 3], np.float32)
    out = _outputs(_infer(server, "optional", {"INPUT0": x}))
    np.testing.assert_array_equal(out["OUTPUT0"], x)
    assert out["OUTPUT1"].dtype == np.int8 and out["OUTPUT1"].tolist() == [[0, 0]]
    assert out["OUTPUT2"].tolist() == [b"", b""]
    given = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
    out = _outputs(_infer(server, "optional", {"INPUT0": x, "INPUT1": given}))
    np.testing.assert_array_equal(out["OUTPUT1"], given)


def test_optional_zeros_get_the_batch_dimension_of_the_request(server: tritonpy.Server) -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = _outputs(_infer(server, "quick", {"INPUT0": x}))
    np.testing.assert_array_equal(out["OUTPUT0"], x)
    assert out["OUTPUT1"].dtype == np.float32 and out["OUTPUT1"].shape == (3, 2, 1)
    assert not out["OUTPUT1"].any()


def test_the_dynamic_batcher_gives_each_request_its_own_data(server: tritonpy.Server) -> None:
    handle = server.model("batched")
    before = server.model_statistics("batched")[0]
    rows = [np.full((1, 4), i, np.int32) for i in range(8)]  # eight requests fill a batch of 8
    pending = [handle.infer(inputs={"INPUT0": row}) for row in rows]  # each queued before the next
    for row, responses in zip(rows, pending):
        (response,) = responses
        np.testing.assert_array_equal(_outputs(response)["OUTPUT0"], row)
        assert response.parameters == PARAMETERS
    after = server.model_statistics("batched")[0]
    assert after["inference_count"] - before["inference_count"] == 8
    assert after["execution_count"] - before["execution_count"] < 8  # batched


def test_batched_requests_with_and_without_optional_inputs(server: tritonpy.Server) -> None:
    handle = server.model("quick")
    cases: list[dict[str, np.ndarray[Any, Any]]] = []
    for i in range(6):
        rows = 1 + i % 2
        case = {"INPUT0": np.full((rows, 4), i, np.int32)}
        if i % 3 == 0:
            case["INPUT1"] = np.full((rows, 2, 3), i / 2, np.float32)
        cases.append(case)
    pending = [handle.infer(inputs=case) for case in cases]
    for case, responses in zip(cases, pending):
        (response,) = responses
        out = _outputs(response)
        np.testing.assert_array_equal(out["OUTPUT0"], case["INPUT0"])
        expected = case.get("INPUT1", np.zeros((len(case["INPUT0"]), 2, 1), np.float32))
        np.testing.assert_array_equal(out["OUTPUT1"], expected)


def test_execute_delay(
    server: tritonpy.Server, creation_sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each execution sleeps execute_delay_ms (the only instance, index 0: times 1, whatever the
    multiplier); the model's load slept creation_delay_sec."""
    assert 7 in creation_sleeps.seconds
    sleeps = Sleeps()
    monkeypatch.setattr(backend, "time", sleeps)
    x = np.array([4.0], np.float32)
    np.testing.assert_array_equal(_outputs(_infer(server, "delayed", {"INPUT0": x}))["OUTPUT0"], x)
    assert server.model("delayed").predict({"INPUT0": x})["OUTPUT0"].tolist() == [4.0]
    assert sleeps.seconds == [0.03, 0.03]


def test_the_metric_counts_the_bytes_of_each_input_answered(server: tritonpy.Server) -> None:
    """BYTES count as serialized: four bytes of length before each element."""
    before = _counter(server, "plain")
    inputs = {"INPUT0": np.zeros(5, np.float32), "INPUT1": np.array([b"ab", b""], np.object_)}
    _infer(server, "plain", inputs)
    assert _counter(server, "plain") - before == 20 + (4 + 2) + (4 + 0)
    _infer(server, "plain", inputs, requested_output_names=["OUTPUT0"])
    assert _counter(server, "plain") - before == 20 + 10 + 20
    lines = server.metrics().splitlines()
    description = "Cumulative input byte size of all requests received by the model"
    assert f"# HELP input_byte_size_counter {description}" in lines
    assert "# TYPE input_byte_size_counter counter" in lines


def test_predict_takes_the_direct_lane_and_answers_as_infer(server: tritonpy.Server) -> None:
    assert server.get_version("optional").direct
    x = np.array([1, 2, 3], np.float32)
    given = np.array([[7, 8]], np.int8)
    strings = np.array([b"x", b"y"], np.object_)
    handle = server.model("optional")
    for inputs in ({"INPUT0": x, "INPUT1": given, "INPUT2": strings}, {"INPUT0": x}):
        direct = handle.predict(inputs)
        usual = _outputs(_infer(server, "optional", inputs))
        assert {n: a.tolist() for n, a in direct.items()} == {n: a.tolist() for n, a in usual.items()}
    before = _counter(server, "delayed")
    server.model("delayed").predict({"INPUT0": np.zeros(1, np.float32)})
    assert _counter(server, "delayed") - before == 4


def test_outputs_are_the_inputs_arrays_not_copies(server: tritonpy.Server) -> None:
    x = np.arange(3, dtype=np.float32)
    words = np.array([b"a"], np.object_)
    out = _outputs(_infer(server, "plain", {"INPUT0": x, "INPUT1": words}))
    assert np.shares_memory(out["OUTPUT0"], x)


def test_a_cached_answer_keeps_the_data_of_its_request(server: tritonpy.Server) -> None:
    """The output is the input's own array; the response cache keeps its own copy, so a
    caller reusing its input array afterwards does not change what the cache answers."""
    x = np.arange(4, dtype=np.float32)
    _infer(server, "cached", {"INPUT0": x})
    x[:] = 99
    again = _outputs(_infer(server, "cached", {"INPUT0": np.arange(4, dtype=np.float32)}))
    assert again["OUTPUT0"].tolist() == [0, 1, 2, 3]
    stats = server.model_statistics("cached")[0]["inference_stats"]
    assert stats["cache_hit"]["count"] == 1


PAIR_CONFIG = {
    "name": "pairs",
    "backend": "identity",
    "max_batch_size": 4,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [2]},
        {"name": "INPUT1", "data_type": "TYPE_INT64", "dims": [1]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [2]},
        {"name": "OUTPUT1", "data_type": "TYPE_INT64", "dims": [1]},
    ],
}


def test_a_missing_input_fails_only_its_request(tmp_path: Path) -> None:
    """The server never lets a request without a required input through; the backend still
    answers one as identity.cc does (UNSUPPORTED), and only that request of its batch."""
    (tmp_path / "1").mkdir()
    with BackendHarness(backend, tmp_path, config=PAIR_CONFIG, backend_name="identity") as h:
        a = np.ones((1, 2), np.float32)
        n = np.array([[3]], np.int64)
        responses = h.execute([h.request({"INPUT0": a, "INPUT1": n}), h.request({"INPUT0": a})])
    ok, failed = responses
    assert ok.error is None and ok.parameters == PARAMETERS
    assert failed.error is not None
    assert failed.error.code == ErrorCode.UNSUPPORTED
    assert failed.error.message == "failed to get input 'INPUT1'"
    assert failed.outputs == {} and failed.parameters == {}


def test_gpu_instances_serve_from_host_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU host a model without instance_group gets KIND_GPU (Triton's default for a
    backend with no preference), and explicit KIND_GPU groups load; the data stays on the host."""
    monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)
    pair = (
        'backend: "identity"\n'
        'input [ { name: "INPUT0" data_type: TYPE_INT16 dims: [ 2 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_INT16 dims: [ 2 ] } ]\n'
    )
    for name, extra in (("auto", ""), ("gpu", "instance_group [ { kind: KIND_GPU count: 2 } ]\n")):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(pair + extra)
    x = np.array([3, -4], np.int16)
    with tritonpy.Server(model_repository=tmp_path) as server:
        kinds = {name: server.model_config(name)["instance_group"][0]["kind"] for name in ("auto", "gpu")}
        outputs = {name: _outputs(_infer(server, name, {"INPUT0": x}))["OUTPUT0"] for name in kinds}
    assert kinds == {"auto": "KIND_GPU", "gpu": "KIND_GPU"}
    for out in outputs.values():
        np.testing.assert_array_equal(out, x)


def test_a_reloaded_version_keeps_its_series_and_an_unloaded_one_drops_it(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    (folder / "1").mkdir(parents=True)
    config = (
        'backend: "identity"\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    (folder / "config.pbtxt").write_text(config)
    server = tritonpy.Server(model_repository=tmp_path, model_control_mode="explicit", load_model=["m"])
    with server:
        _infer(server, "m", {"INPUT0": np.zeros(4, np.float32)})
        assert _counter(server, "m") == 16
        (folder / "config.pbtxt").write_text(config + 'parameters { key: "a" value { string_value: "b" } }\n')
        server.load_model("m")  # the new copy loads before the old one unloads
        assert server.model_config("m")["parameters"] == {"a": {"string_value": "b"}}
        assert _counter(server, "m") == 16
        server.unload("m", wait_until_unloaded=True, timeout=30)
        assert 'input_byte_size_counter{model="m"' not in server.metrics()
