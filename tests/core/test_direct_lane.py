"""``ModelHandle.predict`` through a backend's ``execute_direct`` (the direct lane).

A ``predict`` without options runs on the calling thread as arrays, without core
request and response objects, only where nothing between the caller and
``execute`` would treat the request differently. Each feature that does (tracing,
the response cache, batchers, sequences, ensembles, rate limiting, ``reshape``,
decoupled models, requested outputs, inputs that are not plain arrays, a busy
instance, a draining server) sends it the usual way, with the same answer and the
same statistics as ``infer``; when the backend answers as ``execute`` does (an
error, a response sender), the core goes on exactly as after ``execute``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonpy
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DirectCall,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)
from tritonpy_testbackend import CpuBackend
from tritonpy_traces import read_traces


class Arrays(CpuBackend):
    """Y = 2 X (shaped as the model parameter ``y_shape`` says, when it does) and
    Z = X + 1, through ``execute`` and through ``execute_direct``; ``ran`` records
    which hook answered each request. X[0] picks what ``execute_direct`` does: -1
    answers with an error response, -2 raises, -3 answers through the response
    sender, -4 answers through it and returns arrays all the same, -5 waits for
    ``gate``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.gate = threading.Event()
        self.holding = threading.Event()

    @hookimpl
    def instance_initialize(self, instance: ModelInstance) -> None:
        instance.direct = instance.model.parameters.get("direct", "yes") == "yes"

    @staticmethod
    def _outputs(
        model_parameters: dict[str, str], x: np.ndarray[Any, Any]
    ) -> dict[str, np.ndarray[Any, Any]]:
        y = x * 2
        if "y_shape" in model_parameters:
            y = y.reshape(json.loads(model_parameters["y_shape"]))
        return {"Y": y, "Z": x + 1}

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        self.ran.append("execute")
        parameters = instance.model.parameters
        return [
            InferenceResponse(
                {n: Tensor.from_numpy(n, a) for n, a in self._outputs(parameters, r.inputs["X"].data).items()}
            )
            for r in requests
        ]

    @hookimpl
    def execute_direct(self, instance: ModelInstance, call: DirectCall) -> Any:
        self.ran.append("direct")
        x = call.inputs["X"]
        outputs = self._outputs(instance.model.parameters, x)
        what = float(x.flat[0]) if x.size else 0.0
        if what == -1:
            call.request()
            return [InferenceResponse(error=TritonError.invalid_arg("an answer with an error"))]
        if what == -2:
            raise TritonError.unavailable("execute_direct failed")
        if what == -3:
            sender = call.request().response_sender
            assert sender is not None
            sender.send(InferenceResponse({n: Tensor.from_numpy(n, a) for n, a in outputs.items()}))
            sender.send(None, RESPONSE_COMPLETE_FINAL)
            return None
        if what == -4:  # answers through the sender, then returns arrays all the same
            sender = call.request().response_sender
            assert sender is not None
            sender.send(InferenceResponse({"Y": Tensor.from_numpy("Y", x * 3)}), RESPONSE_COMPLETE_FINAL)
        if what == -5:
            self.holding.set()
            assert self.gate.wait(30)
        return outputs


PLAIN = """
backend: "arrays"
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "Z" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

MODELS = {
    "plain": PLAIN,
    "not_direct": PLAIN + 'parameters { key: "direct" value: { string_value: "no" } }\n',
    "batching": PLAIN.replace('backend: "arrays"', 'backend: "arrays"\nmax_batch_size: 8'),
    "dynamic": PLAIN.replace('backend: "arrays"', 'backend: "arrays"\nmax_batch_size: 8')
    + "dynamic_batching { }\n",
    "cached": PLAIN + "response_cache { enable: true }\n",
    "decoupled": PLAIN + "model_transaction_policy { decoupled: true }\n",
    "reshape_in": """
backend: "arrays"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, -1 ] },
         { name: "Z" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
""",
    "reshape_out": """
backend: "arrays"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } },
         { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "y_shape" value: { string_value: "[2, 2]" } }
""",
    "limited": PLAIN
    + 'instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R" count: 1 } ] } } ]\n',
    "sequence": PLAIN.replace('backend: "arrays"', 'backend: "arrays"\nmax_batch_size: 8')
    + "sequence_batching { }\n",
    "pipeline": """
platform: "ensemble"
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [ {
  model_name: "plain" model_version: -1
  input_map { key: "X" value: "X" }
  output_map { key: "Y" value: "Y" }
} ] }
""",
}


def _repository(root: Path) -> Path:
    for name, config in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(f'name: "{name}"\n{config}')
    return root


def _serve(root: Path, backend: Arrays, **options: Any) -> tritonpy.Server:
    server = tritonpy.Server(
        model_repository=_repository(root), cache_config={"local": {"size": "1048576"}}, **options
    )
    server.backends.register("arrays", backend)
    return server


@pytest.fixture(scope="module")
def backend() -> Arrays:
    return Arrays()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Arrays) -> Iterator[tritonpy.Server]:
    with _serve(tmp_path_factory.mktemp("direct"), backend) as server:
        yield server


def _stats(server: tritonpy.Server, name: str) -> dict[str, Any]:
    """What the statistics extension counts (not the durations)."""
    stats = server.model_statistics(name)[0]
    counts = {key: value["count"] for key, value in stats["inference_stats"].items()}
    batches = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}
    totals = {"inferences": stats["inference_count"], "executions": stats["execution_count"]}
    return {**counts, "batches": batches, **totals}


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in after.items():
        if isinstance(value, dict):
            out[key] = {k: v - before[key].get(k, 0) for k, v in value.items() if v - before[key].get(k, 0)}
        else:
            out[key] = value - before[key]
    return out


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "outputs", {name: (array.shape, array.tolist()) for name, array in call().items()}
    except TritonError as exc:
        return "error", (exc.code, exc.message)


def _compare(server: tritonpy.Server, backend: Arrays, name: str, inputs: Any, **kwargs: Any) -> list[str]:
    """``predict`` against the usual way (``infer``): the same answer and the same
    statistics; returns the hooks ``predict`` ran."""
    handle = server.model(name)
    before = _stats(server, name)

    def usual() -> dict[str, np.ndarray[Any, Any]]:
        (response,) = handle.infer(inputs, **kwargs)
        return {n: t.data for n, t in response.outputs.items()}

    expected = _outcome(usual)
    middle = _stats(server, name)
    backend.ran.clear()
    got = _outcome(lambda: handle.predict(inputs, **kwargs))
    ran = list(backend.ran)
    after = _stats(server, name)
    assert got == expected
    assert _delta(after, middle) == _delta(middle, before)
    return ran


X = np.array([1, 2, 3, 4], np.float32)


def test_a_plain_predict_takes_the_direct_lane(server: tritonpy.Server, backend: Arrays) -> None:
    assert _compare(server, backend, "plain", {"X": X}) == ["direct"]
    assert _compare(server, backend, "batching", {"X": X.reshape(2, 2)}) == ["direct"]


@pytest.mark.parametrize(
    ("name", "inputs", "kwargs"),
    [
        ("not_direct", {"X": X}, {}),  # its instances did not ask for execute_direct
        ("dynamic", {"X": X.reshape(1, 4)}, {}),
        ("reshape_in", {"X": X}, {}),
        ("reshape_out", {"X": X}, {}),
        ("plain", {"X": X}, {"requested_output_names": ["Z"]}),
        ("plain", {"X": X}, {"parameters": {"p": 1}}),
        ("plain", {"X": X}, {"request_id": "r"}),
        ("plain", {"X": [1.0, 2.0]}, {}),  # not a numpy array
        ("plain", {"X": X.astype(np.float64)}, {}),  # refused by validation, in its words
        ("plain", {"X": X, "W": X}, {}),
        ("plain", {}, {}),
        ("batching", {"X": X.reshape(1, 2, 2)}, {}),
        ("batching", {"X": np.ones((9, 2), np.float32)}, {}),
        ("sequence", {"X": X.reshape(1, 4)}, {}),
        ("pipeline", {"X": X}, {}),
    ],
)
def test_each_feature_takes_the_usual_way(
    server: tritonpy.Server, backend: Arrays, name: str, inputs: Any, kwargs: dict[str, Any]
) -> None:
    assert "direct" not in _compare(server, backend, name, inputs, **kwargs)


def test_a_cached_model_answers_from_its_cache(server: tritonpy.Server, backend: Arrays) -> None:
    handle = server.model("cached")
    data = np.array([7, 8], np.float32)
    first = handle.predict({"X": data})
    backend.ran.clear()
    again = handle.predict({"X": data})
    assert backend.ran == []
    np.testing.assert_array_equal(again["Y"], first["Y"])
    inference = server.model_statistics("cached")[0]["inference_stats"]
    assert inference["cache_hit"]["count"] == 1 and inference["cache_miss"]["count"] == 1


@pytest.mark.parametrize("what", [-1, -2, -3, -4])
def test_an_answer_as_execute_gives_goes_on_as_after_execute(
    server: tritonpy.Server, backend: Arrays, what: float
) -> None:
    """An error response, an exception, an answer through the response sender (the
    first answer stands, as for ``execute``): answered and counted as ``run`` does."""
    handle = server.model("plain")
    before = _stats(server, "plain")
    backend.ran.clear()
    got = _outcome(lambda: handle.predict({"X": np.array([what, 1], np.float32)}))
    assert backend.ran == ["direct"]
    delta = _delta(_stats(server, "plain"), before)
    ok = what in (-3, -4)
    assert delta["success"] == int(ok) and delta["fail"] == int(not ok)
    # As Triton: a failure is counted in "fail" alone, not in the stages.
    assert delta["executions"] == 1 and delta["inferences"] == int(ok) and delta["queue"] == int(ok)
    if what == -1:
        assert got == ("error", (TritonError.invalid_arg("").code, "an answer with an error"))
    elif what == -2:
        assert got == ("error", (TritonError.unavailable("").code, "execute_direct failed"))
    elif what == -3:
        assert got == ("outputs", {"Y": ((2,), [what * 2, 2.0]), "Z": ((2,), [what + 1, 2.0])})
    else:
        assert got == ("outputs", {"Y": ((2,), [what * 3, 3.0])})


def test_a_traced_predict_is_traced(tmp_path: Path) -> None:
    backend = Arrays()
    trace_file = tmp_path / "trace.json"
    options = {"trace_config": ["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"]}
    with _serve(tmp_path / "models", backend, **options) as server:
        np.testing.assert_array_equal(server.model("plain").predict({"X": X})["Y"], X * 2)
    assert backend.ran == ["execute"]
    (record,) = read_traces(trace_file)
    assert record["model_name"] == "plain"


def test_a_rate_limited_model_takes_the_usual_way(tmp_path: Path) -> None:
    backend = Arrays()
    with _serve(tmp_path, backend, rate_limit="execution_count") as server:
        assert "direct" not in _compare(server, backend, "limited", {"X": X})


def test_a_decoupled_model_is_refused_as_before(server: tritonpy.Server, backend: Arrays) -> None:
    backend.ran.clear()
    with pytest.raises(TritonError, match="is decoupled"):
        server.model("decoupled").predict({"X": X})
    assert backend.ran == []


def test_a_busy_instance_queues_the_request(tmp_path: Path) -> None:
    """One instance, held by a caller in ``execute_direct``: the next ``predict`` waits
    in the queue and its instance's worker runs it (through ``execute``)."""
    backend = Arrays()
    with _serve(tmp_path, backend) as server:
        handle = server.model("plain")
        first: list[dict[str, np.ndarray[Any, Any]]] = []
        held = {"X": np.array([-5], np.float32)}
        holder = threading.Thread(target=lambda: first.append(handle.predict(held)))
        holder.start()
        assert backend.holding.wait(30)
        second: list[dict[str, np.ndarray[Any, Any]]] = []
        waiter = threading.Thread(target=lambda: second.append(handle.predict({"X": X})))
        waiter.start()
        backend.gate.set()
        holder.join(30)
        waiter.join(30)
        np.testing.assert_array_equal(second[0]["Y"], X * 2)
        assert first[0]["Y"].tolist() == [-10]
        assert sorted(backend.ran) == ["direct", "execute"]


def test_a_draining_server_refuses_as_before(tmp_path: Path) -> None:
    backend = Arrays()
    with _serve(tmp_path, backend) as server:
        server.drain()
        with pytest.raises(TritonError, match="Server is stopping"):
            server.model("plain").predict({"X": X})
    assert backend.ran == []
