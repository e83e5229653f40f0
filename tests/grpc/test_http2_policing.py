"""The native gRPC transport against HTTP/2 denial-of-service attacks (RFC 9113 10.5):
rapid reset, SETTINGS/PING/CONTINUATION floods, control frames queued for a peer
that does not read, idle and old connections, and the RFC 9113 rules on stream ids
and malformed requests. Each attack gets its protocol answer (GOAWAY or RST_STREAM
with the expected code) while other clients are still served."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb
from tritonpy.grpc.calls import Method
from tritonpy.grpc.http2 import Budget
from tritonpy_h2 import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    GOAWAY,
    HEADERS,
    PING,
    RST_STREAM,
    SETTINGS,
    RawH2,
    frame,
    grpc_request,
    rss_kib,
)
from tritonpy_testbackend import write_model, write_sender_models
from tritonpy_testservers import GrpcServer, start_grpc

NO_ERROR, PROTOCOL_ERROR, STREAM_CLOSED, REFUSED_STREAM, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x5, 0x7, 0xB
LIVE = "/inference.GRPCInferenceService/ServerLive"
STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"
STUBBORN = "/tritonpy.test/Stubborn"
MAX_STREAMS = 8
#: Seconds the stubborn handler goes on after it is cancelled.
STUBBORN_AFTER_CANCEL = 0.5


async def _stubborn(request: Any, context: Any) -> Any:
    """A handler whose work outlives its cancellation (a model finishing its batch)."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(STUBBORN_AFTER_CANCEL)
        raise
    return pb.ServerLiveResponse(live=True)


def _serve(repo: Path, **options: Any) -> tuple[Any, GrpcServer]:
    server, frontend = start_grpc([repo], grpc_implementation="tritonpy", **options)
    frontend.aio.methods[STUBBORN.encode()] = Method("Stubborn", _stubborn, lambda data: data, False)
    return server, frontend


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policing_repo")
    write_model(path, "addsub")
    write_sender_models(path)
    return path


@pytest.fixture(scope="module")
def policed(repo: Path) -> Iterator[GrpcServer]:
    """Small limits, so that tests reach them quickly."""
    server, frontend = _serve(
        repo,
        grpc_max_concurrent_streams=MAX_STREAMS,
        grpc_http2_max_reset_burst=200,
        grpc_http2_max_reset_rate=10,
    )
    yield frontend
    frontend.stop()
    server.stop()


def _live(frontend: GrpcServer) -> None:
    """Another client is answered."""
    with grpcclient.InferenceServerClient(frontend.url) as client:
        assert client.is_server_live()


def _raw_live(client: RawH2, stream_id: int) -> None:
    """A call on ``client``'s own connection is answered."""
    client.send(client.headers(stream_id, grpc_request(LIVE)), client.message(stream_id))
    deadline = time.monotonic() + 10
    while not client.ended(stream_id):
        assert time.monotonic() < deadline and client.read(), "no answer"


# -- rapid reset (CVE-2023-44487) -------------------------------------------------------------


def test_the_server_advertises_max_concurrent_streams(policed: GrpcServer) -> None:
    client = RawH2(policed.port)
    try:
        settings = client.wait_for(SETTINGS)
        assert settings is not None
        payload = settings[3]
        entries = {
            int.from_bytes(payload[at : at + 2], "big"): int.from_bytes(payload[at + 2 : at + 6], "big")
            for at in range(0, len(payload), 6)
        }
        assert entries[0x3] == MAX_STREAMS
    finally:
        client.close()


def test_reset_calls_count_until_their_handlers_end(policed: GrpcServer) -> None:
    """Streams the client resets count against MAX_CONCURRENT_STREAMS while their
    handlers still run: one more is refused (REFUSED_STREAM), until they end."""
    client = RawH2(policed.port)
    try:
        ids = [1 + 2 * i for i in range(MAX_STREAMS)]
        client.send(*(client.headers(i, grpc_request(STUBBORN)) + client.message(i) for i in ids))
        time.sleep(0.2)  # the handlers have started
        client.send(*(frame(RST_STREAM, 0, i, (8).to_bytes(4, "big")) for i in ids))
        client.send(client.headers(17, grpc_request(STUBBORN)), client.message(17))
        assert client.wait_for(RST_STREAM, 17) is not None
        assert client.resets(17) == [REFUSED_STREAM]
        assert len(policed.aio._tasks) <= MAX_STREAMS
        _live(policed)
        time.sleep(STUBBORN_AFTER_CANCEL + 0.3)  # the handlers have ended: room again
        _raw_live(client, 19)
        assert client.resets(19) == []
    finally:
        client.close()


def test_rapid_reset_gets_enhance_your_calm(policed: GrpcServer) -> None:
    """Streams opened and reset at once, past the reset budget: GOAWAY ENHANCE_YOUR_CALM;
    the handlers in flight never pass MAX_CONCURRENT_STREAMS; others are served."""
    before = rss_kib()
    client = RawH2(policed.port, timeout=5)
    most = 0
    try:
        stream_id = 1
        for _ in range(300):  # a round the server reads at once: at most MAX_STREAMS handlers start
            batch = []
            for _ in range(MAX_STREAMS):
                batch.append(client.headers(stream_id, grpc_request(STUBBORN)) + client.message(stream_id))
                batch.append(frame(RST_STREAM, 0, stream_id, (8).to_bytes(4, "big")))
                stream_id += 2
            client.send(*batch)
            most = max(most, len(policed.aio._tasks))
            time.sleep(0.005)
            client.poll()
            if client.seen(GOAWAY):
                break
        _live(policed)  # served during the attack
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many stream resets")
    finally:
        client.close()
    assert most <= MAX_STREAMS
    assert rss_kib() - before < 64 * 1024
    _live(policed)


def test_provoked_stream_errors_spend_the_reset_budget(policed: GrpcServer) -> None:
    """Stream errors the client provokes (here PRIORITY frames of the wrong length, each
    answered RST_STREAM FRAME_SIZE_ERROR) count as resets: past the budget, GOAWAY."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(*(frame(0x2, 0, 1 + 2 * i, b"\0") for i in range(300)))
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many stream resets")
        assert client.resets(1) == [0x6]
    finally:
        client.close()
    _live(policed)


# -- SETTINGS, PING and control-frame floods ----------------------------------------------------


def test_settings_flood_gets_enhance_your_calm(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(*(frame(SETTINGS, 0, 0, b"\0\x04" + (65535 + i).to_bytes(4, "big")) for i in range(500)))
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many SETTINGS frames")
    finally:
        client.close()
    _live(policed)


def test_an_empty_data_flood_gets_enhance_your_calm(policed: GrpcServer) -> None:
    """CVE-2019-9518: DATA frames with no body and no END_STREAM do nothing; past the budget
    (100 at once), GOAWAY. Empty DATA that ends a stream is how a client may end one: never
    counted."""
    client = RawH2(policed.port, timeout=5)
    try:
        for stream_id in range(1, 301, 2):  # 150 streams ended with an empty DATA frame
            client.send(client.headers(stream_id, grpc_request(LIVE)), frame(DATA, 0x1, stream_id))
        client.send(client.headers(301, grpc_request(STREAM_INFER)))
        client.send(*(frame(DATA, 0, 301) for _ in range(500)))
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many empty DATA frames")
    finally:
        client.close()
    _live(policed)


def test_a_settings_frame_with_too_many_entries(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(frame(SETTINGS, 0, 0, b"\0\x04\0\0\xff\xff" * 1000))
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many entries in a SETTINGS frame")
    finally:
        client.close()
    _live(policed)


def test_ping_flood_with_a_call_open_gets_too_many_pings(policed: GrpcServer) -> None:
    """Opening streams does not forgive ping strikes (grpc core forgives them only
    when it sends headers or data): GOAWAY too_many_pings."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request(STREAM_INFER)))  # a call that sends nothing yet
        for i in range(6):
            stream_id = 3 + 2 * i
            client.send(
                frame(PING, 0, 0, i.to_bytes(8, "big")), client.headers(stream_id, grpc_request(STREAM_INFER))
            )
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too_many_pings")
    finally:
        client.close()
    _live(policed)


def test_answers_the_peer_does_not_read_are_bounded(repo: Path) -> None:
    """A client that sends PINGs (ping policing off) and never reads: once the acks
    queue up unread past the limit, GOAWAY ENHANCE_YOUR_CALM."""
    server, frontend = _serve(repo, grpc_http2_max_ping_strikes=0)
    before = rss_kib()
    client = RawH2(frontend.port, timeout=10, rcvbuf=4096)
    try:
        ping = frame(PING, 0, 0, b"12345678") * 1000
        # The kernel's buffers take megabytes before the server's own queue grows. The
        # test stops sending once the server has given up (a sender that goes on after
        # the server closed gets a RST, and the GOAWAY with it can be lost).
        for _ in range(3000):
            if any(conn.closed for conn in frontend.aio._connections):
                break
            client.send(ping)
        _live(frontend)
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many control frames unread")
        assert rss_kib() - before < 64 * 1024
    finally:
        client.close()
        frontend.stop()
        server.stop()


# -- CONTINUATION flood (CVE-2024-28182) --------------------------------------------------------


def test_empty_continuation_frames_are_counted(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        first = client.headers(1, grpc_request(LIVE), flags=0)  # no END_HEADERS
        client.send(first, *(frame(CONTINUATION, 0, 1) for _ in range(1000)))
        assert client.goaway() == (ENHANCE_YOUR_CALM, b"too many CONTINUATION frames")
    finally:
        client.close()
    _live(policed)


def test_a_header_block_in_a_few_continuations_is_fine(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        block = client.encoder.encode(grpc_request(LIVE))
        parts = [block[: len(block) // 2], b"", block[len(block) // 2 :]]
        client.send(
            frame(HEADERS, 0, 1, parts[0]),
            frame(CONTINUATION, 0, 1, parts[1]),
            frame(CONTINUATION, END_HEADERS, 1, parts[2]),
            client.message(1),
        )
        while not client.ended(1):
            assert client.read()
    finally:
        client.close()


# -- idle, old and too many connections ---------------------------------------------------------


def test_an_idle_connection_is_closed(repo: Path) -> None:
    server, frontend = _serve(repo, grpc_max_connection_idle=300)
    try:
        busy = RawH2(frontend.port)
        busy.send(busy.headers(1, grpc_request(STUBBORN)), busy.message(1))  # 30 s: a call open
        start = time.monotonic()
        idle = RawH2(frontend.port)
        try:
            assert idle.goaway() == (NO_ERROR, b"max_idle")
            # Not before the idle timeout (a timer's lower bound, which no slow machine breaks).
            assert time.monotonic() - start >= 0.3
            idle.wait_closed(deadline=5)  # closed, not left hanging (TimeoutError otherwise)
            _raw_live(busy, 3)  # a connection with a call open is not idle
            assert not any(kind == 0x7 for kind, _, _, _ in busy.frames)
            _live(frontend)
        finally:
            busy.close()
            idle.close()
    finally:
        frontend.stop()
        server.stop()


def test_an_old_connection_goes_after_its_grace(repo: Path) -> None:
    server, frontend = _serve(repo, grpc_max_connection_age=300, grpc_max_connection_age_grace=300)
    try:
        client = RawH2(frontend.port)
        try:
            client.send(client.headers(1, grpc_request(STUBBORN)), client.message(1))  # never ends by itself
            assert client.goaway() == (NO_ERROR, b"max_age")
            client.wait_closed(deadline=5)  # after the grace, the open call cut (TimeoutError otherwise)
        finally:
            client.close()
        _live(frontend)
    finally:
        frontend.stop()
        server.stop()


def test_connections_over_the_limit_are_refused(repo: Path) -> None:
    server, frontend = _serve(repo, grpc_max_connections=2)
    try:
        first, second = RawH2(frontend.port), RawH2(frontend.port)
        _raw_live(first, 1)
        _raw_live(second, 1)
        third = RawH2(frontend.port)
        try:
            assert third.goaway() == (ENHANCE_YOUR_CALM, b"too many connections")
        finally:
            third.close()
        first.close()
        time.sleep(0.2)
        _live(frontend)
        second.close()
    finally:
        frontend.stop()
        server.stop()


# -- RFC 9113 stream ids and malformed requests -------------------------------------------------


def test_a_new_stream_below_the_last_one_is_a_protocol_error(policed: GrpcServer) -> None:
    """RFC 9113 5.1.1: a stream id lower than one already opened, never used: GOAWAY PROTOCOL_ERROR."""
    client = RawH2(policed.port, timeout=5)
    try:
        _raw_live(client, 5)
        client.send(client.headers(3, grpc_request(LIVE)), client.message(3))
        code = client.goaway()
        assert code is not None and code[0] == PROTOCOL_ERROR
    finally:
        client.close()
    _live(policed)


def test_headers_on_a_stream_the_client_ended_are_stream_closed(policed: GrpcServer) -> None:
    """RFC 9113 5.1: frames after END_STREAM on a closed stream: GOAWAY STREAM_CLOSED."""
    client = RawH2(policed.port, timeout=5)
    try:
        _raw_live(client, 1)
        client.send(client.headers(1, [("x-late", "1")], end_stream=True))
        code = client.goaway()
        assert code is not None and code[0] == STREAM_CLOSED
    finally:
        client.close()


def test_headers_after_the_clients_own_reset_are_a_stream_error(policed: GrpcServer) -> None:
    """RFC 9113 5.1: a frame after the client reset the stream: RST_STREAM STREAM_CLOSED."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request(STREAM_INFER)))
        client.send(frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))
        client.send(client.headers(1, [("x-late", "1")], end_stream=True))
        client.wait_for(RST_STREAM, 1)
        assert client.resets(1) == [STREAM_CLOSED]
        _raw_live(client, 3)  # the connection goes on
    finally:
        client.close()


def test_data_after_the_clients_own_reset_is_a_stream_error(policed: GrpcServer) -> None:
    """RFC 9113 5.1, DATA this time: after the client reset a stream, RST_STREAM STREAM_CLOSED;
    DATA in flight on a stream the server answered first is still dropped quietly."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request(STREAM_INFER)))
        client.send(frame(RST_STREAM, 0, 1, (8).to_bytes(4, "big")))
        client.send(frame(DATA, 0, 1, bytes(10)))
        client.wait_for(RST_STREAM, 1)
        assert client.resets(1) == [STREAM_CLOSED]
        client.send(client.headers(3, grpc_request("/inference.GRPCInferenceService/Nope")))
        client.wait_for(RST_STREAM, 3)
        client.send(frame(DATA, 0, 3, bytes(10)))
        _raw_live(client, 5)  # the connection goes on
        assert client.resets(3) == [NO_ERROR]
    finally:
        client.close()


def test_trailers_of_a_stream_answered_early_are_dropped(policed: GrpcServer) -> None:
    """A stream answered (and reset NO_ERROR) before the client ended it: its trailers,
    in flight, are dropped and the connection goes on (RFC 9113 5.1, 8.1)."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request("/inference.GRPCInferenceService/Nope")))
        client.wait_for(RST_STREAM, 1)
        assert client.resets(1) == [NO_ERROR]
        client.send(client.headers(1, [("x-trailer", "1")], end_stream=True))
        _raw_live(client, 3)
        assert not any(kind == 0x7 for kind, _, _, _ in client.frames)
    finally:
        client.close()


def test_a_request_without_scheme_is_reset(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        headers = [h for h in grpc_request(LIVE) if h[0] != ":scheme"]
        client.send(client.headers(1, headers), client.message(1))
        client.wait_for(RST_STREAM, 1)
        assert client.resets(1) == [PROTOCOL_ERROR]
        _raw_live(client, 3)  # the connection goes on
    finally:
        client.close()


@pytest.mark.parametrize("declared", ["4", "6", "100"])
def test_content_length_must_match_the_data(policed: GrpcServer, declared: str) -> None:
    """RFC 9113 8.1.1: a content-length other than the DATA's length is malformed (the
    message here is 5 bytes)."""
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request(LIVE, [("content-length", declared)])), client.message(1))
        client.wait_for(RST_STREAM, 1)
        assert client.resets(1) == [PROTOCOL_ERROR]
        _raw_live(client, 3)
    finally:
        client.close()


def test_a_matching_content_length_is_fine(policed: GrpcServer) -> None:
    client = RawH2(policed.port, timeout=5)
    try:
        client.send(client.headers(1, grpc_request(LIVE, [("content-length", "5")])), client.message(1))
        while not client.ended(1):
            assert client.read()
        assert client.resets(1) == []
    finally:
        client.close()


def test_other_clients_are_served_while_one_floods(policed: GrpcServer) -> None:
    """A tritonclient keeps calling while a raw client floods SETTINGS on another connection."""
    stop = threading.Event()
    answered: list[bool] = []

    def call() -> None:
        with grpcclient.InferenceServerClient(policed.url) as client:
            while not stop.is_set():
                answered.append(client.is_server_live())

    caller = threading.Thread(target=call)
    caller.start()
    try:
        for _ in range(5):
            test_settings_flood_gets_enhance_your_calm(policed)
    finally:
        stop.set()
        caller.join(10)
    assert answered and all(answered)


def test_the_reset_budget_refills_at_its_rate() -> None:
    """The token bucket behind the reset and SETTINGS budgets."""
    budget = Budget(3, 2.0, now=0.0)
    assert [budget.spend(0.0) for _ in range(4)] == [True, True, True, False]
    assert budget.spend(0.5)  # 0.5 s at 2 a second: one more
    assert not budget.spend(0.5)
    assert [budget.spend(100.0) for _ in range(4)] == [True, True, True, False]  # never above the burst
    assert all(Budget(0, 0.0, now=0.0).spend(0.0) for _ in range(10))  # burst 0: no limit


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"grpc_max_concurrent_streams": 0}, "--grpc-max-concurrent-streams must be between"),
        ({"grpc_http2_max_reset_rate": -1}, "--grpc-http2-max-reset-rate must not be negative"),
        ({"grpc_max_connection_idle": -5}, "--grpc-max-connection-idle must not be negative"),
    ],
)
def test_limits_out_of_range_are_clear_errors(options: dict[str, int], message: str) -> None:
    import tritonpy
    from tritonpy.grpc.frontend import check_limits

    with pytest.raises(ValueError, match=message):
        check_limits(tritonpy.ServerOptions(**options))  # type: ignore[arg-type]


def test_the_flags_reach_the_transport_config() -> None:
    from tritonpy.cli import build_parser, options_from_args
    from tritonpy.grpc.native import config_of

    flags = [
        "--grpc-max-concurrent-streams=50",
        "--grpc-http2-max-reset-burst=20",
        "--grpc-http2-max-reset-rate=5",
        "--grpc-max-connection-idle=1500",
        "--grpc-max-connection-age=60000",
        "--grpc-max-connection-age-grace=2000",
        "--grpc-max-connections=7",
    ]
    options = options_from_args(build_parser().parse_args(["serve", "--model-repository", "m", *flags]))
    assert options.grpc_max_connections == 7
    config = config_of(options)
    assert (config.max_concurrent_streams, config.reset_burst, config.reset_rate) == (50, 20, 5.0)
    assert (config.max_connection_idle, config.max_connection_age, config.max_connection_age_grace) == (
        1.5,
        60.0,
        2.0,
    )
