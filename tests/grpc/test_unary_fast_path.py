"""Unary ModelInfer on the native transport, its deadline, RST_STREAM, connection loss
and GOAWAY, through both of the transport's ways to run it: the servicer's
callback path (``Method.start``, no task per call) and the general one (a task
running the coroutine handler). Each case must put the same frames on the wire
either way, and a call cut short must cancel its request in the backend."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonpy_h2 import CONTINUATION, DATA, END_STREAM, HEADERS, RST_STREAM, RawH2, frame, grpc_request
from tritonpy_testbackend import CANCELLED, WAITING, infer_request, write_model, write_sender_models
from tritonpy_testservers import GrpcServer, start_grpc

PATH = "/inference.GRPCInferenceService/ModelInfer"
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("unary_repo")
    write_model(repo, "addsub")
    write_model(repo, "failing", extra='parameters { key: "fail" value: { string_value: "it blew up" } }')
    write_sender_models(repo)
    return repo


@pytest.fixture(scope="module")
def native(repo: Path) -> Iterator[GrpcServer]:
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy")
    yield frontend
    frontend.stop()
    server.stop()


@pytest.fixture(params=["callback", "task"])
def path(request: pytest.FixtureRequest, native: GrpcServer) -> Iterator[str]:
    key = PATH.encode()
    original = native.aio.methods[key]
    assert original.start is not None  # ModelInfer has a callback path
    if request.param == "task":
        native.aio.methods[key] = dataclasses.replace(original, start=None)
    yield request.param
    native.aio.methods[key] = original


def _call(
    client: RawH2, body: bytes, extra: list[tuple[str, str]] | None = None
) -> list[tuple[int, int, bytes]]:
    stream_id = 2 * next(_ids) + 1
    client.send(client.headers(stream_id, grpc_request(PATH, extra)), client.message(stream_id, body))
    return client.until_ended(stream_id)


def _cases() -> list[tuple[str, bytes, list[tuple[str, str]]]]:
    ok = infer_request("addsub", "ok-1", echo="x")
    typed = pb.ModelInferRequest(model_name="addsub")
    for i in range(2):
        typed.inputs.add(name=f"INPUT{i}", datatype="INT32", shape=[1, 4]).contents.int_contents.extend(
            [i, 2, 3, 4]
        )
    bad_type = infer_request("addsub")
    bad_type.inputs[0].datatype = "NOPE"
    short = infer_request("addsub")
    del short.raw_input_contents[1]
    versioned = infer_request("addsub")
    versioned.model_version = "1"
    region = infer_request("addsub")
    region.outputs.add(name="OUTPUT0").parameters["shared_memory_region"].string_param = "nowhere"
    region.outputs[0].parameters["shared_memory_byte_size"].int64_param = 16
    return [
        ("ok", ok.SerializeToString(), []),
        (
            "ok with metadata",
            ok.SerializeToString(),
            [("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")],
        ),
        ("typed contents", typed.SerializeToString(), []),
        ("model version", versioned.SerializeToString(), []),
        ("unknown model", infer_request("nope").SerializeToString(), []),
        (
            "unknown version",
            pb.ModelInferRequest(model_name="addsub", model_version="7").SerializeToString(),
            [],
        ),
        ("bad version", pb.ModelInferRequest(model_name="addsub", model_version="x").SerializeToString(), []),
        ("decoupled", infer_request("decoupled").SerializeToString(), []),
        ("final only", infer_request("sender_final_only").SerializeToString(), []),
        ("backend raises", infer_request("failing").SerializeToString(), []),
        ("bad datatype", bad_type.SerializeToString(), []),
        ("raw count", short.SerializeToString(), []),
        ("no such region", region.SerializeToString(), []),
        ("empty message", b"", []),
        ("not a message", b"\xff\xff\xff", []),
    ]


def test_same_frames_either_way(native: GrpcServer) -> None:
    """Every case's HEADERS, DATA and trailers are byte for byte the same on both paths."""
    key = PATH.encode()
    original = native.aio.methods[key]
    assert original.start is not None
    got: dict[str, list[list[tuple[int, int, bytes]]]] = {}
    try:
        for fast in (True, False, True):
            native.aio.methods[key] = original if fast else dataclasses.replace(original, start=None)
            client = RawH2(native.port)
            try:
                for name, body, extra in _cases():
                    got.setdefault(name, []).append(_call(client, body, extra))
            finally:
                client.close()
    finally:
        native.aio.methods[key] = original
    for name, (first, general, again) in got.items():
        assert first == general == again, name
        assert first[-1][0] == HEADERS and first[-1][1] & END_STREAM, name
    ok = got["ok"][0]
    assert [k for k, _, _ in ok] == [HEADERS, DATA, HEADERS]
    assert b"grpc-status\x010" in ok[-1][2]
    response = pb.ModelInferResponse.FromString(ok[1][2][5:])
    assert response.id == "ok-1" and response.parameters["echo"].string_param == "x"
    assert np.frombuffer(response.raw_output_contents[0], np.int32).tolist() == [2, 3, 4, 5]
    assert b"grpc-status\x0213" in got["not a message"][0][0][2]  # INTERNAL, deserializing
    assert b"Exception deserializing request!" in got["not a message"][0][0][2]


def test_deadline_cancels_the_request(native: GrpcServer, path: str) -> None:
    """grpc-timeout passes while the model works: DEADLINE_EXCEEDED, the request cancelled."""
    request_id = f"deadline-{path}"
    client = RawH2(native.port)
    try:
        body = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        frames = _call(client, body, [("grpc-timeout", "300m")])
        assert len(frames) == 1 and frames[0][0] == HEADERS and frames[0][1] & END_STREAM
        assert b"grpc-status\x014" in frames[0][2] and b"Deadline Exceeded" in frames[0][2]
        assert CANCELLED.saw(request_id)
        assert _call(client, infer_request("addsub").SerializeToString())[-1][1] & END_STREAM
    finally:
        client.close()


def test_rst_stream_cancels_the_request(native: GrpcServer, path: str) -> None:
    """The client resets the stream while the model works: nothing more is sent on it,
    the request is cancelled, and the connection goes on serving."""
    request_id = f"reset-{path}"
    client = RawH2(native.port)
    try:
        stream_id = 2 * next(_ids) + 1
        body = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        client.send(client.headers(stream_id, grpc_request(PATH)), client.message(stream_id, body))
        assert WAITING.saw(request_id)
        client.send(frame(RST_STREAM, 0, stream_id, (8).to_bytes(4, "big")))  # CANCEL
        assert CANCELLED.saw(request_id)
        assert _call(client, infer_request("addsub").SerializeToString())[-1][1] & END_STREAM
        assert not [
            k for k, _, s, _ in client.frames if s == stream_id and k in (HEADERS, DATA, CONTINUATION)
        ]
        assert not client.resets(stream_id)
    finally:
        client.close()


def test_connection_loss_cancels_the_request(native: GrpcServer, path: str) -> None:
    request_id = f"lost-{path}"
    client = RawH2(native.port)
    try:
        stream_id = 2 * next(_ids) + 1
        body = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        client.send(client.headers(stream_id, grpc_request(PATH)), client.message(stream_id, body))
        assert WAITING.saw(request_id)
    finally:
        client.close()
    assert CANCELLED.saw(request_id)
    other = RawH2(native.port)
    try:
        assert _call(other, infer_request("addsub").SerializeToString())[-1][1] & END_STREAM
    finally:
        other.close()


@pytest.mark.parametrize("fast", [True, False], ids=["callback", "task"])
def test_drain_then_close_cancels_a_call_in_flight(repo: Path, fast: bool) -> None:
    """stop(grace): GOAWAY at once; a call still running when the grace ends is cancelled
    with its connection (its request too), and the server stops."""
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy")
    key = PATH.encode()
    if not fast:
        frontend.aio.methods[key] = dataclasses.replace(frontend.aio.methods[key], start=None)
    request_id = f"drain-{fast}"
    client = RawH2(frontend.port)
    try:
        stream_id = 2 * next(_ids) + 1
        body = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        client.send(client.headers(stream_id, grpc_request(PATH)), client.message(stream_id, body))
        assert WAITING.saw(request_id)
        stopping = asyncio.run_coroutine_threadsafe(frontend.aio.stop(0.5), frontend.loop)
        assert client.goaway() is not None
        stopping.result(10)
        assert CANCELLED.saw(request_id)
        assert not client.ended(stream_id)
    finally:
        client.close()
        frontend.stop()
        server.stop()


def test_only_a_server_that_takes_callbacks_gets_the_callback_path() -> None:
    """ModelInfer runs without a task only where the server has ``start_infer``; every
    other RPC, and ModelInfer on any other server, keep the general path."""
    from types import SimpleNamespace

    from tritonpy.grpc.servicer import InferenceServicer
    from tritonpy.options import ServerOptions

    class Callbacks:
        options = ServerOptions()

        def start_infer(self, *args: object) -> None:
            raise AssertionError("not called here")

    with_callbacks = InferenceServicer(Callbacks())  # type: ignore[arg-type]
    assert list(with_callbacks.unary_starts()) == ["ModelInfer"]
    without = InferenceServicer(SimpleNamespace(options=ServerOptions()))  # type: ignore[arg-type]
    assert without.unary_starts() == {}


def test_an_answer_read_on_the_loops_thread_is_sent_on_its_next_turn() -> None:
    """A stub's answer is read on the loop's thread; the call is answered a turn later, so
    the model's instance is released (and its next request sent) first."""
    from tritonpy.grpc.servicer import InferenceServicer
    from tritonpy.options import ServerOptions
    from tritonpy_sdk import DataType, InferenceResponse, Tensor

    class Held:  # ``start_infer`` keeps the callback for the test to call
        shared_memory = None
        options = ServerOptions()

        def __init__(self) -> None:
            self.callbacks: list[object] = []

        def start_infer(self, request: object, on_response: object, *args: object, **kwargs: object) -> None:
            self.callbacks.append(on_response)

    class Answers:  # the transport's call (``calls.Answerer``)
        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self.loop = loop
            self.waiting = True
            self.bodies: list[bytes] = []

        def answer_encoded(self, body: bytes) -> None:
            self.bodies.append(body)
            self.waiting = False

        def answer(self, response: object) -> None:
            raise AssertionError("encoded by the servicer's encoder")

        def fail(self, code: object, message: str) -> None:
            raise AssertionError(message)

    class Headers:
        def traceparent(self) -> str:
            return ""

    msg = pb.ModelInferRequest(model_name="addsub")
    msg.inputs.add(name="INPUT0", datatype="INT32", shape=[4])
    msg.raw_input_contents.append(np.arange(4, dtype=np.int32).tobytes())
    out = Tensor("OUTPUT0", np.arange(4, dtype=np.int32), DataType.INT32)
    response = InferenceResponse({"OUTPUT0": out}, model_name="addsub", model_version=1)

    async def main() -> None:
        held, call = Held(), Answers(asyncio.get_running_loop())
        servicer = InferenceServicer(held)  # type: ignore[arg-type]
        servicer.start_model_infer(msg.SerializeToString(), Headers(), call)
        (callback,) = held.callbacks
        callback(response)  # type: ignore[operator]
        assert call.bodies == []
        await asyncio.sleep(0)
        (body,) = call.bodies
        assert pb.ModelInferResponse.FromString(body).raw_output_contents[0] == out.data.tobytes()

    asyncio.run(main())
