"""The native gRPC transport (``--grpc-implementation tritonpy``) with real clients:
tritonclient (sync, aio, streaming, compressed), grpcio stubs, and raw HTTP/2 (the
``h2`` package, or bytes on a socket) for the framing cases. Each bad connection
is closed while the server goes on serving others."""

from __future__ import annotations

import asyncio
import queue
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException
from tritonpy_testbackend import write_model, write_sender_models
from tritonpy_testservers import GrpcServer, start_grpc

A = np.array([[1, 2, 3, 4]], np.int32)
B = np.array([[1, 1, 1, 1]], np.int32)


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcServer]:
    repo = tmp_path_factory.mktemp("native_repo")
    write_model(repo, "addsub")
    write_model(repo, "big", dtype="TYPE_FP32", dims="-1")
    write_sender_models(repo)
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy")
    yield frontend
    frontend.stop()
    server.stop()


def _inputs(a: np.ndarray, b: np.ndarray, dtype: str = "INT32") -> list[grpcclient.InferInput]:
    out = []
    for i, value in enumerate((a, b)):
        tensor = grpcclient.InferInput(f"INPUT{i}", list(value.shape), dtype)
        tensor.set_data_from_numpy(value)
        out.append(tensor)
    return out


def _still_serves(native: GrpcServer) -> None:
    with grpcclient.InferenceServerClient(native.url) as client:
        assert client.infer("addsub", _inputs(A, B)).as_numpy("OUTPUT0").tolist() == [[2, 3, 4, 5]]


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests(native: GrpcServer, algorithm: str) -> None:
    with grpcclient.InferenceServerClient(native.url) as client:
        result = client.infer("addsub", _inputs(A, B), compression_algorithm=algorithm)
        assert result.as_numpy("OUTPUT1").tolist() == [[0, 1, 2, 3]]


def test_large_tensors_both_ways(native: GrpcServer) -> None:
    """32 MB in, 32 MB out: many DATA frames each way, within the peer's windows."""
    big = np.arange(4 * 1024 * 1024, dtype=np.float32).reshape(1, -1)  # 16 MB
    with grpcclient.InferenceServerClient(native.url) as client:
        result = client.infer("big", _inputs(big, big, "FP32"))
        assert np.array_equal(result.as_numpy("OUTPUT0"), big * 2)
        assert not result.as_numpy("OUTPUT1").any()


def test_many_concurrent_calls_on_one_channel(native: GrpcServer) -> None:
    async def run() -> list[Any]:
        async with aioclient.InferenceServerClient(native.url) as client:
            calls = []
            for i in range(64):
                inputs = []
                for n, value in enumerate((A * i, B)):
                    tensor = aioclient.InferInput(f"INPUT{n}", [1, 4], "INT32")
                    tensor.set_data_from_numpy(value)
                    inputs.append(tensor)
                calls.append(client.infer("addsub", inputs))
            return list(await asyncio.gather(*calls))

    results = asyncio.run(run())
    assert [r.as_numpy("OUTPUT0").tolist() for r in results] == [(A * i + B).tolist() for i in range(64)]


def test_streaming_in_order(native: GrpcServer) -> None:
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    with grpcclient.InferenceServerClient(native.url) as client:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        for i in range(20):
            client.async_stream_infer("addsub", _inputs(A * i, B), request_id=str(i))
        got = [results.get(timeout=10) for _ in range(20)]
        client.stop_stream()
    assert all(error is None for _, error in got)
    assert sorted(int(r.get_response().id) for r, _ in got) == list(range(20))


def test_stream_deadline(native: GrpcServer) -> None:
    """A stream whose request never ends its responses ends with DEADLINE_EXCEEDED."""
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    with grpcclient.InferenceServerClient(native.url) as client:
        client.start_stream(callback=lambda result, error: results.put((result, error)), stream_timeout=1.0)
        client.async_stream_infer("decoupled", _inputs(A, B), parameters={"wait_cancel": True})
        errors = []
        while not errors:
            _, error = results.get(timeout=20)
            if error is not None:
                errors.append(error)
        client.stop_stream()
    assert errors[0].status() == "StatusCode.DEADLINE_EXCEEDED"
    _still_serves(native)


def test_client_cancels_mid_call(native: GrpcServer) -> None:
    """The client cancels a stream with a request in flight: the server goes on."""
    request = pb.ModelInferRequest(model_name="decoupled", id="cancel-me")
    request.parameters["wait_cancel"].bool_param = True
    for i, value in enumerate((A, B)):
        tensor = request.inputs.add(name=f"INPUT{i}", datatype="INT32", shape=[1, 4])
        tensor.contents.int_contents.extend(value.flatten().tolist())
    with grpc.insecure_channel(native.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        call = stub.ModelStreamInfer(iter([request]))
        next(call)  # the first response: the request is in flight
        call.cancel()
        with pytest.raises(grpc.RpcError) as info:
            list(call)
        assert info.value.code() == grpc.StatusCode.CANCELLED
    _still_serves(native)


def test_unknown_method_and_service(native: GrpcServer) -> None:
    with grpc.insecure_channel(native.url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/Nope")
        with pytest.raises(grpc.RpcError) as info:
            call(b"")
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_message_size_limit(tmp_path: Path) -> None:
    write_model(tmp_path, "addsub")
    server, frontend = start_grpc([tmp_path], grpc_implementation="tritonpy", grpc_max_message_size=4096)
    try:
        with grpcclient.InferenceServerClient(frontend.url) as client:
            big = np.zeros((1, 4), np.int32)
            inputs = _inputs(big, big)
            inputs[0]._raw_content = b"\0" * 8192  # over the limit
            with pytest.raises(InferenceServerException) as info:
                client.infer("addsub", inputs)
            assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
            assert "larger than max" in str(info.value.message())
            assert client.infer("addsub", _inputs(A, B)).as_numpy("OUTPUT0") is not None
    finally:
        frontend.stop()
        server.stop()


# -- raw HTTP/2 ---------------------------------------------------------------------------------


class RawClient:
    """An ``h2`` client connection on a blocking socket."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.flush()

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def events(self, until: type) -> list[Any]:
        got: list[Any] = []
        while not any(isinstance(e, until) for e in got):
            data = self.sock.recv(65536)
            if not data:
                break
            got += self.conn.receive_data(data)
            self.flush()
        return got

    def close(self) -> None:
        self.sock.close()

    def call(self, path: str, body: bytes, extra: list[tuple[str, str]] | None = None) -> dict[str, str]:
        stream = self.conn.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *(extra or []),
        ]
        self.conn.send_headers(stream, headers)
        self.conn.send_data(stream, len(body).to_bytes(5, "big") + body, end_stream=True)
        self.flush()
        out: dict[str, str] = {}
        for event in self.events(h2.events.StreamEnded):
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                out.update({k.decode(): v.decode() for k, v in event.headers})
        return out


def test_raw_calls(native: GrpcServer) -> None:
    client = RawClient(native.port)
    try:
        live = client.call("/inference.GRPCInferenceService/ServerLive", b"")
        assert live[":status"] == "200" and live["grpc-status"] == "0"
        unknown = client.call("/inference.GRPCInferenceService/Nope", b"")
        assert unknown["grpc-status"] == "12"
        encoded = client.call(
            "/inference.GRPCInferenceService/ServerLive", b"", [("grpc-encoding", "snappy")]
        )
        assert encoded["grpc-status"] == "12"
        garbage = client.call("/inference.GRPCInferenceService/ModelReady", b"\xff\xff\xff")
        assert garbage["grpc-status"] == "13"  # grpc's INTERNAL "Exception deserializing request!"
        assert garbage["grpc-message"] == "Exception deserializing request!"
        missing = client.call(
            "/inference.GRPCInferenceService/ModelReady",
            pb.ModelReadyRequest(name="nope %").SerializeToString(),
        )
        assert missing["grpc-status"] == "0"
        stream = client.conn.get_next_available_stream_id()
        client.conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/x"),
                (":authority", "a"),
                ("content-type", "text/plain"),
            ],
            end_stream=True,
        )
        client.flush()
        events = client.events(h2.events.StreamEnded)
        assert [dict(e.headers)[b":status"] for e in events if isinstance(e, h2.events.ResponseReceived)] == [
            b"415"
        ]
    finally:
        client.close()


def _goaway(sock: socket.socket) -> int | None:
    """The error code of the GOAWAY the server sends before closing (None: closed without one)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        if data[pos + 3] == 0x7:
            return int.from_bytes(data[pos + 13 : pos + 17], "big")
        pos += 9 + length
    return None


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frames(data: bytes) -> list[tuple[int, int, bytes]]:
    """(type, flags, payload) of each whole frame in ``data`` (from the server: no preface)."""
    out = []
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        if pos + 9 + length > len(data):
            break
        out.append((data[pos + 3], data[pos + 4], data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out


SETTINGS = b"\0\0\0\x04\0\0\0\0\0"


@pytest.mark.parametrize(
    ("name", "payload", "code"),
    [
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0x1),
        ("bad preface", b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", 0x1),
        ("DATA on stream 0", PREFACE + SETTINGS + b"\0\0\x01\0\0\0\0\0\0x", 0x1),
        ("HEADERS on stream 0", PREFACE + SETTINGS + b"\0\0\x01\x01\x04\0\0\0\0\x82", 0x1),
        ("PING of 3 bytes", PREFACE + SETTINGS + b"\0\0\x03\x06\0\0\0\0\0abc", 0x6),
        ("SETTINGS on a stream", PREFACE + b"\0\0\0\x04\0\0\0\0\x01", 0x1),
    ],
)
def test_malformed_connections_are_closed(native: GrpcServer, name: str, payload: bytes, code: int) -> None:
    with socket.create_connection(("127.0.0.1", native.port), timeout=10) as sock:
        sock.sendall(payload)
        assert _goaway(sock) == code, name
    _still_serves(native)


def test_oversized_header_list_closes_the_connection(native: GrpcServer) -> None:
    client = RawClient(native.port)
    try:
        stream = client.conn.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", "/x"), (":authority", "a")]
        headers += [(f"x-{i}", "v" * 1000) for i in range(64)]  # 64 kB: over 16 kB
        client.conn.send_headers(stream, headers, end_stream=True)
        client.flush()
        events = client.events(h2.events.ConnectionTerminated)
        terminated = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
        assert terminated and terminated[0].error_code == 0xB
    finally:
        client.close()
    _still_serves(native)


def test_too_many_pings_without_calls(native: GrpcServer) -> None:
    """grpc core's policy: pings without calls are strikes; past the limit, GOAWAY too_many_pings."""
    client = RawClient(native.port)
    try:
        for i in range(4):
            client.conn.ping(i.to_bytes(8, "big"))
        client.flush()
        events = client.events(h2.events.ConnectionTerminated)
        terminated = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
        assert terminated and terminated[0].error_code == 0xB
        assert terminated[0].additional_data == b"too_many_pings"
    finally:
        client.close()
    _still_serves(native)


def test_graceful_shutdown_finishes_calls_in_flight(tmp_path: Path) -> None:
    """stop(grace): GOAWAY at once, a call already started still gets its answer, then close."""
    write_model(tmp_path, "addsub")
    server, frontend = start_grpc([tmp_path], grpc_implementation="tritonpy")
    client = RawClient(frontend.port)
    try:
        stream = client.conn.get_next_available_stream_id()
        client.conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/inference.GRPCInferenceService/ServerLive"),
                (":authority", "a"),
                ("content-type", "application/grpc"),
            ],
        )
        client.flush()
        client.events(h2.events.SettingsAcknowledged)
        stopping = asyncio.run_coroutine_threadsafe(frontend.aio.stop(10), frontend.loop)
        data = b""
        while not any(kind == 0x7 for kind, _, _ in _frames(data)):
            data += client.sock.recv(65536)
        # RFC 9113 6.8: first a GOAWAY with the largest id and a PING, streams in flight still taken.
        first = next(payload for kind, _, payload in _frames(data) if kind == 0x7)
        assert first[:8] == (2**31 - 1).to_bytes(4, "big") + b"\0\0\0\0"
        ping = next(payload for kind, flags, payload in _frames(data) if kind == 0x6 and not flags & 1)
        # h2 sends nothing after a GOAWAY: the request's end and the PING's ack by hand.
        client.sock.sendall(
            b"\0\0\x05\0\x01" + stream.to_bytes(4, "big") + b"\0" * 5 + b"\0\0\x08\x06\x01\0\0\0\0" + ping
        )
        while chunk := client.sock.recv(65536):
            data += chunk
        assert b"grpc-status" in data  # the answer's trailers (literals: not Huffman-coded)
        goaways = [payload for kind, _, payload in _frames(data) if kind == 0x7]
        assert len(goaways) == 2 and goaways[1][:8] == stream.to_bytes(4, "big") + b"\0\0\0\0"
        stopping.result(10)
    finally:
        client.close()
        frontend.stop()  # again: a no-op for the transport, then the loop's thread ends
        server.stop()


def test_keepalive_closes_an_unresponsive_connection(tmp_path: Path) -> None:
    write_model(tmp_path, "addsub")
    server, frontend = start_grpc(
        [tmp_path],
        grpc_implementation="tritonpy",
        grpc_keepalive_time=200,
        grpc_keepalive_timeout=300,
        grpc_keepalive_permit_without_calls=True,
    )
    try:
        with socket.create_connection(("127.0.0.1", frontend.port), timeout=10) as sock:
            sock.sendall(PREFACE + SETTINGS)
            data = b""
            while chunk := sock.recv(65536):  # never acking the server's pings
                data += chunk
        kinds = []
        pos = 0
        while pos + 9 <= len(data):
            kinds.append(data[pos + 3])
            pos += 9 + int.from_bytes(data[pos : pos + 3], "big")
        assert 0x6 in kinds  # a PING came, and the connection closed without its ack
        _still_serves(frontend)
    finally:
        frontend.stop()
        server.stop()


def test_bad_tls_settings_are_clear_errors(tmp_path: Path) -> None:
    import tritonpy
    from tritonpy.grpc.native import tls_context

    with pytest.raises(ValueError, match="needs --grpc-server-cert and --grpc-server-key"):
        tls_context(tritonpy.ServerOptions(grpc_use_ssl=True))
    missing = tritonpy.ServerOptions(
        grpc_use_ssl=True, grpc_server_cert=str(tmp_path / "c.pem"), grpc_server_key=str(tmp_path / "k.pem")
    )
    with pytest.raises(ValueError, match="cannot read --grpc-server-key"):
        tls_context(missing)
    (tmp_path / "c.pem").write_text("not a certificate")
    (tmp_path / "k.pem").write_text("not a key")
    with pytest.raises(ValueError, match="bad gRPC TLS certificate or key"):
        tls_context(missing)


def test_responses_keep_within_a_small_peer_window(native: GrpcServer) -> None:
    """A client with a 1 kB stream window and 16 kB frames gets a 256 kB response in
    pieces as it opens the window (``h2`` raises if a frame overruns either)."""
    sock = socket.create_connection(("127.0.0.1", native.port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.local_settings = h2.settings.Settings(client=True, initial_values={0x4: 1024})
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    while conn.outbound_flow_control_window < 1 << 20:  # the server's SETTINGS and WINDOW_UPDATE
        conn.receive_data(sock.recv(65536))
    request = pb.ModelInferRequest(model_name="big")
    values = np.arange(32 * 1024, dtype=np.float32).reshape(1, -1)
    for i in range(2):
        request.inputs.add(name=f"INPUT{i}", datatype="FP32", shape=[1, values.shape[1]])
        request.raw_input_contents.append(values.tobytes())
    body = request.SerializeToString()
    stream = conn.get_next_available_stream_id()
    conn.send_headers(
        stream,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/inference.GRPCInferenceService/ModelInfer"),
            (":authority", "a"),
            ("content-type", "application/grpc"),
        ],
    )
    pending = [memoryview(len(body).to_bytes(5, "big") + body)]

    def send_more() -> None:  # the request as the server's windows allow (64 kB for a new stream)
        while pending[0]:
            room = min(conn.local_flow_control_window(stream), conn.max_outbound_frame_size, len(pending[0]))
            if room <= 0:
                return
            conn.send_data(stream, pending[0][:room].tobytes(), end_stream=room == len(pending[0]))
            pending[0] = pending[0][room:]

    send_more()
    sock.sendall(conn.data_to_send())
    received = bytearray()
    trailers: dict[bytes, bytes] = {}
    done = False
    try:
        while not done:
            data = sock.recv(65536)
            assert data, "closed before the response ended"
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    received += event.data
                    assert len(event.data) <= 16_384
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.TrailersReceived):
                    trailers = dict(event.headers)
                elif isinstance(event, h2.events.StreamEnded):
                    done = True
            send_more()
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    assert trailers[b"grpc-status"] == b"0"
    response = pb.ModelInferResponse.FromString(bytes(received[5:]))
    assert (
        np.frombuffer(response.raw_output_contents[0], np.float32).tolist() == (values * 2).flatten().tolist()
    )


def test_a_request_without_path_is_reset(native: GrpcServer) -> None:
    """A malformed request is a stream error: RST_STREAM PROTOCOL_ERROR, the connection stays."""
    import hpack

    block = hpack.Encoder().encode([(":method", "POST"), (":scheme", "http"), (":authority", "a")])
    with socket.create_connection(("127.0.0.1", native.port), timeout=10) as sock:
        sock.sendall(PREFACE + SETTINGS + len(block).to_bytes(3, "big") + b"\x01\x05\0\0\0\x01" + block)
        data = b""
        while True:
            data += sock.recv(65536)
            frames = []
            pos = 0
            while pos + 9 <= len(data):
                length = int.from_bytes(data[pos : pos + 3], "big")
                frames.append((data[pos + 3], data[pos + 9 : pos + 9 + length]))
                pos += 9 + length
            resets = [payload for kind, payload in frames if kind == 0x3]
            if resets:
                break
        assert resets == [b"\0\0\0\x01"]
        assert all(kind != 0x7 for kind, _ in frames)  # no GOAWAY
    _still_serves(native)


@pytest.mark.parametrize(
    "extra",
    [[("Upper", "x")], [("connection", "close")], [("te", "gzip")], [(":bogus", "x")]],
)
def test_malformed_requests_are_reset(native: GrpcServer, extra: list[tuple[str, str]]) -> None:
    """RFC 9113 8.2: upper-case names, connection-specific fields, te other than trailers,
    unknown pseudo-headers make a request malformed: RST_STREAM PROTOCOL_ERROR."""
    import hpack

    headers = [(":method", "POST"), (":scheme", "http"), (":path", "/p"), (":authority", "a")]
    if extra[0][0].startswith(":"):
        headers = extra + headers
    else:
        headers += extra
    block = hpack.Encoder().encode(headers)
    with socket.create_connection(("127.0.0.1", native.port), timeout=10) as sock:
        sock.sendall(PREFACE + SETTINGS + len(block).to_bytes(3, "big") + b"\x01\x05\0\0\0\x01" + block)
        data = b""
        resets: list[bytes] = []
        while not resets:
            chunk = sock.recv(65536)
            assert chunk, "closed without RST_STREAM"
            data += chunk
            pos = 0
            while pos + 9 <= len(data):
                length = int.from_bytes(data[pos : pos + 3], "big")
                if data[pos + 3] == 0x3:
                    resets.append(data[pos + 9 : pos + 9 + length])
                pos += 9 + length
        assert resets == [b"\0\0\0\x01"]
    _still_serves(native)
