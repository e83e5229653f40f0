"""Triton-style Python models served by a real ``tritonpy serve``, queried with tritonclient."""

from __future__ import annotations

import json
import queue
import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from triton_python_backend_utils._wire import shm_dir
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

pytestmark = pytest.mark.integration


def _inputs(module: Any, **arrays: np.ndarray) -> list[Any]:
    out = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        out.append(tensor)
    return out


@pytest.fixture(scope="module")
def http(served: Any) -> Any:
    client = httpclient.InferenceServerClient(served.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(served: Any) -> Any:
    client = grpcclient.InferenceServerClient(served.grpc_url)
    yield client
    client.close()


A = np.array([1, 2, 3, 4], dtype=np.float32)
B = np.array([10, 20, 30, 40], dtype=np.float32)


def test_every_model_is_ready(http: Any) -> None:
    index = {m["name"]: m for m in http.get_model_repository_index()}
    not_ready = {n: m.get("reason") for n, m in index.items() if m.get("state") != "READY"}
    assert not not_ready


@pytest.mark.parametrize("model", ["add_sub", "add_sub_inproc"])
def test_add_sub_over_http_and_grpc(http: Any, grpc: Any, model: str) -> None:
    for client, module in ((http, httpclient), (grpc, grpcclient)):
        result = client.infer(model, _inputs(module, INPUT0=A, INPUT1=B))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


def test_large_tensors_cross_through_shared_memory(http: Any, grpc: Any) -> None:
    # Above the inline limit both ways: 4 MiB of floats, many times over the 64 MiB arenas
    # (blocks must come back), and BYTES tensors of long texts.
    x = np.arange(1 << 20, dtype=np.float32)
    for i in range(20):
        client, module = (http, httpclient) if i % 2 else (grpc, grpcclient)
        np.testing.assert_array_equal(
            client.infer("double", _inputs(module, X=x + i)).as_numpy("Y"), 2 * (x + i)
        )
    text = np.array([["x" * 20000, "héllo"]], dtype=np.object_)
    result = http.infer("strings", _inputs(httpclient, TEXT=text))
    assert result.as_numpy("UPPER")[0, 0] == b"X" * 20000
    assert result.as_numpy("UPPER")[0, 1] == "HÉLLO".encode()
    np.testing.assert_array_equal(result.as_numpy("LENGTH"), [[20000, 6]])


def test_a_tensor_larger_than_the_arenas_crosses_in_a_file_of_its_own(http: Any, served: Any) -> None:
    """80 MB each way, past the stub's 64 MiB arenas: the tensor crosses in a
    shared-memory file of its own, which its reader removes. Over HTTP it is also
    past --http-max-input-size, which binary tensor data is not held to."""
    x = np.arange(20_000_000, dtype=np.float32)
    np.testing.assert_array_equal(http.infer("double", _inputs(httpclient, X=x)).as_numpy("Y"), 2 * x)
    left = [p.name for p in Path(shm_dir()).glob(f"tritonpy-{served.proc.pid}-*-*-*")]
    assert not left  # both tensors' files were removed by their readers


def test_strings_batch(grpc: Any) -> None:
    text = np.array([[b"ab", b"cd"], [b"ef", b""]], dtype=np.object_)
    result = grpc.infer("strings", _inputs(grpcclient, TEXT=text))
    np.testing.assert_array_equal(result.as_numpy("UPPER"), [[b"AB", b"CD"], [b"EF", b""]])
    np.testing.assert_array_equal(result.as_numpy("LENGTH"), [[2, 2], [2, 0]])


def test_auto_complete_config(http: Any) -> None:
    config = http.get_model_config("auto")
    assert config["max_batch_size"] == 8
    assert [i["name"] for i in config["input"]] == ["X"]
    assert [o["name"] for o in config["output"]] == ["Y"]
    assert "dynamic_batching" in config
    x = np.ones((2, 3), dtype=np.float32)
    np.testing.assert_array_equal(http.infer("auto", _inputs(httpclient, X=x)).as_numpy("Y"), x * 2)


def _bls(client: Any, module: Any, target: str, caller: str = "bls") -> Any:
    name = np.array([target.encode()], dtype=np.object_)
    return client.infer(caller, _inputs(module, MODEL_NAME=name, INPUT0=A, INPUT1=B))


BLS_CALLERS = pytest.mark.parametrize("caller", ["bls", "bls_inproc"])


def _inference_count(http: Any, model: str) -> int:
    stats = http.get_inference_statistics(model)["model_stats"][0]
    return int(stats["inference_count"])


@BLS_CALLERS
@pytest.mark.parametrize("target", ["add_sub_onnx", "add_sub"])
def test_bls_reaches_other_backends_and_is_counted(http: Any, grpc: Any, target: str, caller: str) -> None:
    before = _inference_count(http, target)
    for client, module in ((http, httpclient), (grpc, grpcclient)):
        result = _bls(client, module, target, caller)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)
    assert _inference_count(http, target) == before + 2


@BLS_CALLERS
def test_bls_to_a_decoupled_model_iterates_its_responses(http: Any, caller: str) -> None:
    assert _bls(http, httpclient, "repeat", caller).as_numpy("COUNT")[0] == 5


@BLS_CALLERS
def test_bls_to_a_missing_model_is_an_error_response(http: Any, grpc: Any, caller: str) -> None:
    # Triton's words and code (INTERNAL), passed through by the calling model (as Triton
    # words it since 2026: "... Model 'does_not_exist' is not ready." before).
    expected = (
        "Model does_not_exist - Error when running inference: Request for unknown model: "
        "'does_not_exist' is not found"
    )
    with pytest.raises(InferenceServerException) as raised:
        _bls(http, httpclient, "does_not_exist", caller)
    assert raised.value.message() == expected
    with pytest.raises(InferenceServerException) as raised:
        _bls(grpc, grpcclient, "does_not_exist", caller)
    assert (raised.value.status(), raised.value.message()) == ("StatusCode.INTERNAL", expected)


@pytest.mark.parametrize("caller", ["bls_timeout", "bls_timeout_inproc"])
def test_a_bls_call_past_its_timeout_gets_an_error_response(served: Any, http: Any, caller: str) -> None:
    result = http.infer(caller, _inputs(httpclient, X=np.zeros(1, np.float32)))
    message = result.as_numpy("MESSAGE")[0].decode()
    assert message == "BLS request to model 'sleeper' got no response within 0.01 s"
    # The target is untouched and keeps serving.
    s = np.array([0.0], np.float32)
    assert http.infer("sleeper", _inputs(httpclient, S=s)).as_numpy("SLEPT")[0] == 0.0


def test_bls_from_a_forked_process_is_a_clear_error(http: Any) -> None:
    """A model's multiprocessing child cannot reach the server (the answer would reach the
    stub, never the child): it gets an error at once instead of waiting for ever."""
    result = http.infer("forker", _inputs(httpclient, X=np.zeros(1, np.float32)))
    message = result.as_numpy("MESSAGE")[0].decode()
    assert message == (
        "BLS from a process forked by the model is not supported; use threads or async_exec "
        "in the stub process itself"
    )
    assert http.infer("add_sub", _inputs(httpclient, INPUT0=A, INPUT1=B)).as_numpy("OUTPUT0").tolist() == [
        11,
        22,
        33,
        44,
    ]


def _stream(grpc_url: str, model: str, inputs: list[Any], **kwargs: Any) -> list[Any]:
    results: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client = grpcclient.InferenceServerClient(grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    client.async_stream_infer(model, inputs, **kwargs)
    out = []
    while True:
        result, error = results.get(timeout=30)
        assert error is None, error
        out.append(result)
        final = result.get_response().parameters.get("triton_final_response")
        if final is not None and final.bool_param:
            break
    client.stop_stream()
    client.close()
    return out


DECOUPLED = pytest.mark.parametrize("model", ["repeat", "repeat_inproc"])


@DECOUPLED
def test_decoupled_streams_one_response_per_element(served: Any, model: str) -> None:
    values = np.array([5, 6, 7, 8], dtype=np.int32)
    results = _stream(
        served.grpc_url, model, _inputs(grpcclient, IN=values), enable_empty_final_response=True
    )
    data = [r for r in results if r.as_numpy("OUT") is not None]
    assert [int(r.as_numpy("OUT")[0]) for r in data] == [5, 6, 7, 8]
    assert [int(r.as_numpy("IDX")[0]) for r in data] == [0, 1, 2, 3]
    assert len(results) == 5  # and the empty final response


def test_unary_infer_on_a_decoupled_model_is_refused(http: Any, grpc: Any) -> None:
    values = np.array([1], dtype=np.int32)
    with pytest.raises(InferenceServerException, match="decoupled transaction policy"):
        http.infer("repeat", _inputs(httpclient, IN=values))
    with pytest.raises(InferenceServerException, match="decoupled transaction policy"):
        grpc.infer("repeat", _inputs(grpcclient, IN=values))


@DECOUPLED
def test_generate_stream_over_http(served: Any, model: str) -> None:
    with httpx.stream(
        "POST", f"http://{served.url}/v2/models/{model}/generate_stream", json={"IN": [3, 4, 5]}, timeout=30
    ) as response:
        assert response.status_code == 200
        events = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert [e["OUT"] for e in events] == [3, 4, 5]


@DECOUPLED
def test_closing_the_stream_cancels_the_request(served: Any, model: str) -> None:
    client = grpcclient.InferenceServerClient(served.grpc_url)
    got: queue.SimpleQueue[Any] = queue.SimpleQueue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    inputs = _inputs(
        grpcclient, IN=np.array([1], dtype=np.int32), WAIT_CANCEL=np.array([True], dtype=np.bool_)
    )
    client.async_stream_infer(model, inputs, request_id=f"cancel-{model}")
    result, error = got.get(timeout=30)  # the model answered and now waits
    assert error is None and int(result.as_numpy("OUT")[0]) == 1
    client.stop_stream(cancel_requests=True)
    client.close()
    served.wait_for_output(f"request cancel-{model} was cancelled", timeout=30)


def test_model_errors_come_back_and_the_server_keeps_serving(http: Any, grpc: Any) -> None:
    with pytest.raises(InferenceServerException) as raised:
        http.infer("raiser", _inputs(httpclient, X=np.array([0], dtype=np.int32)))
    # Triton's format: the instance, the exception, then the model's own frames only.
    head, frames = raised.value.message().split("\n\nAt:\n")
    assert head == (
        "Failed to process the request(s) for model 'raiser_0', message: "
        "ValueError: the model raised on purpose"
    )
    assert frames.endswith("/raiser/1/model.py(11): execute\n") and frames.count("\n") == 1
    with pytest.raises(InferenceServerException, match="bad input on purpose"):
        grpc.infer("raiser", _inputs(grpcclient, X=np.array([1], dtype=np.int32)))
    result = http.infer("raiser", _inputs(httpclient, X=np.array([7], dtype=np.int32)))
    assert result.as_numpy("Y")[0] == 7


def _pid(http: Any, model: str = "crasher") -> int:
    return int(http.infer(model, _inputs(httpclient, X=np.array([0], dtype=np.int32))).as_numpy("PID")[0])


def test_a_stub_that_kills_itself_is_reported_and_restarted(served: Any, http: Any) -> None:
    first = _pid(http)
    assert first != served.proc.pid  # the model runs in its own process
    with pytest.raises(InferenceServerException) as raised:
        http.infer("crasher", _inputs(httpclient, X=np.array([1], dtype=np.int32)))
    assert raised.value.message() == "Stub process 'crasher_0' is not healthy."  # as Triton
    # The instance comes back with a new stub; other models never noticed.
    result = http.infer("add_sub", _inputs(httpclient, INPUT0=A, INPUT1=B))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    deadline = time.monotonic() + 60
    second = None
    while second is None and time.monotonic() < deadline:
        try:
            second = _pid(http)
        except InferenceServerException:
            time.sleep(0.1)
    assert second is not None and second != first
    served.wait_for_output("was restarted")


def test_two_instances_of_a_pure_python_model_run_in_parallel(served: Any) -> None:
    n = np.array([3_000_000], dtype=np.int64)
    spans: list[tuple[float, float, int]] = []

    def call() -> None:
        client = httpclient.InferenceServerClient(served.url)
        result = client.infer("busy", _inputs(httpclient, N=n))
        spans.append((result.as_numpy("START")[0], result.as_numpy("END")[0], int(result.as_numpy("PID")[0])))
        client.close()

    for _ in range(3):  # overlap is what the design guarantees; give a loaded CI box a few tries
        spans.clear()
        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        (s1, e1, p1), (s2, e2, p2) = spans
        assert p1 != p2  # each instance is its own process
        if s1 < e2 and s2 < e1:
            return
    pytest.fail(f"execution intervals never overlapped: {spans}")


def test_async_execute_with_bls(served: Any) -> None:
    results: list[Any] = []

    def call(i: int) -> None:
        client = httpclient.InferenceServerClient(served.url)
        x = np.array([i, 1], dtype=np.float32)
        results.append((i, client.infer("async_add", _inputs(httpclient, X=x)).as_numpy("Y")))
        client.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted((i, list(y)) for i, y in results) == [(i, [2 * i, 2]) for i in range(4)]


def test_decoupled_async_exec_resolves_at_the_first_response(served: Any) -> None:
    """As Triton's: ``await async_exec(decoupled=True)`` waits for the first response on
    the event loop, so four requests whose model then iterates synchronously (NVIDIA's
    async_execute_decouple_bls) all reach their target at once: the target answers
    MET = 1 only when four of its executes meet (0 after 20 s alone)."""
    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(served.grpc_url)
    client.start_stream(lambda result, error: answers.put(error or result.as_numpy("MET")))
    try:
        for _ in range(4):
            client.async_stream_infer("rendezvous_bls", _inputs(grpcclient, X=np.ones((1, 1), np.float32)))
        got = [answers.get(timeout=60) for _ in range(4)]
    finally:
        client.stop_stream()
        client.close()
    assert [np.asarray(a).tolist() for a in got] == [[[1]]] * 4, got


def test_an_error_after_the_final_response_is_logged(served: Any) -> None:
    """A decoupled model that raises after its FINAL response has no client left to
    tell: the error goes to the server log, as Triton logs it."""
    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(served.grpc_url)
    client.start_stream(lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer(
            "rendezvous",
            _inputs(grpcclient, X=-np.ones((1, 1), np.float32)),
            enable_empty_final_response=True,
        )
        result, error = answers.get(timeout=30)
        assert error is None and result.get_response().parameters["triton_final_response"].bool_param
        served.wait_for_output("raised after the final response", timeout=30)
    finally:
        client.stop_stream()
        client.close()
    assert "Failed to process the request(s) for model 'rendezvous_0'" in served.output()


@pytest.mark.parametrize("model", ["stream_reader", "stream_reader_inproc"])
def test_decoupled_bls_iterated_and_cancelled_as_triton_documents(served: Any, http: Any, model: str) -> None:
    """``await async_exec(decoupled=True)`` gives a plain iterator with ``cancel()``."""

    def received(cancel_after: int) -> int:
        x = np.array([cancel_after], np.int32)
        return int(http.infer(model, _inputs(httpclient, CANCEL_AFTER=x)).as_numpy("RECEIVED")[0])

    assert received(0) == 5
    # repeat sends its five responses, then waits until it sees the cancellation.
    assert received(2) == 5
    served.wait_for_output(f"repeat: request {model}-2 was cancelled", timeout=30)


def test_custom_metrics_and_logging(served: Any, http: Any) -> None:
    totals = []
    for size in (1, 3, 20):
        x = np.ones(size, dtype=np.float32)
        totals.append(http.infer("counter", _inputs(httpclient, X=x)).as_numpy("TOTAL")[0])
    assert totals == [1.0, 2.0, 3.0]
    with urllib.request.urlopen(served.metrics_url, timeout=10) as response:
        text = response.read().decode()
    assert "# TYPE counter_requests_total_example counter" in text
    assert 'counter_requests_total_example{model="counter"} 3' in text
    assert 'counter_last_sum_example{model="counter"} 20' in text
    assert 'counter_input_size_example_bucket{model="counter",le="4"} 2' in text
    assert 'counter_input_size_example_count{model="counter"} 3' in text
    out = served.wait_for_output("counter saw 20 values")
    # Triton's layout, the model's file and line, the message a JSON string:
    # 'I1127 11:09:04.924639 4242 model.py:21] "counter initialized"'.
    source = (Path(__file__).parent / "models" / "counter" / "1" / "model.py").read_text().splitlines()
    info = 1 + next(i for i, line in enumerate(source) if 'log_info("counter initialized")' in line)
    warn = 1 + next(i for i, line in enumerate(source) if "log_warn(" in line)
    assert re.search(rf'^I\d{{4}} [\d:.]+ \d+ model\.py:{info}\] "counter initialized"$', out, re.M)
    assert re.search(rf'^W\d{{4}} [\d:.]+ \d+ model\.py:{warn}\] "counter saw 20 values"$', out, re.M)
    # Triton's words for a metric whose family was dropped, and for buckets out of order.
    assert "refused: Invalid metric operation as the corresponding 'MetricFamily' has been deleted." in out
    assert "refused: Bucket Boundaries must be strictly sorted" in out


@pytest.mark.parametrize("model", ["reqinfo", "reqinfo_inproc"])
def test_timeout_and_priority_are_reserved_parameters(http: Any, grpc: Any, model: str) -> None:
    """As Triton 2.51 shows a request to a Python model (observed): ``timeout`` and
    ``priority`` are not in ``parameters()`` (compact JSON), ``timeout()`` is the
    request's timeout in µs (0 without one)."""
    x = np.ones(1, dtype=np.float32)
    for client, module in ((http, httpclient), (grpc, grpcclient)):
        result = client.infer(
            model, _inputs(module, X=x), timeout=1234567, priority=3, parameters={"custom": "x", "n": 5}
        )
        info = json.loads(result.as_numpy("INFO")[0])
        assert info["timeout"] == 1234567
        assert json.loads(info["parameters"]) == {"custom": "x", "n": 5}  # (gRPC's map has no order)
        assert " " not in info["parameters"]  # compact, as Triton's: {"custom":"x","n":5}
        info = json.loads(client.infer(model, _inputs(module, X=x)).as_numpy("INFO")[0])
        assert info == {"parameters": "{}", "timeout": 0}


def test_python_based_backend_from_the_backend_directory(http: Any) -> None:
    text = np.array([b"hi"], dtype=np.object_)
    result = http.infer("custom_be", _inputs(httpclient, TEXT=text))
    assert result.as_numpy("OUT")[0] == b"custom_be: HI!"


@pytest.mark.parametrize("model", ["envinfo", "envinfo_packed"])
def test_execution_environment(served: Any, http: Any, model: str) -> None:
    """EXECUTION_ENV_PATH: the stub runs that environment's interpreter, with its packages."""
    result = http.infer(model, _inputs(httpclient, X=np.zeros(1, np.float32)))
    prefix, marker = (v.decode() for v in result.as_numpy("INFO"))
    assert marker == "from the execution environment"
    if model == "envinfo":
        assert prefix.endswith("/envinfo/env")
    else:  # unpacked once into the cache
        assert "/tritonpy/envs/" in prefix


@pytest.mark.parametrize("model", ["extra", "extra_inproc"])
def test_only_requested_outputs_come_back(http: Any, model: str) -> None:
    """As Triton: outputs the client did not ask for (by default: the config's) are dropped,
    including ones the config does not declare."""
    x = np.array([1, 2], dtype=np.float32)
    result = http.infer(model, _inputs(httpclient, X=x))
    assert sorted(o["name"] for o in result.get_response()["outputs"]) == ["W", "Y"]
    only_w = http.infer(model, _inputs(httpclient, X=x), outputs=[httpclient.InferRequestedOutput("W")])
    assert [o["name"] for o in only_w.get_response()["outputs"]] == ["W"]
    np.testing.assert_array_equal(only_w.as_numpy("W"), 2 * x)


def test_a_stub_past_its_memory_limit_fails_inside_the_model(served: Any, http: Any) -> None:
    """hog starts with 83 % of its limit used, as a stub does on a host with many cores: one
    request for twice its limit fails inside the model, whatever the host's memory, and the
    stub is not restarted (it did not grow: a fresh one would have no more room)."""
    limit_mb = int(http.get_model_config("hog")["parameters"]["STUB_MEMORY_LIMIT_MB"]["string_value"])
    small = http.infer("hog", _inputs(httpclient, MB=np.array([16], np.int64)))
    assert small.as_numpy("GOT_MB")[0] == 16
    with pytest.raises(InferenceServerException, match="Unable to allocate") as raised:
        http.infer("hog", _inputs(httpclient, MB=np.array([2 * limit_mb], np.int64)))
    assert raised.value.message().startswith("Failed to process the request(s) for model 'hog_0'")
    # The stub survived its MemoryError and keeps serving; the server never saw the allocation.
    after = http.infer("hog", _inputs(httpclient, MB=np.array([8], np.int64)))
    assert after.as_numpy("GOT_MB")[0] == 8
    # One oversized request is not a leak: the same stub serves on, not restarted.
    assert after.as_numpy("PID")[0] == small.as_numpy("PID")[0]
    assert "the stub of 'hog_0' uses" not in served.output()
    assert "the stub of 'hog_0' starts with" in served.output()  # warned: the limit leaves little room


@pytest.mark.parametrize("model", ["gate", "gate_inproc"])
def test_is_ready_decides_model_readiness(python_repo: Any, http: Any, grpc: Any, model: str) -> None:
    flag = python_repo / model / "closed"
    assert http.is_model_ready(model) and grpc.is_model_ready(model)
    flag.write_text("")
    try:
        assert not http.is_model_ready(model) and not grpc.is_model_ready(model)
        assert http.is_server_live()
        index = {m["name"]: m for m in http.get_model_repository_index()}
        assert index[model]["state"] == "READY"  # loaded; just not ready to serve now
    finally:
        flag.unlink()
    assert http.is_model_ready(model) and grpc.is_model_ready(model)


def test_a_hung_execute_fails_past_its_timeout_and_the_stub_restarts(http: Any) -> None:
    def pid() -> int:
        return int(http.infer("hang", _inputs(httpclient, X=np.array([1], np.int32))).as_numpy("PID")[0])

    before = pid()
    with pytest.raises(InferenceServerException) as raised:
        http.infer("hang", _inputs(httpclient, X=np.array([0], np.int32)))
    assert raised.value.message() == (
        "Failed to process the request(s) for model 'hang_0', message: execute did not finish "
        "within EXECUTE_TIMEOUT_SECONDS=1; the stub was restarted"
    )
    assert pid() != before  # a new stub serves the next request


@pytest.mark.parametrize("model", ["fanout", "fanout_inproc"])
def test_bls_from_the_models_own_threads_while_execute_waits(http: Any, model: str) -> None:
    result = http.infer(model, _inputs(httpclient, N=np.array([16], np.int32)))
    assert result.as_numpy("SUM")[0] == sum(2 * v for v in range(16))


@pytest.mark.parametrize("model", ["leaker", "leaker_async"])
def test_a_stub_that_leaked_to_its_memory_limit_is_restarted(served: Any, http: Any, model: str) -> None:
    def call(mb: int) -> int:
        return int(http.infer(model, _inputs(httpclient, MB=np.array([mb], np.int64))).as_numpy("PID")[0])

    first = call(1)
    failed = None
    for _ in range(30):  # 64 MiB a request, kept: the 1024 MiB limit is reached well before
        try:
            assert call(64) == first
        except InferenceServerException as exc:
            failed = exc
            break
    assert failed is not None and "MemoryError" in failed.message(), failed
    assert failed.message().startswith(f"Failed to process the request(s) for model '{model}_0'")
    # The stub could serve nothing more (each request failed from here on, before the fix):
    # it was restarted, and the very next request is served by the fresh stub.
    assert call(1) != first
    assert http.is_model_ready(model)
    served.wait_for_output(f"the stub of '{model}_0' uses")  # the warning says why


@pytest.mark.parametrize("model", ["unsendable", "unsendable_async"])
def test_an_answer_the_stub_cannot_send_is_an_error_not_a_hang(served: Any, model: str) -> None:
    """The stub's own machinery failing after execute returned (here: pickling a parameter;
    under STUB_MEMORY_LIMIT_MB: no memory left for large outputs) answers the batch with
    that error. Before, the stub's main thread died of it (an async model's request then
    waited forever)."""
    client = httpclient.InferenceServerClient(served.url, network_timeout=60)

    def call(x: int) -> int:
        return int(client.infer(model, _inputs(httpclient, X=np.array([x], np.int32))).as_numpy("PID")[0])

    pid = call(5)
    with pytest.raises(InferenceServerException) as raised:
        call(0)
    message = raised.value.message()
    assert message.startswith(f"Failed to process the request(s) for model '{model}_0'"), message
    assert "pickle" in message
    assert call(5) == pid  # the same stub serves on


def test_a_long_execute_sees_its_cancellation(served: Any, grpc: Any, http: Any) -> None:
    """The stub reads beside a long ``execute`` (on the model's own thread): a
    cancellation reaches ``is_cancelled()`` while it runs, and the next request is
    answered as soon as it ends."""
    answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
    seconds = np.array([30.0], np.float32)
    inputs = _inputs(grpcclient, SECONDS=seconds)
    call = grpc.async_infer("spinner", inputs, lambda result, error: answers.put(error), request_id="s-1")
    time.sleep(0.5)  # well past the time execute runs before the stub reads beside it
    call.cancel()
    error = answers.get(timeout=30)
    assert error is not None and "CANCELLED" in str(error)
    served.wait_for_output("spinner: request s-1 was cancelled", timeout=10)
    result = http.infer("spinner", _inputs(httpclient, SECONDS=np.array([0.05], np.float32)))
    assert result.as_numpy("SAW_CANCEL").tolist() == [False]
