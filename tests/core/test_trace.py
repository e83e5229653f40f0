"""The trace extension: settings semantics, sampling, and the trace file."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.trace import Tracer, state_from_flags, tensor_record
from tritonpy_sdk import RESPONSE_COMPLETE_FINAL, Tensor, TritonError
from tritonpy_testbackend import TestBackend, write_repos, write_sender_models
from tritonpy_traces import CORE_STAMPS, read_traces


def test_settings_global_and_per_model() -> None:
    tracer = Tracer(state_from_flags(["triton,file=/x/t.json"]))
    assert tracer.settings() == {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": "/x/t.json",
        "trace_mode": "triton",
    }
    tracer.update({"trace_rate": "5"}, model="m")
    assert tracer.settings("m")["trace_rate"] == "5"
    assert tracer.settings()["trace_rate"] == "1000"
    tracer.update({"trace_level": ["TIMESTAMPS"]})
    assert tracer.settings("m")["trace_level"] == ["TIMESTAMPS"]  # inherited from global
    tracer.update({"trace_rate": None}, model="m")  # null clears the override
    assert tracer.settings("m")["trace_rate"] == "1000"


def test_a_cleared_global_setting_goes_back_to_its_start_up_value() -> None:
    """As Triton 2.51 does (observed): not to the built-in default (NVIDIA's L0_trace
    trace_endpoint_test clears the settings after each case and expects the start's)."""
    start = ["level=TIMESTAMPS", "rate=1", "count=7", "log-frequency=3", "triton,file=/x/t.json"]
    tracer = Tracer(state_from_flags(start))
    first = tracer.settings()
    tracer.update({"trace_level": ["OFF"], "trace_rate": "5", "trace_count": "2", "log_frequency": "9"})
    assert tracer.settings()["trace_rate"] == "5" and tracer.off
    cleared = tracer.update(
        {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None}
    )
    assert cleared == first == tracer.settings()
    assert cleared["trace_level"] == ["TIMESTAMPS"] and cleared["trace_rate"] == "1" and not tracer.off
    tracer.update({"trace_level": ["OFF"]})
    assert tracer.update({"trace_level": None})["trace_level"] == ["TIMESTAMPS"]  # again: not shared


@pytest.mark.parametrize("model", ["", "m"])
def test_a_trace_level_needs_a_trace_file(model: str) -> None:
    """As Triton 2.51 answers (observed, HTTP 400 / gRPC INVALID_ARGUMENT): a level
    other than OFF without a trace file (set at start only) is refused, whole."""
    tracer = Tracer()
    for levels in (["TIMESTAMPS"], ["TENSORS"]):
        with pytest.raises(
            TritonError, match="^Attempting to set invalid trace setting :trace file name is not given$"
        ):
            tracer.update({"trace_level": levels, "log_frequency": "5"}, model=model)
    assert tracer.settings(model)["log_frequency"] == "0"  # nothing of the update applied
    assert tracer.update({"trace_level": ["OFF"], "trace_rate": "7"}, model=model)["trace_rate"] == "7"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"trace_file": "/tmp/x"}, "can not be updated through network protocol"),
        ({"trace_level": ["LOUD"]}, "invalid trace level"),
        ({"trace_rate": "often"}, "^Unable to parse 'trace_rate', got: often$"),
        ({"trace_rate": "0"}, "'trace_rate' must be >= 1"),
        (  # Triton 2.51's words and limits
            {"trace_rate": "2147483648"},
            r"^Unable to parse 'trace_rate', value is out of range \[ 0, 4294967295 \], got: 2147483648$",
        ),
        (
            {"trace_count": "99999999999999999999"},
            r"^Unable to parse 'trace_count', value is out of range \[ -1, 2147483647 \], got: 9{20}$",
        ),
        ({"trace_count": "-2"}, r"^Unable to parse 'trace_count'. Expecting value >= -1, got:-2$"),
        ({"trace_mode": "opentelemetry"}, "cannot be set while serving"),
        ({"nonsense": "1"}, "unknown trace setting"),
    ],
)
def test_bad_settings(changes: dict, message: str) -> None:
    tracer = Tracer()
    with pytest.raises(TritonError, match=message):
        tracer.update(changes)
    assert tracer.settings()["trace_level"] == ["OFF"]


def test_sampling_rate_and_count() -> None:
    tracer = Tracer(state_from_flags(["level=TIMESTAMPS", "rate=3", "count=2"]))
    sampled = [tracer.sample("m", str(i)) is not None for i in range(12)]
    assert sampled == [False, False, True, False, False, True] + [False] * 6


def test_a_trace_count_runs_down_and_its_traces_get_a_file_of_their_own(tmp_path: Path) -> None:
    """Triton's count (NVIDIA's L0_trace "global_count"): ``trace_count`` shows what is left;
    once it ran out and its last trace finished, its traces are written to ``<file>.0`` at
    once; traces from before the count stay for the main file (written at shutdown)."""
    trace_file = tmp_path / "t.json"
    tracer = Tracer(state_from_flags(["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"]))
    for i in range(3):
        tracer.finish(tracer.sample("m", f"before{i}"))  # type: ignore[arg-type]
    tracer.update({"trace_count": "2"})
    first = tracer.sample("m", "counted0")
    assert first is not None and tracer.settings()["trace_count"] == "1"
    second = tracer.sample("m", "counted1")
    assert second is not None and tracer.settings()["trace_count"] == "0"
    assert tracer.sample("m", "after") is None  # run out
    tracer.finish(second)
    assert not (tmp_path / "t.json.0").exists()  # one of them is still in flight
    tracer.finish(first)
    assert [r["request_id"] for r in read_traces(tmp_path / "t.json.0")] == ["counted0", "counted1"]
    assert not trace_file.exists()
    # A count set again starts again; one that is set again before it ran out gives its
    # traces to the main file.
    tracer.update({"trace_count": "5"})
    tracer.finish(tracer.sample("m", "unfinished"))  # type: ignore[arg-type]
    tracer.update({"trace_count": "1"})
    tracer.finish(tracer.sample("m", "last"))  # type: ignore[arg-type]
    assert [r["request_id"] for r in read_traces(tmp_path / "t.json.1")] == ["last"]
    tracer.flush()
    ids = [r["request_id"] for r in read_traces(trace_file)]
    assert ids == ["before0", "before1", "before2", "unfinished"]


def test_a_models_log_frequency_writes_indexed_files_and_its_rest_one_more_at_shutdown(
    tmp_path: Path,
) -> None:
    """NVIDIA's L0_trace: a model's ``log_frequency`` of 2 and three of its traces give
    ``<file>.0`` with two and, at shutdown, ``<file>.1`` with the last; the other models'
    traces go to the main file."""
    trace_file = tmp_path / "t.json"
    tracer = Tracer(state_from_flags(["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"]))
    tracer.update({"log_frequency": "2"}, model="m")
    for name in ("m", "other", "m", "m"):
        tracer.finish(tracer.sample(name, name))  # type: ignore[arg-type]
    assert len(read_traces(tmp_path / "t.json.0")) == 2
    tracer.flush()
    assert [r["model_name"] for r in read_traces(tmp_path / "t.json.1")] == ["m"]
    assert [r["model_name"] for r in read_traces(trace_file)] == ["other"]


def test_tracing_turned_on_and_off_while_serving_is_seen_by_sampling() -> None:
    """``Tracer.off`` (what the request path reads instead of calling ``sample``)
    follows every update: global levels and per-model overrides."""
    tracer = Tracer(state_from_flags(["triton,file=/x/t.json"]))
    assert tracer.off and tracer.sample("m", "1") is None
    tracer.update({"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}, model="m")
    assert not tracer.off
    assert tracer.sample("m", "2") is not None and tracer.sample("other", "3") is None
    tracer.update({"trace_level": None, "trace_rate": None}, model="m")  # the override cleared
    assert not tracer.off  # a model's (empty) override is still there: sample decides
    assert tracer.sample("m", "4") is None
    tracer.update({"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    assert tracer.sample("other", "5") is not None
    tracer.update({"trace_level": ["OFF"]})
    assert tracer.sample("other", "6") is None


def test_flag_parsing() -> None:
    state = state_from_flags(["level=TIMESTAMPS", "rate=1", "log-frequency=2", "triton,file=/x/t.json"])
    assert (state.trace_level, state.trace_rate, state.log_frequency, state.trace_file) == (
        ["TIMESTAMPS"],
        1,
        2,
        "/x/t.json",
    )
    with pytest.raises(ValueError, match="--trace-config"):
        state_from_flags(["level"])
    with pytest.raises(ValueError, match="invalid trace level"):
        state_from_flags(["level=LOUD"])


def test_traced_requests_are_written_with_every_stage(test_repos: list[Path], tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    server = tritonpy.Server(
        model_repository=test_repos,
        trace_config=["level=TIMESTAMPS", "rate=2", f"triton,file={trace_file}"],
    )
    server.backends.register("testbk", TestBackend())
    with server:
        a = np.ones((1, 4), np.int32)
        for i in range(6):
            server.model("addsub").predict({"INPUT0": a, "INPUT1": a}, request_id=f"r{i}")
    # Triton's file: compact JSON, the trace's own object before its REQUEST_START, then an
    # object per timestamp (observed on 2.51).
    text = trace_file.read_text()
    assert ", " not in text and ": " not in text
    entries = json.loads(text)
    assert entries[0] == {"id": 1, "model_name": "addsub", "model_version": 1, "request_id": "r1"}
    assert entries[1] == {
        "id": 1,
        "timestamps": [{"name": "REQUEST_START", "ns": entries[1]["timestamps"][0]["ns"]}],
    }
    assert all(
        set(e) == {"id", "timestamps"} and len(e["timestamps"]) == 1 for e in entries if "model_name" not in e
    )
    assert len(entries) == 3 * (1 + 8)  # three traces, eight stamps each
    records = read_traces(trace_file)
    assert [r["request_id"] for r in records] == ["r1", "r3", "r5"]
    names = [t["name"] for t in records[0]["timestamps"]]
    assert names == CORE_STAMPS
    ns = [t["ns"] for t in records[0]["timestamps"]]
    assert ns == sorted(ns)
    assert records[0]["model_name"] == "addsub" and records[0]["model_version"] == 1


def test_level_tensors_records_inputs_and_outputs_as_triton_does(
    test_repos: list[Path], tmp_path: Path
) -> None:
    """Triton's tensor records: each input when its batcher queues the request
    (TENSOR_QUEUE_INPUT), each output of each response sent (TENSOR_BACKEND_OUTPUT), among
    the stamps in the order taken; with TENSORS alone, no stamps and no header object."""
    for levels in (["TIMESTAMPS", "TENSORS"], ["TENSORS"]):
        trace_file = tmp_path / f"{len(levels)}.json"
        flags = [f"level={level}" for level in levels]
        server = tritonpy.Server(
            model_repository=test_repos, trace_config=[*flags, "rate=1", f"triton,file={trace_file}"]
        )
        server.backends.register("testbk", TestBackend())
        with server:
            a, b = np.array([[1, 2, 3, 4]], np.int32), np.array([[10, 20, 30, 40]], np.int32)
            server.model("addsub").predict({"INPUT0": a, "INPUT1": b}, request_id="t")
        entries = json.loads(trace_file.read_text())
        tensors = [e for e in entries if "activity" in e]
        assert tensors == [
            {"id": 1, "activity": "TENSOR_QUEUE_INPUT", "tensor": t}
            for t in (
                {"name": "INPUT0", "data": "1,2,3,4", "shape": "1,4", "dtype": "INT32"},
                {"name": "INPUT1", "data": "10,20,30,40", "shape": "1,4", "dtype": "INT32"},
            )
        ] + [
            {"id": 1, "activity": "TENSOR_BACKEND_OUTPUT", "tensor": t}
            for t in (
                {"name": "OUTPUT0", "data": "11,22,33,44", "shape": "1,4", "dtype": "INT32"},
                {"name": "OUTPUT1", "data": "-9,-18,-27,-36", "shape": "1,4", "dtype": "INT32"},
            )
        ]
        if levels == ["TENSORS"]:
            assert entries == tensors
            continue
        order = [e.get("activity") or e.get("timestamps", [{}])[0].get("name", "header") for e in entries]
        assert order.index("TENSOR_QUEUE_INPUT") == order.index("QUEUE_START") + 1
        assert order.index("INFER_RESPONSE_COMPLETE") > order.index("TENSOR_BACKEND_OUTPUT")
        assert order[0] == "header" and read_traces(trace_file)[0]["request_id"] == "t"


def test_tensor_records_write_values_as_triton_s_tracer_streams_them() -> None:
    def data(array: np.ndarray, datatype: str | None = None) -> str:
        tensor = Tensor.from_numpy("X", array) if datatype is None else Tensor.from_string_array(array, "X")
        return tensor_record(7, "TENSOR_QUEUE_INPUT", tensor)["tensor"]["data"]

    assert data(np.array([0.5, 1e-7, 123456789.0, -0.0], np.float32)) == "0.5,1e-07,1.23457e+08,-0"
    assert data(np.array([[True, False]])) == "1,0"
    assert data(np.array([-3, 250], np.int16)) == "-3,250"
    assert data(np.array([-3, 7], np.int8)) == "-3,7"  # numbers (Triton streams characters)
    assert data(np.array([1.5], np.float16)) == ""  # as Triton: FP16/BF16 left empty
    assert data(np.array(["a", "bc"], object), "BYTES") == '"a","bc"'
    record = tensor_record(7, "TENSOR_BACKEND_OUTPUT", Tensor.from_numpy("Y", np.zeros((2, 0, 3), np.int64)))
    assert record == {
        "id": 7,
        "activity": "TENSOR_BACKEND_OUTPUT",
        "tensor": {"name": "Y", "data": "", "shape": "2,0,3", "dtype": "INT64"},
    }


@pytest.mark.parametrize(
    ("word", "level"),
    [
        ("MIN", "TIMESTAMPS"),
        ("max", "TIMESTAMPS"),
        ("on", "TIMESTAMPS"),
        ("true", "TIMESTAMPS"),
        ("false", "OFF"),
    ],
)
def test_the_older_level_words_of_triton_s_command_line_are_taken(word: str, level: str) -> None:
    # NVIDIA's L0_batcher starts Triton with --trace-level=MIN (ParseTraceLevelOption).
    assert state_from_flags([f"level={word}"]).trace_level == [level]
    with pytest.raises(ValueError, match="invalid trace level 'MEDIUM'"):
        state_from_flags(["level=MEDIUM"])
    # As Triton's command line: each level flag adds its level to the others.
    both = ["TIMESTAMPS", "TENSORS"]
    assert state_from_flags(["level=TIMESTAMPS", "level=OFF", "level=TENSORS"]).trace_level == both


def test_each_response_of_a_decoupled_model_is_stamped(tmp_path: Path) -> None:
    """Triton's front ends stamp INFER_RESPONSE_COMPLETE per response they are handed (NVIDIA's
    L0_batcher orders responses by it); a FINAL flag without a response is not one."""
    write_sender_models(tmp_path)
    trace_file = tmp_path / "trace.json"
    server = tritonpy.Server(
        model_repository=[tmp_path], trace_config=["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"]
    )
    server.backends.register("testbk", TestBackend())
    a = np.ones((1, 4), np.int32)
    with server:
        assert len(list(server.model("decoupled_empty_final").infer({"INPUT0": a, "INPUT1": a}))) == 2
        assert len(list(server.model("decoupled").infer({"INPUT0": a, "INPUT1": a}))) == 3
    first, second = read_traces(trace_file)
    for record, count in ((first, 2), (second, 3)):
        names = [t["name"] for t in record["timestamps"]]
        assert names.count("INFER_RESPONSE_COMPLETE") == count, names
        assert names[-1] == "REQUEST_END"


@pytest.mark.parametrize("ending", ["sent", "dropped"])
def test_a_front_end_holds_the_trace_until_its_answer_is_sent(tmp_path: Path, ending: str) -> None:
    """The core's end and the front end's are met in either order; the trace is written once,
    after both, with the front end's stamps around the core's."""
    trace_file = tmp_path / "trace.json"
    server = tritonpy.Server(
        model_repository=write_repos(tmp_path),
        trace_config=["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"],
    )
    server.backends.register("testbk", TestBackend())
    a = Tensor.from_numpy("INPUT0", np.ones((1, 4), np.int32))
    b = Tensor.from_numpy("INPUT1", np.ones((1, 4), np.int32))
    with server:
        answered = threading.Event()
        front = server.tracer.front("HTTP")
        assert front is not None
        front.received()
        request = tritonpy.InferenceRequest("addsub", -1, {"INPUT0": a, "INPUT1": b}, id="held")
        server.start_infer(request, lambda response: answered.set(), front=front)
        assert answered.wait(30)
        trace = front.trace
        assert trace is not None
        deadline = time.monotonic() + 30
        while trace.holds > 1 and time.monotonic() < deadline:  # the core's end (REQUEST_END)
            time.sleep(0.001)
        assert trace.holds == 1 and not server.tracer._streams  # not written without the front end
        front.sending()
        getattr(front, ending)()
        assert front.trace is None
    (record,) = read_traces(trace_file)
    names = [t["name"] for t in record["timestamps"]]
    assert names[:3] == ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START"]
    assert names[-2:] == (
        ["HTTP_SEND_START", "HTTP_SEND_END"] if ending == "sent" else ["REQUEST_END", "HTTP_SEND_START"]
    )


def test_a_stream_stamps_each_answer_it_sends_and_lets_the_trace_go_after_the_last(tmp_path: Path) -> None:
    """A decoupled model's three responses, each sent by the front end (as ``StreamInfer``
    sends them): a send stamp pair per response, the trace written once, after the last."""
    write_sender_models(tmp_path)
    trace_file = tmp_path / "trace.json"
    server = tritonpy.Server(
        model_repository=[tmp_path], trace_config=["level=TIMESTAMPS", "rate=1", f"triton,file={trace_file}"]
    )
    server.backends.register("testbk", TestBackend())
    a = Tensor.from_numpy("INPUT0", np.ones((1, 4), np.int32))
    b = Tensor.from_numpy("INPUT1", np.ones((1, 4), np.int32))
    with server:
        front = server.tracer.front("GRPC")
        assert front is not None
        front.received()
        done = threading.Event()

        def answered(response: object, flags: int) -> None:
            final = bool(flags & RESPONSE_COMPLETE_FINAL)
            if response is not None:
                front.sending()
                front.sent(last=final)
            elif final:
                front.dropped()
            if final:
                done.set()

        request = tritonpy.InferenceRequest("decoupled", -1, {"INPUT0": a, "INPUT1": b}, id="s")
        server.submit(request, answered, front=front)
        assert done.wait(30)
    (record,) = read_traces(trace_file)
    names = [t["name"] for t in record["timestamps"]]
    assert names.count("GRPC_SEND_START") == names.count("GRPC_SEND_END") == 3
    assert names.count("INFER_RESPONSE_COMPLETE") == 3 and names[:2] == [
        "GRPC_WAITREAD_START",
        "GRPC_WAITREAD_END",
    ]


def test_a_model_not_loaded_has_no_trace_settings(test_repos: list[Path]) -> None:
    """As Triton 2.51 (observed): a model's settings need it ready; one only in the
    repository, or unloaded, is unknown (400 / INVALID_ARGUMENT)."""
    server = tritonpy.Server(model_repository=test_repos, model_control_mode="explicit")
    server.backends.register("testbk", TestBackend())
    with server:
        server.load_model("addsub")
        assert server.trace_settings("addsub", {"log_frequency": "1"})["log_frequency"] == "1"
        server.unload_model("addsub")
        for changes in (None, {"log_frequency": "1"}):
            with pytest.raises(TritonError, match="^Request for unknown model : addsub$"):
                server.trace_settings("addsub", changes)
        with pytest.raises(TritonError, match="unknown model : one_input"):  # in the repository only
            server.trace_settings("one_input")
