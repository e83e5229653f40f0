"""ModelStreamInfer on the native transport through both of its ways to run: the
servicer's callback path (``Method.stream_start``, no task, no queue) and the general
one (a task running the coroutine handler). Each case must put the same frames on the
wire either way, and a call cut short must cancel its requests in the backend."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonpy_h2 import DATA, END_STREAM, HEADERS, RST_STREAM, SETTINGS, RawH2, frame, grpc_request
from tritonpy_testbackend import CANCELLED, WAITING, infer_request, write_model, write_sender_models
from tritonpy_testservers import GrpcServer, start_grpc

PATH = "/inference.GRPCInferenceService/ModelStreamInfer"
WINDOW_UPDATE = 0x8
_ids = itertools.count(1)
Frames = list[tuple[int, int, bytes]]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("stream_repo")
    write_model(repo, "addsub")
    write_model(repo, "big", dims="-1")
    write_model(repo, "failing", extra='parameters { key: "fail" value: { string_value: "it blew up" } }')
    write_sender_models(repo)
    return repo


@pytest.fixture(scope="module")
def native(repo: Path) -> Iterator[GrpcServer]:
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy")
    yield frontend
    frontend.stop()
    server.stop()


def _use(native: GrpcServer, fast: bool) -> None:
    """Serve ModelStreamInfer through the callback path (``fast``) or the task."""
    key = PATH.encode()
    method = native.aio.methods[key]
    start = native.aio.methods[key].stream_start or _FAST[id(native)]
    _FAST[id(native)] = start
    native.aio.methods[key] = dataclasses.replace(method, stream_start=start if fast else None)


_FAST: dict[int, object] = {}


@pytest.fixture(params=["callback", "task"])
def path(request: pytest.FixtureRequest, native: GrpcServer) -> Iterator[str]:
    assert native.aio.methods[PATH.encode()].stream_start is not None  # it has a callback path
    _use(native, request.param == "callback")
    yield request.param
    _use(native, True)


def _open(
    client: RawH2, bodies: list[bytes], extra: list[tuple[str, str]] | None = None, end: bool = True
) -> int:
    """A new stream with ``bodies`` as its messages (one DATA frame each); ``end``: then END_STREAM."""
    stream_id = 2 * next(_ids) + 1
    frames = [client.headers(stream_id, grpc_request(PATH, extra), end_stream=end and not bodies)]
    frames += [client.message(stream_id, body, end and i == len(bodies) - 1) for i, body in enumerate(bodies)]
    client.send(*frames)
    return stream_id


def _messages(frames: Frames) -> list[pb.ModelStreamInferResponse]:
    body = b"".join(p for k, _, p in frames if k == DATA)
    out = []
    while body:
        size = int.from_bytes(body[1:5], "big")
        out.append(pb.ModelStreamInferResponse.FromString(body[5 : 5 + size]))
        body = body[5 + size :]
    return out


def _cases() -> list[tuple[str, list[bytes], list[tuple[str, str]]]]:
    def ser(*msgs: pb.ModelInferRequest) -> list[bytes]:
        return [m.SerializeToString() for m in msgs]

    typed = pb.ModelInferRequest(model_name="addsub", id="typed")
    for i in range(2):
        typed.inputs.add(name=f"INPUT{i}", datatype="INT32", shape=[1, 4]).contents.int_contents.extend(
            [i, 2, 3, 4]
        )
    bad_type = infer_request("addsub", "bad")
    bad_type.inputs[0].datatype = "NOPE"
    bad_type.model_version = "1"
    versioned = infer_request("addsub", "v")
    versioned.model_version = "1"
    grpc_error = [("triton_grpc_error", "true")]
    trace = [("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")]
    empty = {"triton_enable_empty_final_response": True}
    several = [infer_request("addsub", f"s{i}") for i in range(4)]  # the same layout: planned from the 2nd
    return [
        ("several", ser(*several), []),
        ("several, traced", ser(*several), trace),
        ("no message", [], []),
        ("typed contents and a version", ser(typed, versioned), []),
        ("response parameters", ser(infer_request("addsub", "e", echo="x")), []),
        (
            "decode error between",
            ser(infer_request("addsub", "a"), bad_type, infer_request("addsub", "b")),
            [],
        ),
        ("unknown model", ser(infer_request("nope", "n")), []),
        ("bad version", ser(pb.ModelInferRequest(model_name="addsub", model_version="x", id="x")), []),
        ("backend raises", ser(infer_request("failing", "f")), []),
        ("decoupled", ser(infer_request("decoupled", "d")), []),
        ("decoupled, empty final", ser(infer_request("decoupled", "d", **empty)), []),
        ("decoupled, bare responses", ser(infer_request("decoupled", "db", bare=True)), []),
        ("separate final", ser(infer_request("decoupled_empty_final", "df")), []),
        ("separate final, empty final", ser(infer_request("decoupled_empty_final", "df", **empty)), []),
        (
            "final only",
            ser(infer_request("sender_final_only", "fo"), infer_request("sender_final_only", "fo2", **empty)),
            [],
        ),
        ("sender one", ser(infer_request("sender_one", "so", **empty)), []),
        ("raise after", ser(infer_request("raise_after", "r")), []),
        ("reserved parameter", ser(infer_request("addsub", "rp", triton_x=True)), []),
        ("grpc error", ser(bad_type, infer_request("addsub", "after")), grpc_error),
        ("grpc error, backend", ser(infer_request("failing", "f")), grpc_error),
        ("grpc error, ok", ser(infer_request("addsub", "ok")), grpc_error),
        ("not a message", [b"\xff\xff\xff", infer_request("addsub").SerializeToString()], []),
        ("decoupled then not a message", [infer_request("addsub").SerializeToString(), b"\xff\xff\xff"], []),
    ]


def test_same_frames_either_way(native: GrpcServer) -> None:
    """Every case's HEADERS, DATA and trailers are byte for byte the same on both paths."""
    got: dict[str, list[Frames]] = {}
    try:
        for fast in (True, False, True):
            _use(native, fast)
            client = RawH2(native.port)
            try:
                for name, bodies, extra in _cases():
                    got.setdefault(name, []).append(client.until_ended(_open(client, bodies, extra)))
            finally:
                client.close()
    finally:
        _use(native, True)
    for name, (first, general, again) in got.items():
        if name == "decoupled then not a message":
            # the deserializing error may end the stream before or after the answer
            first, general, again = (f[-1:] for f in (first, general, again))
        assert first == general == again, name
        assert first[-1][0] == HEADERS and first[-1][1] & END_STREAM, name
    several = _messages(got["several"][0])
    assert [m.infer_response.id for m in several] == ["s0", "s1", "s2", "s3"]
    assert all(m.infer_response.parameters["triton_final_response"].bool_param for m in several)
    assert np.frombuffer(several[0].infer_response.raw_output_contents[0], np.int32).tolist() == [2, 3, 4, 5]
    assert b"grpc-status\x010" in got["several"][0][-1][2]
    assert [k for k, _, _ in got["no message"][0]] == [HEADERS]  # Trailers-Only OK
    decoupled = _messages(got["decoupled"][0])
    assert [m.infer_response.parameters["triton_final_response"].bool_param for m in decoupled] == [
        False,
        False,
        True,
    ]
    bare = _messages(got["decoupled, bare responses"][0])  # encoded by ResponseEncoder
    assert [m.infer_response.parameters["triton_final_response"].bool_param for m in bare] == [
        False,
        False,
        True,
    ]
    assert len(_messages(got["separate final"][0])) == 2
    empty_final = _messages(got["separate final, empty final"][0])
    assert len(empty_final) == 3 and not empty_final[-1].infer_response.outputs
    assert empty_final[-1].infer_response.parameters["triton_final_response"].bool_param
    assert [m.infer_response.id for m in _messages(got["final only"][0])] == ["fo", "fo2"]
    between = _messages(got["decode error between"][0])
    # the decoding error is answered at once, before the model's answer to "a"
    assert [(m.infer_response.id, bool(m.error_message)) for m in between] == [
        ("bad", True),
        ("a", False),
        ("b", False),
    ]
    assert between[0].infer_response.model_version == "1"
    assert _messages(got["response parameters"][0])[0].infer_response.parameters["echo"].string_param == "x"
    assert b"grpc-status\x013" in got["grpc error"][0][0][2]  # INVALID_ARGUMENT, Trailers-Only
    assert b"grpc-status\x0213" in got["not a message"][0][0][2]
    assert b"Exception deserializing request!" in got["not a message"][0][0][2]


def test_out_of_order_then_reset_cancels(native: GrpcServer, path: str) -> None:
    """A later request's response comes before an earlier one still in flight; RST_STREAM
    cancels that one in the backend, and the connection goes on serving."""
    request_id = f"ooo-{path}"
    client = RawH2(native.port)
    try:
        first = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        stream_id = _open(client, [first, infer_request("addsub", "later").SerializeToString()], end=False)
        assert WAITING.saw(request_id)
        client.wait_for(DATA, stream_id)
        assert [m.infer_response.id for m in _messages(_sent(client, stream_id))] == ["later"]
        client.send(frame(RST_STREAM, 0, stream_id, (8).to_bytes(4, "big")))  # CANCEL
        assert CANCELLED.saw(request_id)
        assert _messages(
            client.until_ended(_open(client, [infer_request("addsub", "next").SerializeToString()]))
        )
        assert not client.ended(stream_id)
    finally:
        client.close()


def _sent(client: RawH2, stream_id: int) -> Frames:
    return [(k, f, p) for k, f, s, p in client.frames if s == stream_id]


def test_deadline_cancels_the_requests(native: GrpcServer, path: str) -> None:
    request_id = f"deadline-{path}"
    client = RawH2(native.port)
    try:
        body = infer_request("decoupled", request_id, wait_cancel=True).SerializeToString()
        frames = client.until_ended(_open(client, [body], [("grpc-timeout", "300m")], end=False))
        heads = [p for k, _, p in frames if k == HEADERS]
        assert len(heads) == 2 and len(_messages(frames)) == 3
        assert b"grpc-status\x014" in heads[-1] and b"Deadline Exceeded" in heads[-1]
        assert CANCELLED.saw(request_id)
    finally:
        client.close()


def test_connection_loss_cancels_the_requests(native: GrpcServer, path: str) -> None:
    ids = [f"lost-{path}-{i}" for i in range(2)]
    client = RawH2(native.port)
    try:
        bodies = [infer_request("sender_final_only", i, wait_cancel=True).SerializeToString() for i in ids]
        _open(client, bodies, end=False)
        assert all(WAITING.saw(i) for i in ids)
    finally:
        client.close()
    assert all(CANCELLED.saw(i) for i in ids)


def test_inflight_bound(native: GrpcServer, path: str) -> None:
    """With ``grpc_stream_max_inflight`` 1, a second request is not taken while the first
    is in flight: it stays parked, and the stream's window is not reopened for it."""
    options = native.server.options
    request_id = f"bound-{path}"
    client = RawH2(native.port)
    options.grpc_stream_max_inflight = 1
    try:
        first = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        stream_id = _open(client, [first], end=False)
        assert WAITING.saw(request_id)
        updates = len([f for f in client.frames if f[0] == WINDOW_UPDATE and f[2] == stream_id])
        client.send(client.message(stream_id, infer_request("addsub", "second").SerializeToString(), False))
        time.sleep(0.5)
        client.poll()
        assert not [f for f in client.frames if f[2] == stream_id and f[0] in (DATA, HEADERS)]
        assert len([f for f in client.frames if f[0] == WINDOW_UPDATE and f[2] == stream_id]) == updates
        client.send(frame(RST_STREAM, 0, stream_id, (8).to_bytes(4, "big")))
        assert CANCELLED.saw(request_id)
    finally:
        options.grpc_stream_max_inflight = 128
        client.close()


def _inferences(native: GrpcServer, model: str) -> int:
    (entry,) = native.server.model_statistics(model)
    return int(entry["inference_stats"]["success"]["count"])


def test_slow_client(native: GrpcServer, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that grants no window: once the stream holds more than HIGH_WATER bytes
    the callback path takes no new request (the task's reader runs on until its response
    queue is full); every response comes once the client opens its window."""
    from tritonpy.grpc import http2

    monkeypatch.setattr(http2, "HIGH_WATER", 1)  # one queued response is over it
    options = native.server.options
    client = RawH2(native.port)
    client.send(frame(SETTINGS, 0, 0, (4).to_bytes(2, "big") + (0).to_bytes(4, "big")))  # window 0
    client.wait_for(SETTINGS)
    options.grpc_stream_max_inflight = 1
    try:
        before = _inferences(native, "big")
        bodies = [infer_request("big", f"slow{i}").SerializeToString() for i in range(6)]
        stream_id = _open(client, bodies, end=True)
        time.sleep(1.0)
        taken = _inferences(native, "big") - before
        assert taken == 1 if path == "callback" else 1 <= taken < 6
        grant = (1 << 30).to_bytes(4, "big")
        client.send(frame(WINDOW_UPDATE, 0, 0, grant), frame(WINDOW_UPDATE, 0, stream_id, grant))
        frames = client.until_ended(stream_id)
        assert [m.infer_response.id for m in _messages(frames)] == [f"slow{i}" for i in range(6)]
        assert b"grpc-status\x010" in frames[-1][2]
        assert _inferences(native, "big") - before == 6
    finally:
        options.grpc_stream_max_inflight = 128
        client.close()


@pytest.mark.parametrize("fast", [True, False], ids=["callback", "task"])
def test_drain_then_close_cancels_a_stream_in_flight(repo: Path, fast: bool) -> None:
    """stop(grace): GOAWAY at once; a stream still running when the grace ends is cancelled
    with its connection (its requests too), and the server stops."""
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy")
    _use(frontend, fast)
    request_id = f"drain-stream-{fast}"
    client = RawH2(frontend.port)
    try:
        body = infer_request("sender_final_only", request_id, wait_cancel=True).SerializeToString()
        stream_id = _open(client, [body], end=False)
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
    from types import SimpleNamespace

    from tritonpy.grpc.servicer import InferenceServicer
    from tritonpy.options import ServerOptions

    class Callbacks:
        options = ServerOptions()

        def submit(self, *args: object) -> None:
            raise AssertionError("not called here")

    assert list(InferenceServicer(Callbacks()).stream_starts()) == ["ModelStreamInfer"]  # type: ignore[arg-type]
    assert InferenceServicer(SimpleNamespace(options=ServerOptions())).stream_starts() == {}  # type: ignore[arg-type]


def test_the_encoder_writes_what_protobuf_writes() -> None:
    """``ResponseEncoder.encode_stream``'s bytes are those of ``response_to_proto`` with the
    final flag, wrapped, for every data type, empty outputs, and either flag; a response
    with parameters is left to ``response_to_proto``."""
    from tritonpy.grpc import grpc_service_pb2 as core_pb
    from tritonpy.grpc.tensors import ResponseEncoder, response_to_proto
    from tritonpy_sdk import DataType, InferenceResponse, Tensor

    encoder = ResponseEncoder()
    responses = []
    for datatype in DataType:
        if datatype is DataType.BYTES:
            data = np.array([b"a", b"", b"xyz" * 50], dtype=np.object_).reshape(1, 3)
        elif datatype is DataType.BF16:
            continue  # no numpy dtype to make one from here
        else:
            data = np.arange(6).astype(datatype.numpy_dtype).reshape(2, 3)
        responses.append(
            InferenceResponse({"OUT": Tensor("OUT", data, datatype)}, model_name="m", model_version=3, id="r")
        )
    empty = np.zeros((0, 4), np.float32)
    responses.append(
        InferenceResponse({"E": Tensor("E", empty, DataType.FP32)}, model_name="m", model_version=1)
    )
    responses.append(InferenceResponse({}, model_name="m" * 200, model_version=12, id="i" * 300))
    two = {n: Tensor(n, np.ones((1, 2), np.int64), DataType.INT64) for n in ("A", "B")}
    responses.append(InferenceResponse(two, model_name="m", model_version=1))
    for response in responses:
        for final in (True, False):
            out = response_to_proto(response)
            out.parameters["triton_final_response"].bool_param = final
            expected = core_pb.ModelStreamInferResponse(infer_response=out).SerializeToString()
            body = encoder.encode_stream(response, final)
            assert body == expected
            assert core_pb.ModelStreamInferResponse.FromString(
                body
            ) == core_pb.ModelStreamInferResponse.FromString(expected)
    with_parameters = InferenceResponse(two, model_name="m", model_version=1, parameters={"p": 1})
    assert encoder.encode_stream(with_parameters, True) is None


def _both_ways(native: GrpcServer, send: Callable[[RawH2], int]) -> list[Frames]:
    """The frames of the stream ``send`` opens, through the callback path, then the task."""
    got = []
    try:
        for fast in (True, False):
            _use(native, fast)
            client = RawH2(native.port)
            try:
                got.append(client.until_ended(send(client)))
            finally:
                client.close()
    finally:
        _use(native, True)
    return got


def test_compressed_messages(native: GrpcServer) -> None:
    """gzip request messages (grpc-encoding) are inflated before either path takes them."""

    def send(client: RawH2) -> int:
        stream_id = 2 * next(_ids) + 1
        frames = [client.headers(stream_id, grpc_request(PATH, [("grpc-encoding", "gzip")]))]
        for i in range(2):
            body = gzip.compress(infer_request("addsub", f"z{i}").SerializeToString())
            frames.append(
                frame(DATA, END_STREAM if i else 0, stream_id, b"\x01" + len(body).to_bytes(4, "big") + body)
            )
        client.send(*frames)
        return stream_id

    fast, general = _both_ways(native, send)
    assert fast == general
    assert [m.infer_response.id for m in _messages(fast)] == ["z0", "z1"]


def test_response_over_the_message_limit(native: GrpcServer) -> None:
    """A response larger than --grpc-max-message-size ends the stream RESOURCE_EXHAUSTED."""
    options = native.server.options
    body = infer_request("addsub", "big-answer").SerializeToString()
    limit = options.grpc_max_message_size
    options.grpc_max_message_size = len(body) + 4  # the request fits, its response does not
    try:
        fast, general = _both_ways(native, lambda client: _open(client, [body]))
    finally:
        options.grpc_max_message_size = limit
    assert fast == general
    assert b"grpc-status\x018" in fast[-1][2] and b"Sent message larger than max" in fast[-1][2]


def test_a_bug_answering_does_not_hang_the_stream(
    native: GrpcServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception while answering a request becomes an in-stream error (the
    server log has the details), and the stream goes on to its end."""
    from tritonpy.grpc import servicer, tensors

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(servicer, "response_to_proto", broken)
    monkeypatch.setattr(tensors.ResponseEncoder, "encode_stream", lambda self, response, final: None)
    bodies = [infer_request("addsub", f"bug{i}").SerializeToString() for i in range(2)]
    fast, general = _both_ways(native, lambda client: _open(client, bodies))
    messages = [_messages(frames) for frames in (fast, general)]
    # a decoupled request ends at its first response's error: one error, no more responses
    decoupled = [infer_request("decoupled", "bug-d", bare=True).SerializeToString()]
    one_each = [_messages(frames) for frames in _both_ways(native, lambda client: _open(client, decoupled))]
    assert [len(got) for got in one_each] == [1, 1] and one_each[0][0].error_message
    assert [[m.error_message[:40] for m in got] for got in messages] == [
        ["internal error (RuntimeError); the serve"] * 2
    ] * 2
    assert b"grpc-status\x010" in fast[-1][2] and b"grpc-status\x010" in general[-1][2]
