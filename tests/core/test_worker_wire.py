"""tritonpy.workers.wire and .control: the messages between a front-end worker and its core.

Both ends of a real link (two ``Link``s over a socketpair on one loop) and a real
control server on a Unix socket; the served behaviour is in
tests/integration/test_frontend_workers.py.
"""

from __future__ import annotations

import asyncio
import gc
import marshal
import socket
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tritonpy.ipc.link import Link
from tritonpy.workers import wire
from tritonpy.workers.control import CORE_GONE, ControlClient, ControlServer
from tritonpy_sdk import (
    RESPONSE_COMPLETE_FINAL,
    DataType,
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    Tensor,
    TritonError,
)


async def _pair() -> tuple[Link, Link, list[bytes], list[bytes]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    got_a: list[bytes] = []
    got_b: list[bytes] = []
    link_a, link_b = await asyncio.gather(Link.open(a, got_a.extend), Link.open(b, got_b.extend))
    return link_a, link_b, got_a, got_b


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


def _request() -> InferenceRequest:
    big = np.arange(4096, dtype=np.float32).reshape(1, 4096)  # 16 KiB: through the arena
    return InferenceRequest(
        "m",
        3,
        {
            "SMALL": Tensor("SMALL", np.arange(16, dtype=np.int32).reshape(1, 16), DataType.INT32),
            "BIG": Tensor("BIG", big, DataType.FP32),
            "TEXT": Tensor("TEXT", np.array([b"a", b"\x00bc"], dtype=object), DataType.BYTES),
            "SCALAR": Tensor("SCALAR", np.array(True), DataType.BOOL),
        },
        [RequestedOutput("OUT", {"classification": 2}), RequestedOutput("OTHER")],
        "id-1",
        {"custom": "x", "n": 7, "f": 0.5, "b": True},
        "corr-9",
        1,
        2,
        5000,
    )


def test_a_request_crosses_with_every_field_and_its_tensors() -> None:
    async def main() -> None:
        worker, core, _, got = await _pair()
        sent = _request()
        sent.trace_context = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        worker.send(*wire.encode_request(worker, 17, wire.STREAM, "no decoupled here", sent))
        await _until(lambda: bool(got))
        assert worker.mine.in_use > 0  # the big input went through the arena
        rid, mode, refusal, request = wire.decode_request(
            core, wire.Releaser(core, asyncio.get_running_loop()), got[0]
        )
        assert (rid, mode, refusal) == (17, wire.STREAM, "no decoupled here")
        assert (request.model_name, request.model_version, request.id) == ("m", 3, "id-1")
        assert request.trace_context == sent.trace_context  # a client's traceparent
        assert request.parameters == {"custom": "x", "n": 7, "f": 0.5, "b": True}
        assert (request.correlation_id, request.flags, request.priority, request.timeout_us) == (
            "corr-9",
            1,
            2,
            5000,
        )
        assert [(o.name, o.parameters) for o in request.requested_outputs] == [
            ("OUT", {"classification": 2}),
            ("OTHER", {}),
        ]
        for name, tensor in sent.inputs.items():
            assert request.inputs[name].datatype is tensor.datatype
            assert request.inputs[name].data.shape == tensor.data.shape
            assert request.inputs[name].data.tolist() == tensor.data.tolist()
        # The arena block is given back only once the last view of the input is gone.
        view = request.inputs["BIG"].data[0, 10:20]
        del request
        gc.collect()
        await asyncio.sleep(0.05)
        assert worker.mine.in_use > 0
        assert view[0] == 10.0
        del view
        gc.collect()
        await _until(lambda: worker.mine.in_use == 0)
        worker.close()
        core.close()

    asyncio.run(main())


def test_answers_carry_outputs_errors_flags_and_refusals() -> None:
    async def main() -> None:
        worker, core, got, _ = await _pair()
        release = wire.Releaser(worker, asyncio.get_running_loop())
        out = np.ones((2, 1024), dtype=np.int64)  # 16 KiB
        response = InferenceResponse(
            {"OUT": Tensor("OUT", out, DataType.INT64)}, None, {"p": "q"}, "m", 3, "id-1"
        )
        core.send(*wire.encode_answer(core, 5, 0, response))
        core.send(*wire.encode_answer(core, 5, RESPONSE_COMPLETE_FINAL, None))
        failed = InferenceResponse.from_error(TritonError.invalid_arg("bad shape"))
        core.send(*wire.encode_answer(core, 6, RESPONSE_COMPLETE_FINAL, failed))
        core.send(*wire.encode_refusal(7, TritonError.not_found("no model")))
        await _until(lambda: len(got) == 4)
        rid, flags, what, body = wire.decode_answer(worker, release, got[0])
        assert (rid, flags, what) == (5, 0, wire.RESPONSE)
        assert isinstance(body, InferenceResponse)
        assert (body.model_name, body.model_version, body.id, body.parameters) == ("m", 3, "id-1", {"p": "q"})
        assert body.outputs["OUT"].data.tolist() == out.tolist()
        assert wire.decode_answer(worker, release, got[1]) == (
            5,
            RESPONSE_COMPLETE_FINAL,
            wire.FLAGS_ONLY,
            None,
        )
        _, _, what, body = wire.decode_answer(worker, release, got[2])
        assert what == wire.RESPONSE and isinstance(body, InferenceResponse) and body.error is not None
        assert (body.error.code, body.error.message) == (ErrorCode.INVALID_ARG, "bad shape")
        _, flags, what, body = wire.decode_answer(worker, release, got[3])
        assert (flags, what) == (RESPONSE_COMPLETE_FINAL, wire.REFUSED)
        assert isinstance(body, TritonError) and (body.code, body.message) == (
            ErrorCode.NOT_FOUND,
            "no model",
        )
        worker.close()
        core.close()

    asyncio.run(main())


def test_a_parameter_no_protocol_carries_is_an_error_response_not_a_crash() -> None:
    async def main() -> None:
        worker, core, got, _ = await _pair()
        response = InferenceResponse({}, None, {"odd": object()}, "m", 1)  # type: ignore[dict-item]
        core.send(*wire.encode_answer(core, 1, RESPONSE_COMPLETE_FINAL, response))
        await _until(lambda: bool(got))
        _, _, _, body = wire.decode_answer(worker, wire.Releaser(worker, asyncio.get_running_loop()), got[0])
        assert isinstance(body, InferenceResponse) and body.error is not None
        assert body.error.code is ErrorCode.INTERNAL and "cannot be sent" in body.error.message
        worker.close()
        core.close()

    asyncio.run(main())


def test_a_full_arena_sends_data_inline() -> None:
    async def main() -> None:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        got: list[bytes] = []
        worker, core = await asyncio.gather(
            Link.open(a, lambda f: None, arena_bytes=8192), Link.open(b, got.extend)
        )
        request = InferenceRequest(
            "m", 1, {"X": Tensor("X", np.zeros(4096, dtype=np.float32), DataType.FP32)}
        )
        worker.send(*wire.encode_request(worker, 1, wire.SINGLE, None, request))
        await _until(lambda: bool(got))
        assert worker.mine.in_use == 0  # 16 KiB does not fit an 8 KiB arena: inline
        _, _, _, decoded = wire.decode_request(core, wire.Releaser(core, asyncio.get_running_loop()), got[0])
        assert decoded.inputs["X"].data.shape == (4096,)
        worker.close()
        core.close()

    asyncio.run(main())


# -- control calls ----------------------------------------------------------------------------


@pytest.fixture
def control() -> Any:
    def fail(code: str) -> None:
        if code == "triton":
            raise TritonError("already there", ErrorCode.ALREADY_EXISTS)
        raise RuntimeError("a bug")

    server = ControlServer({"add": lambda a, b: a + b, "fail": fail})
    yield server
    server.close()


def test_control_calls_answer_from_any_thread_and_keep_error_codes(control: ControlServer) -> None:
    client = ControlClient(control.path, 0)
    assert client.call("add", 2, 3) == 5
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda i=i: results.append(client.call("add", i, 1))) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(1, 9))
    with pytest.raises(TritonError) as caught:
        client.call("fail", "triton")
    assert (caught.value.code, caught.value.message) == (ErrorCode.ALREADY_EXISTS, "already there")
    with pytest.raises(TritonError) as caught:
        client.call("fail", "bug")
    assert caught.value.code is ErrorCode.INTERNAL and "RuntimeError: a bug" in caught.value.message
    with pytest.raises(TritonError) as caught:
        client.call("nosuch")
    assert caught.value.code is ErrorCode.INTERNAL and "nosuch" in caught.value.message
    client.close()


def test_broadcasts_are_applied_before_they_return_and_a_gone_core_is_unavailable(
    control: ControlServer,
) -> None:
    seen: list[Any] = []
    gone = threading.Event()
    clients = [ControlClient(control.path, i) for i in range(2)]
    for c in clients:
        threading.Thread(target=c.receive_broadcasts, args=(seen.append, gone.set), daemon=True).start()
    for _ in range(500):
        if len(control._receivers) == 2:
            break
        threading.Event().wait(0.01)
    control.broadcast(("shm_forget", "system", "r1"))
    assert seen == [("shm_forget", "system", "r1")] * 2  # both applied it before broadcast returned
    control.close()
    assert gone.wait(5)
    with pytest.raises(TritonError) as caught:
        clients[0].call("add", 1, 1)
    assert (caught.value.code, caught.value.message) == (ErrorCode.UNAVAILABLE, CORE_GONE)
    for c in clients:
        c.close()


def test_inline_data_that_does_not_fit_its_shape_is_the_codecs_error() -> None:
    async def main() -> None:
        worker, core, _, _ = await _pair()
        release = wire.Releaser(core, asyncio.get_running_loop())
        with pytest.raises(TritonError, match="input byte size mismatch for input 'X'"):
            wire._tensor_in(core, release, ("X", "INT32", (2,), -1, b"\x00" * 4))
        fp16 = wire._tensor_in(core, release, ("B", "FP16", (2, 1), -1, b"\x00\x3c\x00\x40"))
        assert fp16.data.tolist() == [[1.0], [2.0]]
        worker.close()
        core.close()

    asyncio.run(main())


def test_small_tensors_decode_and_encode_exactly_as_tensor_in_and_tensor_out_do() -> None:
    """``decode_request`` and ``encode_answer`` handle small fixed-size tensors themselves
    (the common case, without a call per tensor); every other tensor goes through
    ``_tensor_in``/``_tensor_out``. Both give the same tensors and the same frames."""

    async def main() -> None:
        worker, core, _, _ = await _pair()
        release = wire.Releaser(core, asyncio.get_running_loop())
        tensors = [
            Tensor("VEC", np.arange(16, dtype=np.float32), DataType.FP32),
            Tensor("MAT", np.arange(6, dtype=np.int64).reshape(2, 3), DataType.INT64),
            Tensor("SCALAR", np.array(True), DataType.BOOL),
            Tensor("EMPTY", np.zeros((0, 4), dtype=np.uint8), DataType.UINT8),
            Tensor("HALF", np.ones((1, 2), dtype=np.float16), DataType.FP16),
            Tensor("TEXT", np.array([b"a", b"bc"], dtype=object), DataType.BYTES),
            Tensor("BIG", np.ones((2, 1024), dtype=np.float32), DataType.FP32),  # the arena
            Tensor("SLICED", np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1], DataType.INT32),
        ]

        def same(a: Tensor, b: Tensor) -> None:
            assert (type(a), a.name, a.datatype, type(a.data), a.data.dtype, a.data.shape) == (
                type(b),
                b.name,
                b.datatype,
                type(b.data),
                b.data.dtype,
                b.data.shape,
            )
            assert a.data.flags.writeable == b.data.flags.writeable
            assert a.data.tolist() == b.data.tolist()

        items = [wire._tensor_out(worker, t) for t in tensors]
        fields = (1, wire.SINGLE, None, "m", 1, "", {}, "", 0, 0, 0, tuple(items), (), "")
        _, _, _, request = wire.decode_request(core, release, b"".join(wire._dumps(wire.INFER, fields)))
        assert list(request.inputs) == [t.name for t in tensors]
        for item in items:
            same(request.inputs[item[0]], wire._tensor_in(core, release, item))

        # Inline data that does not fit its shape, or an unknown type: the same error.
        for bad in (("X", "INT32", (2,), -1, b"\x00" * 4), ("X", "FP99", (1,), -1, b"\x00" * 4)):
            with pytest.raises(Exception) as direct:
                wire._tensor_in(core, release, bad)
            frame = b"".join(wire._dumps(wire.INFER, fields[:11] + ((bad,), (), "")))
            with pytest.raises(type(direct.value)) as decoded:
                wire.decode_request(core, release, frame)
            assert str(decoded.value) == str(direct.value)

        small = [t for t in tensors if t.name != "BIG"]  # the arena's offsets differ per call
        response = InferenceResponse({t.name: t for t in small}, None, {"p": 1}, "m", 2, "id")
        expected = wire._dumps(
            wire.ANSWER,
            (
                4,
                RESPONSE_COMPLETE_FINAL,
                wire.RESPONSE,
                ("m", 2, "id", {"p": 1}, tuple(wire._tensor_out(core, t) for t in small), None),
            ),
        )
        kind, payload = wire.encode_answer(core, 4, RESPONSE_COMPLETE_FINAL, response)
        # The same values (marshal's bytes may differ in its reference flags only).
        assert (kind, marshal.loads(payload)) == (expected[0], marshal.loads(expected[1]))
        big = InferenceResponse({"BIG": tensors[6]}, None, {}, "m", 2, "id")
        frame = wire.encode_answer(core, 4, RESPONSE_COMPLETE_FINAL, big)
        _, _, _, body = wire.decode_answer(
            worker, wire.Releaser(worker, asyncio.get_running_loop()), b"".join(frame)
        )
        assert core.mine.in_use > 0  # through the arena, as ``_tensor_out`` puts it
        assert isinstance(body, InferenceResponse)
        assert body.outputs["BIG"].data.tolist() == tensors[6].data.tolist()
        worker.close()
        core.close()

    asyncio.run(main())


def test_a_stubs_answer_goes_to_its_worker_on_the_loops_next_turn() -> None:
    """Answered on the loop's thread (a stub's answer is read there), the answer frame is
    sent a turn later: the model's next queued request is sent before it."""
    import subprocess

    from tritonpy.workers.pool import WorkerPool, _Worker

    response = InferenceResponse({"Y": Tensor("Y", np.arange(3, dtype=np.int32), DataType.INT32)})

    async def main() -> None:
        link_a, link_b, _, got_b = await _pair()
        loop = asyncio.get_running_loop()
        # Only the answering methods, which need the loop: no sockets bound, no workers.
        pool = WorkerPool.__new__(WorkerPool)
        pool._loop = loop
        worker = _Worker(0, subprocess.Popen(["true"]), loop.create_future(), link=link_a)
        answers = (
            lambda: pool._one(worker, 7, response),
            lambda: pool._answer(worker, 7, response, RESPONSE_COMPLETE_FINAL),
        )
        for answer in answers:
            worker.inflight[7] = InferenceRequest(model_name="m", model_version=None, inputs={})
            answer()
            assert 7 in worker.inflight  # not delivered yet
            await asyncio.sleep(0)
            assert 7 not in worker.inflight
            for _ in range(100):
                if got_b:
                    break
                await asyncio.sleep(0.01)
            assert got_b.pop(0)[0] == wire.ANSWER
        worker.process.wait()
        link_a.close()
        link_b.close()

    asyncio.run(main())
