"""The high-level backend layer: a Predictor subclass run through the hooks the SDK derives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from tritonpy_sdk import (
    BackendInfo,
    DataType,
    ErrorCode,
    Model,
    PartialResult,
    Predictor,
    RequestedOutput,
    TritonError,
    complete_input,
    complete_max_batch_size,
    complete_output,
)
from tritonpy_sdk._autocomplete import config_type_name
from tritonpy_sdk.host import PluginError, validate_backend
from tritonpy_sdk.testing import BackendHarness

Arrays = dict[str, np.ndarray[Any, Any]]


def _io(name: str, dtype: str, dims: list[int]) -> dict[str, Any]:
    return {"name": name, "data_type": dtype, "dims": dims}


def _config(max_batch_size: int = 8, **extra: Any) -> dict[str, Any]:
    return {
        "name": "m",
        "max_batch_size": max_batch_size,
        "input": [_io("X", "TYPE_FP32", [-1])],
        "output": [_io("Y", "TYPE_FP32", [-1]), _io("Z", "TYPE_FP32", [-1])],
        **extra,
    }


class Recorder(Predictor):
    """Y = X * 2, Z = X + 1; records the shapes predict was called with."""

    backend_info = BackendInfo(default_model_filename="model.bin")
    calls: ClassVar[list[tuple[int, ...]]] = []
    loads: ClassVar[list[tuple[str, str, str, int]]] = []

    def load(self) -> None:
        type(self).loads.append(
            (self.model_path.name, self.parameters.get("p", ""), self.kind, self.max_batch_size)
        )

    def predict(self, inputs: Arrays) -> Arrays:
        x = inputs["X"]
        type(self).calls.append(x.shape)
        if (x < 0).any():
            raise ValueError("negative input")
        return {"Y": x * 2, "Z": x + 1}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.bin").write_bytes(b"")
    Recorder.calls.clear()
    Recorder.loads.clear()
    return tmp_path / "m"


def test_a_batch_is_one_predict_call_cut_back_per_request(folder: Path) -> None:
    with BackendHarness(Recorder, folder, config=_config()) as h:
        requests = [h.request({"X": np.full((n, 2), n, np.float32)}) for n in (1, 2, 3)]
        responses = h.execute(requests)
    assert Recorder.calls == [(6, 2)]
    for n, response in zip((1, 2, 3), responses, strict=True):
        assert response.error is None
        np.testing.assert_array_equal(response.outputs["Y"].data, np.full((n, 2), 2 * n))
        np.testing.assert_array_equal(response.outputs["Z"].data, np.full((n, 2), n + 1))


def test_load_runs_once_per_instance_and_knows_where_it_runs(folder: Path) -> None:
    config = _config(parameters={"p": {"string_value": "v"}})
    with BackendHarness(Recorder, folder, config=config) as h:
        h.infer({"X": np.ones((1, 1), np.float32)})
        h.infer({"X": np.ones((1, 1), np.float32)})
    assert Recorder.loads == [("model.bin", "v", "KIND_CPU", 8)]


def test_requests_of_other_shapes_are_predicted_one_by_one(folder: Path) -> None:
    with BackendHarness(Recorder, folder, config=_config()) as h:
        responses = h.execute([h.request({"X": np.ones((1, n), np.float32)}) for n in (2, 3)])
    assert Recorder.calls == [(1, 2), (1, 3)]
    assert [r.outputs["Y"].data.shape for r in responses] == [(1, 2), (1, 3)]


def test_a_model_that_does_not_batch_gets_each_request_as_it_is(folder: Path) -> None:
    with BackendHarness(Recorder, folder, config=_config(0)) as h:
        responses = h.execute([h.request({"X": np.ones(n, np.float32)}) for n in (2, 3)])
    assert Recorder.calls == [(2,), (3,)]
    assert [r.outputs["Z"].data.tolist() for r in responses] == [[2.0, 2.0], [2.0, 2.0, 2.0]]


def test_each_request_gets_the_outputs_it_asked_for(folder: Path) -> None:
    with BackendHarness(Recorder, folder, config=_config()) as h:
        only_z = h.request({"X": np.ones((1, 2), np.float32)})
        only_z.requested_outputs = [RequestedOutput("Z")]
        everything = h.request({"X": np.ones((1, 2), np.float32)})
        first, second = h.execute([only_z, everything])
    assert list(first.outputs) == ["Z"]
    assert list(second.outputs) == ["Y", "Z"]


def test_an_exception_fails_every_request_of_the_batch(folder: Path) -> None:
    with BackendHarness(Recorder, folder, config=_config()) as h:
        good = h.request({"X": np.ones((1, 2), np.float32)})
        bad = h.request({"X": -np.ones((1, 2), np.float32)})
        responses = h.execute([good, bad])
    for response in responses:
        assert response.error is not None
        assert response.error.code is ErrorCode.INTERNAL
        assert response.error.message == "predict of model 'm' failed: ValueError: negative input"


class RowChecker(Predictor):
    """Fails the rows holding a negative number, answers the others."""

    def predict(self, inputs: Arrays) -> Arrays | PartialResult:
        x = inputs["X"]
        if self.requests[0].parameters.get("refuse"):
            raise TritonError.unavailable("refused")
        bad = {int(row): f"row {row} is negative" for row in np.flatnonzero((x < 0).any(axis=1))}
        return PartialResult({"Y": x, "Z": x}, bad) if bad else {"Y": x, "Z": x}


def test_a_partial_result_fails_only_the_requests_of_its_rows(folder: Path) -> None:
    with BackendHarness(RowChecker, folder, config=_config()) as h:
        rows = [np.ones((2, 1), np.float32), np.array([[1], [-1]], np.float32), np.ones((1, 1), np.float32)]
        first, second, third = h.execute([h.request({"X": x}) for x in rows])
        with pytest.raises(TritonError) as refused:
            h.infer({"X": np.ones((1, 1), np.float32)}, parameters={"refuse": True})
    assert first.error is None and third.error is None
    assert third.outputs["Y"].data.tolist() == [[1.0]]
    assert second.error is not None
    assert (second.error.code, second.error.message) == (ErrorCode.INVALID_ARG, "row 3 is negative")
    assert refused.value.code is ErrorCode.UNAVAILABLE  # a TritonError keeps its code


class AsyncPredictor(Predictor):
    loops: ClassVar[list[asyncio.AbstractEventLoop]] = []

    async def predict(self, inputs: Arrays) -> Arrays:
        await asyncio.sleep(0)
        type(self).loops.append(asyncio.get_running_loop())
        return {"Y": inputs["X"] * 3, "Z": inputs["X"]}


def test_async_predict_runs_on_a_loop_of_the_instance_outside_a_server(folder: Path) -> None:
    with BackendHarness(AsyncPredictor, folder, config=_config()) as h:
        assert h.infer({"X": np.ones((1, 1), np.float32)})["Y"].tolist() == [[3.0]]
        h.infer({"X": np.ones((1, 1), np.float32)})
    first, second = AsyncPredictor.loops
    assert first is second  # one loop, kept for the instance ...
    assert first.is_closed()  # ... and closed with it


class Texts(Predictor):
    def predict(self, inputs: Arrays) -> Arrays:
        words = inputs["S"]
        return {"UPPER": np.array([[w.decode().upper() for w in row] for row in words], dtype=object)}


def test_bytes_tensors_are_object_arrays_and_str_outputs_become_bytes(folder: Path) -> None:
    config = {
        "name": "m",
        "max_batch_size": 4,
        "input": [_io("S", "TYPE_STRING", [1])],
        "output": [_io("UPPER", "TYPE_STRING", [1])],
    }
    with BackendHarness(Texts, folder, config=config) as h:
        out = h.infer({"S": np.array([[b"ab"], [b"c"]], dtype=object)})
    assert out["UPPER"].tolist() == [[b"AB"], [b"C"]]


class Wrong(Predictor):
    def predict(self, inputs: Arrays) -> Any:
        kind = self.requests[0].parameters["kind"]
        x = inputs["X"]
        return {
            "undeclared": {"Y": x, "Z": x, "W": x},
            "lossy": {"Y": x.astype(np.complex64), "Z": x},
            "rows": {"Y": x[:1], "Z": x},
            "type": [x],
            "widened": {"Y": x.astype(np.float64), "Z": x.astype(np.int8)},
        }[str(kind)]


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("undeclared", "returned output 'W', which the config does not declare (outputs: Y, Z)"),
        ("lossy", "returned output 'Y' as complex64; the config declares TYPE_FP32"),
        ("rows", "returned output 'Y' with shape [1, 1] for a batch of 2"),
        ("type", "returned list; expected a dict of output name to array"),
    ],
)
def test_what_predict_returns_wrong_is_named(folder: Path, kind: str, message: str) -> None:
    with BackendHarness(Wrong, folder, config=_config()) as h, pytest.raises(TritonError) as exc:
        h.infer({"X": np.ones((2, 1), np.float32)}, parameters={"kind": kind})
    assert message in exc.value.message


def test_outputs_are_converted_to_the_config_type_when_that_loses_no_kind(folder: Path) -> None:
    with BackendHarness(Wrong, folder, config=_config()) as h:
        out = h.infer({"X": np.ones((2, 1), np.float32)}, parameters={"kind": "widened"})
    assert (out["Y"].dtype, out["Z"].dtype) == (np.float32, np.float32)


class Completing(Predictor):
    backend_info = BackendInfo(default_model_filename="model.bin")

    @classmethod
    def auto_complete(cls, model: Model) -> None:
        complete_max_batch_size(model)
        complete_input(model, "X", "TYPE_FP32", [-1])
        complete_output(model, "Y", "TYPE_FP32", [-1])
        complete_output(model, "Z", "TYPE_FP32", [-1])

    def predict(self, inputs: Arrays) -> Arrays:
        return {"Y": inputs["X"], "Z": inputs["X"]}


def test_auto_complete_tells_an_explicit_zero_from_no_max_batch_size(folder: Path) -> None:
    with BackendHarness(Completing, folder, config={"name": "m"}) as h:
        assert h.model.user_config == {"name": "m"}
        assert h.model.config["max_batch_size"] == 4
        assert h.model.config["dynamic_batching"] is not None  # the server's rule, applied here too
    with BackendHarness(Completing, folder, config={"name": "m", "max_batch_size": 0}) as h:
        assert h.model.user_config == {"name": "m", "max_batch_size": 0}
        assert h.model.config["max_batch_size"] == 0
        assert [i["name"] for i in h.model.config["input"]] == ["X"]


def test_the_harness_reads_config_pbtxt_as_the_server_does(folder: Path) -> None:
    (folder / "config.pbtxt").write_text(
        'max_batch_size: 0\noutput [{ name: "Y" data_type: TYPE_FP32 dims: [2] }]\n'
    )
    with BackendHarness(Completing, folder) as h:
        assert h.model.user_config["max_batch_size"] == 0
        assert h.model.config["max_batch_size"] == 0
        assert h.model.config["instance_group"][0]["kind"] == "KIND_CPU"  # Triton's defaults filled in
        assert [o["dims"] for o in h.model.config["output"]] == [[2], [-1]]


def test_a_predictor_class_is_a_backend_and_only_an_overridden_auto_complete_counts() -> None:
    assert not validate_backend("plain", Recorder).has_auto_complete
    assert validate_backend("completing", Completing).has_auto_complete

    class Bad(Predictor):
        backend_info = "model.bin"  # type: ignore[assignment]

    with pytest.raises(
        PluginError, match=r"backend 'bad': .*Bad.backend_info must be a tritonpy_sdk.BackendInfo"
    ):
        validate_backend("bad", Bad)


class CompletingWithProtocolNames(Completing):
    @classmethod
    def auto_complete(cls, model: Model) -> None:
        complete_input(model, "X", "FP32", [-1])
        complete_output(model, "Y", DataType.FP32, [-1])
        complete_output(model, "Z", "BYTES", [-1])


def test_auto_complete_helpers_take_config_and_protocol_names(folder: Path) -> None:
    with BackendHarness(CompletingWithProtocolNames, folder, config={"name": "m"}) as h:
        types = [(t["name"], t["data_type"]) for t in h.model.config["input"] + h.model.config["output"]]
    assert types == [("X", "TYPE_FP32"), ("Y", "TYPE_FP32"), ("Z", "TYPE_STRING")]


def test_auto_complete_helpers_name_the_types_they_take() -> None:
    with pytest.raises(ValueError) as exc:
        config_type_name("FLOAT32")
    assert "unknown data type 'FLOAT32'" in str(exc.value)
    assert "TYPE_FP32" in str(exc.value) and "FP32" in str(exc.value) and "BYTES" in str(exc.value)
