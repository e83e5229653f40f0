"""A backend for front-end tests, and the repository of models it serves."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tritonclient.grpc import service_pb2 as pb
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    BackendInfo,
    DataType,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)


class CpuBackend:
    """The base of a test's own backend: instances on the CPU unless the config says
    otherwise; ``echo`` answers Y = factor * X."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_instance_kind="KIND_CPU")

    @staticmethod
    def echo(requests: Sequence[InferenceRequest], factor: int = 1) -> list[InferenceResponse]:
        return [
            InferenceResponse({"Y": Tensor.from_numpy("Y", r.inputs["X"].data * factor)}) for r in requests
        ]


class EventLog:
    """Request ids the backend saw something happen to, for tests to wait on."""

    def __init__(self) -> None:
        self._seen: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def event(self, request_id: str) -> threading.Event:
        with self._lock:
            return self._seen.setdefault(request_id, threading.Event())

    def saw(self, request_id: str, timeout: float = 10.0) -> bool:
        """Wait (up to ``timeout``) until the backend saw it happen to ``request_id``."""
        return self.event(request_id).wait(timeout)


#: ``wait_cancel`` requests that sent their responses and now wait for their cancellation.
WAITING = EventLog()
#: ``wait_cancel`` requests whose cancellation the backend saw.
CANCELLED = EventLog()


class TestBackend:
    """addsub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (BOOL: or, xor; BYTES: echo);
    echoes the request parameter 'echo' into the response parameters; raises for the
    model parameter 'fail'.

    Answering through response senders (see ``write_sender_models``), set by model parameters:
    'sender' = N answers each request from a background thread with N responses (request
    parameter 'responses' overrides N; each response has the parameter 'index'), then FINAL;
    'empty_final' = "yes" sends that FINAL alone, without a response; 'raise_after' = K sends
    K responses from ``execute`` itself, then raises. A request with the parameter 'bare' =
    true gets its responses without 'index'. A request with the parameter
    'wait_cancel' = true waits, after its responses, until it is cancelled (recorded in
    ``WAITING``, then ``CANCELLED``, under its id), then sends FINAL. The model parameter
    'activities' = "A_START,X,A_END" reports those custom trace activities for each request.
    """

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse] | None:
        params = instance.model.parameters
        if params.get("fail"):
            raise TritonError.internal(params["fail"])
        for name in params.get("activities", "").split(",") if params.get("activities") else ():
            for r in requests:
                r.report_activity(name)
        if "raise_after" in params:
            for r in requests:
                for i in range(int(params["raise_after"])):
                    assert r.response_sender is not None
                    r.response_sender.send(_with_index(_addsub(r), i))
            raise TritonError.internal("raised after sending")
        if "sender" in params:
            for r in requests:
                threading.Thread(target=_answer, args=(r, params), daemon=True).start()
            return None
        return [_addsub(r) for r in requests]


def _with_index(response: InferenceResponse, index: int) -> InferenceResponse:
    response.parameters["index"] = index
    return response


def _answer(r: InferenceRequest, params: dict[str, str]) -> None:
    """Answer ``r`` through its sender (from a thread of its own), as the model parameters say."""
    sender = r.response_sender
    assert sender is not None
    count = r.parameters.get("responses", int(params["sender"]))
    assert isinstance(count, int)
    separate_final = params.get("empty_final") == "yes" or bool(r.parameters.get("wait_cancel"))
    for i in range(count):
        last = i == count - 1 and not separate_final
        response = _addsub(r) if r.parameters.get("bare") else _with_index(_addsub(r), i)
        sender.send(response, RESPONSE_COMPLETE_FINAL if last else 0)
    if r.parameters.get("wait_cancel"):
        cancelled = threading.Event()
        r.on_cancel(cancelled.set)
        WAITING.event(r.id).set()
        if cancelled.wait(30) and r.is_cancelled():
            CANCELLED.event(r.id).set()
    if separate_final or count == 0:
        sender.send(None, RESPONSE_COMPLETE_FINAL)


def _addsub(r: InferenceRequest) -> InferenceResponse:
    a = r.inputs["INPUT0"]
    if a.datatype is DataType.BYTES:
        outputs = {
            "OUTPUT0": Tensor("OUTPUT0", a.data, a.datatype),
            "OUTPUT1": Tensor("OUTPUT1", a.data, a.datatype),
        }
    else:
        b = r.inputs.get("INPUT1", a).data
        if a.datatype is DataType.BOOL:  # numpy has no bool subtraction
            total, diff = a.data | b, a.data ^ b
        else:
            total, diff = a.data + b, a.data - b
        outputs = {
            "OUTPUT0": Tensor("OUTPUT0", total.astype(a.data.dtype), a.datatype),
            "OUTPUT1": Tensor("OUTPUT1", diff.astype(a.data.dtype), a.datatype),
        }
    params = {"echo": r.parameters["echo"]} if "echo" in r.parameters else {}
    return InferenceResponse(outputs, parameters=params)


def write_model(
    repo: Path, name: str, dtype: str = "TYPE_INT32", dims: str = "4", extra: str = "", inputs: int = 2
) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.txt").write_text("")
    ins = ", ".join(f'{{ name: "INPUT{i}" data_type: {dtype} dims: [ {dims} ] }}' for i in range(inputs))
    outs = ", ".join(f'{{ name: "OUTPUT{i}" data_type: {dtype} dims: [ {dims} ] }}' for i in range(2))
    (repo / name / "config.pbtxt").write_text(
        f'backend: "testbk"\nmax_batch_size: 8\ninput [ {ins} ]\noutput [ {outs} ]\n{extra}'
    )


DTYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "STRING",
)


def write_repos(root: Path) -> list[Path]:
    """Two repository roots of testbk models (addsub per dtype, one_input, failing, classes)."""
    repo = root / "repo"
    repo.mkdir()
    write_model(repo, "addsub")
    for dt in DTYPES:
        write_model(repo, f"addsub_{dt.lower()}", dtype=f"TYPE_{dt}")
    write_model(repo, "one_input", dtype="TYPE_FP32", dims="-1", inputs=1)
    write_model(
        repo, "failing", extra='parameters { key: "fail" value: { string_value: "backend blew up" } }'
    )
    second = root / "second_repo"  # a second --model-repository root
    second.mkdir()
    write_model(second, "classes", dtype="TYPE_FP32")
    (second / "classes" / "labels.txt").write_text("a\nb\nc\nd\n")
    cfg = second / "classes" / "config.pbtxt"
    cfg.write_text(
        cfg.read_text().replace(
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }',
        )
    )
    return [repo, second]


def write_sender_models(repo: Path) -> None:
    """Models that answer through response senders (see ``TestBackend``), INT32 addsub dims [4].

    decoupled (3 responses per request, the last carrying FINAL), decoupled_empty_final
    (2 responses, then FINAL alone), sender_one (not decoupled: 1 response via the sender),
    sender_final_only (not decoupled: FINAL without a response), raise_after (decoupled:
    1 response from ``execute``, then it raises).
    """

    def params(**kv: str) -> str:
        return "".join(
            f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n' for k, v in kv.items()
        )

    decoupled = "model_transaction_policy { decoupled: true }\n"
    write_model(repo, "decoupled", extra=decoupled + params(sender="3"))
    write_model(repo, "decoupled_empty_final", extra=decoupled + params(sender="2", empty_final="yes"))
    write_model(repo, "sender_one", extra=params(sender="1"))
    write_model(repo, "sender_final_only", extra=params(sender="0"))
    write_model(repo, "raise_after", extra=decoupled + params(raise_after="1"))


def infer_request(model: str, request_id: str = "", **params: bool | str | int) -> pb.ModelInferRequest:
    """A gRPC ModelInferRequest for an INT32 addsub model ([1, 4] inputs 1 2 3 4 and 1 1 1 1),
    with request parameters ``params``."""
    msg = pb.ModelInferRequest(model_name=model, id=request_id)
    for key, value in params.items():
        if isinstance(value, bool):
            msg.parameters[key].bool_param = value
        elif isinstance(value, int):
            msg.parameters[key].int64_param = value
        else:
            msg.parameters[key].string_param = value
    for i, value in enumerate(([1, 2, 3, 4], [1, 1, 1, 1])):
        msg.inputs.add(name=f"INPUT{i}", datatype="INT32", shape=[1, 4])
        msg.raw_input_contents.append(np.array(value, np.int32).tobytes())
    return msg
