"""Memory per connection of the native gRPC transport stays bounded whatever the client
does (issue 27, "memory and backpressure"), and ModelStreamInfer's read-ahead is bounded
on both transports.

Each attack runs against ``tritonpy serve`` in a subprocess, whose RSS is read from
/proc; meanwhile and afterwards another client (tritonclient.grpc) is answered.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonpy.grpc import http2
from tritonpy_h2 import FakeTransport
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
MB = 1 << 20
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INFER = "/inference.GRPCInferenceService/ModelInfer"

SLOW = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            time.sleep(0.01)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([x.size], np.float32))]))
        return out
"""


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024


def _repo(root: Path, slow: bool = False) -> Path:
    """``simple`` (for the bystander client), ``echo`` (ONNX Identity, FP32 [-1]) and,
    with ``slow``, a Python model that takes 10 ms a request (FP32 [-1] in, its size out)."""
    repo = root / "repo"
    shutil.copytree(EXAMPLES / "simple", repo / "simple")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])],
        "echo",
        [vi("X", TensorProto.FLOAT, ["N"])],
        [vi("Y", TensorProto.FLOAT, ["N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / "echo" / "1").mkdir(parents=True)
    onnx.save(model, repo / "echo" / "1" / "model.onnx")
    (repo / "echo" / "config.pbtxt").write_text(
        'name: "echo"\nbackend: "onnxruntime"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
    )
    if slow:
        (repo / "slow" / "1").mkdir(parents=True)
        (repo / "slow" / "1" / "model.py").write_text(SLOW)
        (repo / "slow" / "config.pbtxt").write_text(
            'name: "slow"\nbackend: "python"\nmax_batch_size: 0\n'
            'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
            'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
            "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
        )
    return repo


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    servers: list[ServerProcess] = []

    def start(*flags: str, slow: bool = False) -> ServerProcess:
        server = ServerProcess(
            [_repo(tmp_path, slow)], "--allow-metrics=false", *flags, log=tmp_path / "server.log"
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.stop() == 0, server.output()


def _answers(server: ServerProcess, cert: Path | None = None) -> None:
    """Another client is answered (over TLS trusting ``cert``, when given)."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = grpcclient.InferInput(name, [1, 16], "INT32")
        tensor.set_data_from_numpy(a)
        inputs.append(tensor)
    tls = {} if cert is None else {"ssl": True, "root_certificates": str(cert)}
    with grpcclient.InferenceServerClient(server.grpc_url, **tls) as client:
        result = client.infer("simple", inputs, client_timeout=10)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)


def _echo_body(values: int) -> bytes:
    request = pb.ModelInferRequest(model_name="echo")
    request.inputs.add(name="X", datatype="FP32", shape=[values])
    request.raw_input_contents.append(bytes(4 * values))
    body: bytes = request.SerializeToString()
    return body


def _echo(server: ServerProcess, values: int, cert: Path | None = None) -> None:
    data = np.ones(values, np.float32)
    tensor = grpcclient.InferInput("X", [values], "FP32")
    tensor.set_data_from_numpy(data)
    tls = {} if cert is None else {"ssl": True, "root_certificates": str(cert)}
    with grpcclient.InferenceServerClient(server.grpc_url, **tls) as client:
        result = client.infer("echo", [tensor], client_timeout=30)
    assert result.as_numpy("Y").shape == (values,)


def _messages(data: bytes) -> int:
    """Whole gRPC messages in ``data`` (a stream's response bytes)."""
    count = pos = 0
    while pos + 5 <= len(data):
        pos += 5 + int.from_bytes(data[pos + 1 : pos + 5], "big")
        count += pos <= len(data)
    return count


def _parse(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream id, payload) of each whole frame in ``data``."""
    out = []
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big")
        out.append((data[pos + 3], data[pos + 4], stream_id, data[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return http2.frame(kind, flags, stream_id, payload)


def _request_headers(encoder: hpack.Encoder, stream_id: int, path: str) -> bytes:
    block = encoder.encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "a"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    return _frame(http2.HEADERS, http2.END_HEADERS, stream_id, block)


# -- 1. output backpressure -------------------------------------------------------------------


def _certificate(root: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 (``cert.pem``, key ``key.pem``)."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        + ["-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return root / "cert.pem"


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_a_client_that_never_reads(serve: Any, tmp_path: Path, tls: bool) -> None:
    """A client opens huge windows, sends 400 echo calls of 512 kB (200 MB of answers)
    and never reads: the server stops reading it once its write buffer is full (the
    client's sends stall, or overrun a window and the connection closes); its RSS stays
    far below the answers' size, and other clients are answered meanwhile. The same
    over TLS (the server runs on uvloop, whose TLS transport pauses too)."""
    cert = None
    flags = ["--grpc-connection-buffer-limit", str(8 * MB)]
    if tls:
        if shutil.which("openssl") is None:
            pytest.skip("needs the openssl command")
        cert = _certificate(tmp_path)
        flags += [
            "--grpc-use-ssl",
            "--grpc-server-cert",
            str(cert),
            "--grpc-server-key",
            str(tmp_path / "key.pem"),
        ]
    server = serve(*flags)
    _echo(server, 128 * 1024, cert)  # the allocator and onnxruntime's arena warmed up
    _answers(server, cert)
    base = _rss_mb(server.proc.pid)
    body = _echo_body(128 * 1024)
    message = len(body).to_bytes(5, "big") + body
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    raw.connect(("127.0.0.1", server.grpc_port))
    raw.settimeout(10)
    sock = raw
    if tls:
        context = ssl.create_default_context(cafile=str(cert))
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
    sock.settimeout(3)
    encoder = hpack.Encoder()
    open_windows = _frame(http2.SETTINGS, 0, 0, (0x4).to_bytes(2, "big") + (2**31 - 1).to_bytes(4, "big"))
    open_windows += _frame(http2.WINDOW_UPDATE, 0, 0, (2**31 - 1 - 65_535).to_bytes(4, "big"))
    sent = 0
    stalled = False
    try:
        sock.sendall(PREFACE + open_windows)
        for i in range(400):
            stream_id = 2 * i + 1
            data = [_request_headers(encoder, stream_id, INFER)]
            for at in range(0, len(message), 16_384):
                end = http2.END_STREAM if at + 16_384 >= len(message) else 0
                data.append(_frame(http2.DATA, end, stream_id, message[at : at + 16_384]))
            sock.sendall(b"".join(data))
            sent += len(body)
    except OSError:  # a timeout (the server stopped reading), or closed for overrunning a window
        stalled = True
    try:
        assert stalled, "the server read 200 MB from a client that never read its answers"
        assert sent < 100 * MB
        _answers(server, cert)
        grown = _rss_mb(server.proc.pid) - base
        assert grown < 80, f"server RSS grew {grown} MB for a client that never reads"
    finally:
        sock.close()
    _answers(server, cert)


# -- 2. receive windows follow what handlers take ---------------------------------------------


class H2Client:
    """An ``h2`` client that sends what the server's windows allow and reads what comes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.events: list[Any] = []
        self.flush()

    def flush(self) -> None:
        self.sock.settimeout(10)
        self.sock.sendall(self.conn.data_to_send())

    def read(self, timeout: float) -> bool:
        """Take what the server sent within ``timeout`` s (False: nothing came)."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except TimeoutError:
            return False
        if not data:
            raise ConnectionError("closed")
        self.events += self.conn.receive_data(data)
        self.flush()
        return True

    def start(self, path: str) -> int:
        stream_id: int = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", path),
                (":authority", "a"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        return stream_id

    def send_some(self, stream_id: int, data: memoryview) -> int:
        """Send what the windows allow of ``data`` now; the bytes sent."""
        room = min(self.conn.local_flow_control_window(stream_id), len(data))
        at = 0
        while at < room:
            size = min(room - at, self.conn.max_outbound_frame_size)
            self.conn.send_data(stream_id, data[at : at + size].tobytes())
            at += size
        return room

    def close(self) -> None:
        self.sock.close()


def test_many_streams_of_huge_messages_are_flow_controlled(serve: Any) -> None:
    """48 streams each announce a 16 MB message (768 MB in all) and send it as fast as
    the windows allow: the server grants windows up to its 4 MB buffer limit plus the
    one message it lets past the limit, then no more (the client is flow-controlled,
    not buffered); its RSS stays bounded, and other clients are answered. Calls of
    messages larger than the limit still succeed, several at once on one channel."""
    server = serve("--grpc-connection-buffer-limit", str(4 * MB), "--grpc-max-message-size", str(16 * MB))
    _answers(server)
    base = _rss_mb(server.proc.pid)
    client = H2Client(server.grpc_port)
    message = memoryview((16 * MB - 5).to_bytes(5, "big") + bytes(16 * MB - 5))  # never completed
    offsets: dict[int, int] = {}
    try:
        while not client.read(0.5):  # the server's SETTINGS
            pass
        for _ in range(48):
            offsets[client.start(INFER)] = 0
        client.flush()
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.0:
            progress = 0
            for stream_id, at in offsets.items():
                sent = client.send_some(stream_id, message[at : len(message) - 1])
                offsets[stream_id] = at + sent
                progress += sent
            client.flush()
            got = client.read(0.2)
            if progress or got:
                idle_since = time.monotonic()
        accepted = sum(offsets.values())
        # The limit, the one message allowed past it, and what the other streams' windows
        # held when it began: the limit's worth, and a new stream's window each.
        bound = 4 * MB + 16 * MB + 4 * MB + 48 * http2.STREAM_WINDOW
        assert accepted < bound, f"the server took {accepted >> 20} MB"
        assert client.conn.outbound_flow_control_window < 1 * MB  # no window left: flow-controlled
        _answers(server)
        grown = _rss_mb(server.proc.pid) - base
        assert grown < 80, f"server RSS grew {grown} MB holding partial messages"
    finally:
        client.close()
    _answers(server)

    # Messages larger than the limit, three at once on one channel: no deadlock.
    async def three() -> None:
        import tritonclient.grpc.aio as aioclient

        async with aioclient.InferenceServerClient(server.grpc_url) as aio:
            calls = []
            for n in (2 * MB, 2 * MB + 1, 2 * MB + 2):  # 8 MB and more each
                tensor = aioclient.InferInput("X", [n], "FP32")
                tensor.set_data_from_numpy(np.ones(n, np.float32))
                calls.append(aio.infer("echo", [tensor], client_timeout=60))
            results = await asyncio.gather(*calls)
        assert [r.as_numpy("Y").shape[0] for r in results] == [2 * MB, 2 * MB + 1, 2 * MB + 2]

    asyncio.run(three())


# -- 3. a streaming call's queue reopens the window as the handler takes messages -------------


def test_a_streaming_call_is_flow_controlled_by_its_handler(serve: Any) -> None:
    """ModelStreamInfer to a model that takes 10 ms a request, 256 kB requests sent as
    fast as the stream's window allows: with 2 requests in flight, the stream's window
    reopens only as the handler takes messages, so the client gets ahead of the model
    by a bounded amount (not by all it has to send)."""
    server = serve("--grpc-stream-max-inflight", "2", slow=True)
    request = pb.ModelInferRequest(model_name="slow")
    request.inputs.add(name="X", datatype="FP32", shape=[64 * 1024])
    request.raw_input_contents.append(bytes(256 * 1024))
    body = request.SerializeToString()
    one = len(body).to_bytes(5, "big") + body
    client = H2Client(server.grpc_port)
    try:
        while not client.read(0.5):
            pass
        stream_id = client.start("/inference.GRPCInferenceService/ModelStreamInfer")
        client.flush()
        data = memoryview(one * 200)  # 51 MB
        at = answered = 0
        ahead = []
        received = bytearray()
        started = time.monotonic()
        while time.monotonic() - started < 1.5:
            at += client.send_some(stream_id, data[at:])
            client.flush()
            client.read(0.05)
            for e in client.events:
                if isinstance(e, h2.events.DataReceived):
                    received += e.data
                    client.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            client.events.clear()
            answered = _messages(bytes(received))
            ahead.append(at // len(one) - answered)
        assert answered, "the model answered nothing"
        # In flight (2), queued for the handler (a window's worth: 4), in the stream's window (4).
        assert max(ahead) < 16, ahead
        _answers(server)
    finally:
        client.close()
    _answers(server)


# -- 4. ModelStreamInfer's read-ahead, both transports ----------------------------------------


@pytest.mark.parametrize("implementation", ["tritonpy", "grpcio"])
def test_stream_infer_reads_ahead_a_bounded_number(serve: Any, implementation: str) -> None:
    """A client streams 300 requests of 256 kB (77 MB) to a model that takes 10 ms
    each: the server reads a request only when one of its 4 in flight completes, so the
    client's generator is pulled a bounded distance ahead of the answers; the server's
    RSS stays bounded; every request is answered, in the end, on either transport."""
    server = serve("--grpc-implementation", implementation, "--grpc-stream-max-inflight", "4", slow=True)
    base = _rss_mb(server.proc.pid)
    request = pb.ModelInferRequest(model_name="slow")
    request.inputs.add(name="X", datatype="FP32", shape=[64 * 1024])
    request.raw_input_contents.append(bytes(256 * 1024))
    pulled = 0
    ahead: list[int] = []
    answered = 0
    peak = 0

    def requests() -> Iterator[pb.ModelInferRequest]:
        nonlocal pulled
        for i in range(300):
            pulled += 1
            request.id = str(i)
            yield request

    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        ids = []
        for response in stub.ModelStreamInfer(requests(), timeout=60):
            assert not response.error_message
            ids.append(int(response.infer_response.id))
            answered += 1
            ahead.append(pulled - answered)
            if answered % 50 == 0:
                peak = max(peak, _rss_mb(server.proc.pid) - base)
                _answers(server)
    assert sorted(ids) == list(range(300))
    # 4 in flight, what the transports' windows let through (grpc core: a few MB), and
    # what the client's channel holds; without the bound it is all 300 at once.
    assert max(ahead[10:]) < 200, max(ahead)
    assert peak < 60, f"server RSS grew {peak} MB"
    _answers(server)


# -- 5. frames are not buffered whole ---------------------------------------------------------


def test_unfinished_frames_of_unknown_type_are_not_held(serve: Any) -> None:
    """64 connections each send all but the last byte of a 1 MB frame of an unknown
    type: its payload is dropped as it arrives (RSS stays put); once finished the frame
    is skipped and the connection answers a PING. An unfinished 1 MB HEADERS frame
    closes its connection at once (ENHANCE_YOUR_CALM), not once it is whole."""
    server = serve()
    _answers(server)
    base = _rss_mb(server.proc.pid)
    size = http2.OUR_MAX_FRAME
    socks = []
    try:
        for _ in range(64):
            sock = socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10)
            sock.sendall(PREFACE + _frame(http2.SETTINGS, 0, 0) + size.to_bytes(3, "big") + b"\xfa\0\0\0\0\0")
            sock.sendall(bytes(size - 1))
            socks.append(sock)
        time.sleep(0.5)
        _answers(server)
        grown = _rss_mb(server.proc.pid) - base
        assert grown < 24, f"server RSS grew {grown} MB for 64 unfinished frames"
        sock = socks[0]
        sock.sendall(b"\0" + _frame(http2.PING, 0, 0, b"12345678"))
        data = b""
        while _frame(http2.PING, http2.ACK, 0, b"12345678") not in data:
            chunk = sock.recv(65536)
            assert chunk, "closed"
            data += chunk
        # A control frame is buffered whole only up to 16 kB (a header block: up to what a
        # header list may take); an unfinished larger HEADERS frame closes at its header.
        with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as sock:
            sock.sendall(PREFACE + _frame(http2.SETTINGS, 0, 0) + size.to_bytes(3, "big") + b"\1\4\0\0\0\1")
            sock.sendall(bytes(1000))
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
            goaways = [payload for kind, _, _, payload in _parse(data) if kind == http2.GOAWAY]
            assert goaways and goaways[0][4:8] == (0xB).to_bytes(4, "big")  # ENHANCE_YOUR_CALM
    finally:
        for sock in socks:
            sock.close()
    _answers(server)


# -- in process: the connection's reactions, frame by frame ------------------------------------


class Transport(FakeTransport):
    def frames(self) -> list[tuple[int, int, int, bytes]]:
        """(type, flags, stream id, payload) of what was written since the last call."""
        out = _parse(bytes(self.out))
        self.out.clear()
        return out


class Holder:
    """A receiver that keeps what it is given (and never releases it)."""

    def __init__(self, stream: http2.Stream) -> None:
        self.stream = stream
        self.chunks: list[bytes] = []
        self.ended = False

    def data(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    def end(self) -> None:
        self.ended = True

    def reset(self, code: int) -> None:
        pass


def _connection(limit: int | None = None) -> tuple[http2.Connection, Transport, dict[int, Holder]]:
    holders: dict[int, Holder] = {}

    def app(stream: http2.Stream) -> http2.Receiver:
        holders[stream.id] = Holder(stream)
        return holders[stream.id]

    config = http2.Config() if limit is None else http2.Config(buffer_limit=limit)
    conn = http2.Connection(app, config, lambda c: None)
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(PREFACE + _frame(http2.SETTINGS, 0, 0))
    transport.frames()
    return conn, transport, holders


def test_a_padded_data_frame_is_handed_over_as_it_arrives() -> None:
    async def run() -> None:
        conn, transport, holders = _connection()
        encoder = hpack.Encoder()
        conn.data_received(_request_headers(encoder, 1, INFER))
        body = bytes(range(256)) * 200  # 51200 bytes
        payload = bytes([100]) + body + bytes(100)  # pad length 100
        data = _frame(http2.DATA, http2.PADDED | http2.END_STREAM, 1, payload)
        window = conn._recv_window
        for at in range(0, len(data), 7000):
            conn.data_received(data[at : at + 7000])
            if at + 7000 < len(data):
                assert not holders[1].ended  # END_STREAM only at the frame's end
        holder = holders[1]
        assert len(holder.chunks) > 1  # in pieces, not the frame at once
        assert b"".join(holder.chunks) == body and holder.ended
        assert conn._recv_window == window - len(payload)  # the whole frame is flow-controlled
        assert conn._held == len(body) and holder.stream.held == len(body)  # padding is not held
        conn.abort()

    asyncio.run(run())


@pytest.mark.parametrize("declared", [51_200 - 1, 51_200 + 1])
def test_a_frame_handed_over_in_pieces_is_held_to_its_content_length(declared: int) -> None:
    """RFC 9113 8.1.1 on the incremental path: a body past its content-length is reset
    as the piece that passes it arrives; one short of it, at the frame's END_STREAM."""

    async def run() -> None:
        conn, transport, holders = _connection()
        block = hpack.Encoder().encode(
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", INFER),
                ("content-type", "application/grpc"),
                ("content-length", str(declared)),
            ]
        )
        conn.data_received(_frame(http2.HEADERS, http2.END_HEADERS, 1, block))
        data = _frame(http2.DATA, http2.END_STREAM, 1, bytes(51_200))
        for at in range(0, len(data), 7000):
            conn.data_received(data[at : at + 7000])
        resets = [f for f in transport.frames() if f[0] == http2.RST_STREAM]
        assert [(f[2], int.from_bytes(f[3], "big")) for f in resets] == [(1, http2.PROTOCOL_ERROR)]
        assert not holders[1].ended and 1 not in conn.streams
        assert sum(map(len, holders[1].chunks)) <= declared
        conn.abort()

    asyncio.run(run())


def test_no_window_is_granted_at_the_limit_until_data_is_released() -> None:
    async def run() -> None:
        conn, transport, holders = _connection(limit=256 * 1024)
        encoder = hpack.Encoder()
        for n in range(8):  # 8 streams x 32 kB: the connection's whole window
            conn.data_received(_request_headers(encoder, 2 * n + 1, INFER))
            conn.data_received(_frame(http2.DATA, 0, 2 * n + 1, bytes(32 * 1024)))
        connection_updates = [f for f in transport.frames() if f[0] == http2.WINDOW_UPDATE and f[2] == 0]
        assert connection_updates == []  # everything received is still held
        assert conn._recv_window == 0
        holders[1].stream.release()  # a handler took stream 1's 32 kB
        updates = [f for f in transport.frames() if f[0] == http2.WINDOW_UPDATE and f[2] == 0]
        assert [int.from_bytes(f[3], "big") for f in updates] == [32 * 1024]
        conn.abort()

    asyncio.run(run())


def test_paused_writing_stops_reading_and_producing() -> None:
    async def run() -> None:
        conn, transport, holders = _connection()
        encoder = hpack.Encoder()
        conn.data_received(_request_headers(encoder, 1, INFER))
        stream = holders[1].stream
        conn.pause_writing()  # the transport's buffer is over its high-water mark
        assert not transport.reading
        stream.send(b"x" * 1000, b"", b"\x88")
        conn.data_received(_frame(http2.PING, 0, 0, b"12345678"))
        assert transport.frames() == []  # no answer, no PING ack: neither made nor read
        conn.resume_writing()
        assert transport.reading
        kinds = [f[0] for f in transport.frames()]
        assert http2.DATA in kinds and http2.PING in kinds
        conn.abort()

    asyncio.run(run())
