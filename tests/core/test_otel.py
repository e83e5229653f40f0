"""OpenTelemetry tracing (``--trace-config mode=opentelemetry``) against a real OTLP/HTTP
receiver on 127.0.0.1: spans, their parents, names and attributes, as Triton emits them;
context from a client's ``traceparent`` (HTTP header, gRPC metadata); ensembles and BLS
as children; an unreachable collector never holds an inference up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra")
import tritonpy  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
from tritonpy_sdk import TritonError  # noqa: E402
from tritonpy_serverprocess import ServerProcess, free_port  # noqa: E402
from tritonpy_testbackend import TestBackend, write_model  # noqa: E402
from tritonpy_testservers import GrpcServer, LiveServer  # noqa: E402

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
#: Seconds after which a call counts as hung (far above its time on a loaded 2-core machine).
HANG = 60.0
CLIENT_SPAN = "00f067aa0ba902b7"

DOUBLE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)]
            )
            for r in requests
        ]
"""

CALLER = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            bls = pb_utils.InferenceRequest(
                model_name="double",
                requested_output_names=["OUT"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                trace=request.trace(),
            )
            out = bls.exec().output_tensors()[0]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out.as_numpy())]))
        return responses
"""

IO = """
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

PIPE = """
name: "pipe"
platform: "ensemble"
@IO@
ensemble_scheduling {
  step [
    { model_name: "double" model_version: -1
      input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "mid" } },
    { model_name: "double" model_version: -1
      input_map { key: "IN" value: "mid" } output_map { key: "OUT" value: "OUT" } }
  ]
}
""".replace("@IO@", IO)


class Receiver:
    """An OTLP/HTTP trace receiver: keeps the spans of every export it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.resources: list[dict[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with receiver._lock:
                    for resource_spans in message.resource_spans:
                        attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                        receiver.resources.append(attrs)
                        for scope in resource_spans.scope_spans:
                            receiver.spans.extend(scope.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1/traces"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def trace(self, request_id: str, count: int, timeout: float = 10) -> list[Any]:
        """The spans of the trace whose model spans carry ``request_id``, once ``count`` arrived."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                ids = {
                    s.trace_id
                    for s in self.spans
                    if any(
                        a.key == "triton.request_id" and a.value.string_value == request_id
                        for a in s.attributes
                    )
                }
                spans = [s for s in self.spans if s.trace_id in ids]
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.02)

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        out[a.key] = getattr(a.value, kind)
    return out


def _repo(root: Path) -> Path:
    for name, code in (("double", DOUBLE), ("caller", CALLER)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(code)
        (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{IO}')
    (root / "pipe" / "1").mkdir(parents=True)
    (root / "pipe" / "config.pbtxt").write_text(PIPE)
    return root


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tritonpy.Server, Receiver, str, str]]:
    receiver = Receiver()
    repo = _repo(tmp_path_factory.mktemp("otel"))
    # A model whose backend (in this process only) reports custom trace activities.
    activities = "OUTER_START,INNER_START,IN_INNER,INNER_END,IN_OUTER,OUTER_END,ON_MODEL,OPEN_START"
    parameter = f'parameters {{ key: "activities" value {{ string_value: "{activities}" }} }}'
    write_model(repo, "acts", extra=parameter)
    server = tritonpy.Server(
        model_repository=[repo],
        grpc_address="127.0.0.1",
        grpc_port=free_port(),
        trace_config=[
            "mode=opentelemetry",
            "level=TIMESTAMPS",
            "rate=1",
            f"opentelemetry,url={receiver.url}",
            "opentelemetry,resource=service.name=tritonpy-test",
            "opentelemetry,resource=deployment.environment=ci",
            "opentelemetry,bsp_schedule_delay=20",
        ],
    )
    server.backends.register("testbk", TestBackend())
    server.start()
    http = LiveServer(server)
    http.start()
    grpc = GrpcServer(server)
    try:
        yield server, receiver, http.url, grpc.url
    finally:
        grpc.stop()
        http.stop()
        server.stop()
        receiver.close()


def _by_name(spans: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def _events(span: Any) -> list[str]:
    return [e.name for e in span.events]


def test_a_request_is_three_spans_as_in_triton(traced: tuple[Any, Receiver, str, str]) -> None:
    server, receiver, _, _ = traced
    server.model("double").predict({"IN": np.ones(4, np.float32)}, request_id="plain")
    spans = _by_name(receiver.trace("plain", 3))
    assert sorted(spans) == ["InferRequest", "compute", "double"]
    root, model, compute = spans["InferRequest"][0], spans["double"][0], spans["compute"][0]
    assert root.parent_span_id == b""
    assert model.parent_span_id == root.span_id
    assert compute.parent_span_id == model.span_id
    attrs = _attrs(model)
    assert attrs["triton.model_name"] == "double"
    assert attrs["triton.model_version"] == 1
    assert attrs["triton.trace_parent_id"] == 0
    assert attrs["triton.request_id"] == "plain"
    assert _events(model) == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
    assert _events(compute) == ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]
    assert _events(root) == ["INFER_RESPONSE_COMPLETE"]  # the front end's, on the root span as Triton
    assert model.start_time_unix_nano <= compute.start_time_unix_nano <= compute.end_time_unix_nano
    assert compute.end_time_unix_nano <= model.end_time_unix_nano
    assert abs(model.start_time_unix_nano - time.time_ns()) < 60e9  # the epoch, not a monotonic clock
    resource = receiver.resources[0]
    assert resource["service.name"] == "tritonpy-test" and resource["deployment.environment"] == "ci"


def test_traceparent_over_http_and_grpc(traced: tuple[Any, Receiver, str, str]) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    _, receiver, http_url, grpc_url = traced
    for n, (module, url) in enumerate(((httpclient, http_url), (grpcclient, grpc_url))):
        client = module.InferenceServerClient(url)
        tensor = module.InferInput("IN", [4], "FP32")
        tensor.set_data_from_numpy(np.ones(4, np.float32))
        trace_id, span_id = f"{TRACE_ID[:-1]}{n}", f"{CLIENT_SPAN[:-1]}{n}"
        request_id = f"propagated{n}"
        client.infer(
            "double", [tensor], request_id=request_id, headers={"traceparent": f"00-{trace_id}-{span_id}-01"}
        )
        spans = _by_name(receiver.trace(request_id, 3))
        root = spans["InferRequest"][0]
        assert root.trace_id.hex() == trace_id
        assert root.parent_span_id.hex() == span_id
        assert spans["double"][0].parent_span_id == root.span_id
        # The front end's events, and only them, on the root span (NVIDIA's L0_trace
        # opentelemetry_unittest checks these lists); the span ends once the answer is sent.
        front = ("HTTP_RECV", "HTTP_SEND") if n == 0 else ("GRPC_WAITREAD", "GRPC_SEND")
        expected = [f"{stage}_{edge}" for stage in front for edge in ("START", "END")]
        assert sorted(_events(root)) == sorted(expected + ["INFER_RESPONSE_COMPLETE"])
        last = max(e.time_unix_nano for e in root.events)
        assert root.end_time_unix_nano == max(last, spans["double"][0].end_time_unix_nano)
        assert root.start_time_unix_nano == min(e.time_unix_nano for e in root.events)  # at receive
        client.close()


def test_traceparent_crosses_front_end_workers(tmp_path: Path) -> None:
    """With ``--frontend-workers 2`` the client's context reaches the core's spans."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    receiver = Receiver()
    server = ServerProcess(
        [_repo(tmp_path / "repo")],
        "--frontend-workers=2",
        "--allow-metrics=false",
        "--trace-config=mode=opentelemetry",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        f"--trace-config=opentelemetry,url={receiver.url}",
        "--trace-config=opentelemetry,bsp_schedule_delay=20",
        log=tmp_path / "server.log",
    )
    try:
        clients = ((httpclient, server.url), (grpcclient, server.grpc_url))
        for n, (module, url) in enumerate(clients):
            client = module.InferenceServerClient(url)
            tensor = module.InferInput("IN", [4], "FP32")
            tensor.set_data_from_numpy(np.ones(4, np.float32))
            trace_id, span_id = f"{TRACE_ID[:-1]}{n + 5}", f"{CLIENT_SPAN[:-1]}{n + 5}"
            request_id = f"through-workers{n}"
            client.infer(
                "double",
                [tensor],
                request_id=request_id,
                headers={"traceparent": f"00-{trace_id}-{span_id}-01"},
            )
            spans = _by_name(receiver.trace(request_id, 3))
            root = spans["InferRequest"][0]
            assert root.trace_id.hex() == trace_id, server.output()
            assert root.parent_span_id.hex() == span_id
            assert spans["double"][0].parent_span_id == root.span_id
            client.close()
    finally:
        server.stop()
        receiver.close()


def test_an_ensemble_is_a_parent_span_with_a_child_per_step(traced: tuple[Any, Receiver, str, str]) -> None:
    server, receiver, _, _ = traced
    out = server.model("pipe").predict({"IN": np.ones(4, np.float32)}, request_id="ens")
    assert out["OUT"].tolist() == [4.0] * 4
    spans = _by_name(receiver.trace("ens", 6))
    assert len(spans["InferRequest"]) == 1
    pipe = spans["pipe"][0]
    assert pipe.parent_span_id == spans["InferRequest"][0].span_id
    steps = spans["double"]
    assert len(steps) == 2 and all(s.parent_span_id == pipe.span_id for s in steps)
    assert {_attrs(s)["triton.trace_parent_id"] for s in steps} == {_attrs(pipe)["triton.trace_id"]}
    computes = spans["compute"]
    # An ensemble computes nothing: a compute span per step only.
    assert sorted(c.parent_span_id for c in computes) == sorted(s.span_id for s in steps)
    # Its steps' responses go to the ensemble, not to a front end: no INFER_RESPONSE_COMPLETE.
    assert _events(spans["InferRequest"][0]) == ["INFER_RESPONSE_COMPLETE"]
    assert all("INFER_RESPONSE_COMPLETE" not in _events(span) for span in steps + [pipe])


def test_bls_requests_are_children_of_the_calling_request(traced: tuple[Any, Receiver, str, str]) -> None:
    server, receiver, _, _ = traced
    out = server.model("caller").predict({"IN": np.ones(4, np.float32)}, request_id="bls")
    assert out["OUT"].tolist() == [2.0] * 4
    spans = _by_name(receiver.trace("bls", 5))
    caller = spans["caller"][0]
    assert caller.parent_span_id == spans["InferRequest"][0].span_id
    assert spans["double"][0].parent_span_id == caller.span_id
    assert len(spans["compute"]) == 2


def test_an_unreachable_collector_never_holds_an_inference(tmp_path: Path) -> None:
    dead = free_port()  # nothing listens there
    server = tritonpy.Server(
        model_repository=[_repo(tmp_path)],
        trace_config=[
            "mode=opentelemetry",
            "level=TIMESTAMPS",
            "rate=1",
            f"opentelemetry,url=http://127.0.0.1:{dead}/v1/traces",
            "opentelemetry,bsp_schedule_delay=1",
            "opentelemetry,bsp_max_queue_size=4",
            "opentelemetry,bsp_max_export_batch_size=2",
        ],
    )
    server.start()
    model = server.model("double")
    answers: list[list[float]] = []

    def infer_all() -> None:
        for _ in range(51):  # more spans than the queue holds: dropped, never waited for
            answers.append(model.predict({"IN": np.ones(4, np.float32)})["OUT"].tolist())

    # A hang (an inference waiting on the dead collector), not a duration, fails these.
    inferring = threading.Thread(target=infer_all, daemon=True)
    inferring.start()
    inferring.join(HANG)
    assert not inferring.is_alive() and answers == [[2.0] * 4] * 51
    stopping = threading.Thread(target=server.stop, daemon=True)  # export at shutdown is bounded
    stopping.start()
    stopping.join(HANG)
    assert not stopping.is_alive()


def test_settings_are_refused_with_their_reason() -> None:
    for flags, message in (
        (["mode=zipkin"], "not supported"),
        (["opentelemetry,colour=blue"], "unknown opentelemetry setting 'colour'"),
        (["opentelemetry,resource=novalue"], "resource=<key>=<value>"),
        (
            ["opentelemetry,bsp_max_queue_size=2", "opentelemetry,bsp_max_export_batch_size=3"],
            "must not exceed",
        ),
    ):
        with pytest.raises(TritonError, match=message):
            tritonpy.Server(model_repository=[], trace_config=["mode=opentelemetry", *flags])


def test_trace_extension_per_model_in_opentelemetry_mode() -> None:
    from tritonpy.trace import Tracer, parse_flags

    tracer = Tracer(*parse_flags(["mode=opentelemetry", "opentelemetry,url=http://127.0.0.1:9/v1/traces"]))
    try:
        # No trace file is needed in this mode; the mode itself is set at start only.
        assert tracer.update({"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}, model="m")["trace_mode"] == (
            "opentelemetry"
        )
        assert tracer.sample("other", "x") is None  # still OFF globally
        trace = tracer.sample("m", "y")
        assert trace is not None and trace.context().startswith("00-")
        with pytest.raises(TritonError, match="cannot be set while serving"):
            tracer.update({"trace_mode": "triton"})
    finally:
        tracer.flush()


def test_without_the_sdk_the_mode_is_refused_with_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TritonError, match=r"needs the OpenTelemetry SDK .*pip install 'tritonpy\[otel\]'"):
        tritonpy.Server(model_repository=[], trace_config=["mode=opentelemetry"])


def test_a_backends_custom_activities_are_spans_and_events_under_the_model_span(
    traced: tuple[Any, Receiver, str, str],
) -> None:
    """``InferenceRequest.report_activity`` as Triton's tracer nests custom activities:
    ``X_START``/``X_END`` a span X (inside the innermost open one, else the model's), other
    names events of the innermost open span, else of the model's; one never closed ends
    with the request."""
    server, receiver, _, _ = traced
    a = np.ones((1, 4), np.int32)
    server.model("acts").predict({"INPUT0": a, "INPUT1": a}, request_id="acts")
    spans = _by_name(receiver.trace("acts", 6))
    model, outer, inner, open_ = spans["acts"][0], spans["OUTER"][0], spans["INNER"][0], spans["OPEN"][0]
    assert outer.parent_span_id == model.span_id and open_.parent_span_id == model.span_id
    assert inner.parent_span_id == outer.span_id
    assert _events(inner) == ["INNER_START", "IN_INNER", "INNER_END"]
    assert _events(outer) == ["OUTER_START", "IN_OUTER", "OUTER_END"]
    assert _events(open_) == ["OPEN_START"] and open_.end_time_unix_nano == model.end_time_unix_nano
    in_time = sorted(model.events, key=lambda e: e.time_unix_nano)
    assert [e.name for e in in_time] == ["REQUEST_START", "QUEUE_START", "ON_MODEL", "REQUEST_END"]
    assert _events(spans["compute"][0]) == [
        "COMPUTE_START",
        "COMPUTE_INPUT_END",
        "COMPUTE_OUTPUT_START",
        "COMPUTE_END",
    ]
