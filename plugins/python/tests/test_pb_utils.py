"""``triton_python_backend_utils`` without a server: types, codecs, config, shared memory."""

from __future__ import annotations

import ast
import gc
import json
import os
import socket
import sys
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._wire import INLINE_BYTES, Arena, FrameReader, Link

PB_UTILS = Path(pb_utils.__file__).parent


def test_the_stub_side_needs_only_the_standard_library_and_numpy() -> None:
    # Stubs may run in another environment (EXECUTION_ENV_PATH) where only numpy is installed.
    allowed = set(sys.stdlib_module_names) | {"numpy", "ml_dtypes", "triton_python_backend_utils"}
    found: set[str] = set()
    for path in PB_UTILS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    assert found - allowed == set()


def test_type_tables_match_triton() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb_utils.numpy_to_triton_type(np.int64) == pb_utils.TRITONSERVER_TYPE_INT64 == 9
    assert pb_utils.triton_to_numpy_type(pb_utils.TRITONSERVER_TYPE_BOOL) is np.bool_
    assert pb_utils.Tensor("s", np.array(["a", "b"])).triton_dtype() == pb_utils.TRITONSERVER_TYPE_BYTES
    # Triton's table, which model.py files iterate (its test_api model builds its I/O from it).
    assert list(pb_utils.TRITON_STRING_TO_NUMPY)[:2] == ["TYPE_BOOL", "TYPE_UINT8"]
    assert len(pb_utils.TRITON_STRING_TO_NUMPY) == 13
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_BOOL"] is bool
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_STRING"] is np.object_


def test_byte_tensor_round_trip() -> None:
    data = np.array([b"a", "\u00e9", b""], dtype=np.object_)
    encoded = pb_utils.serialize_byte_tensor(data)
    assert encoded is not None and encoded.dtype == np.uint8
    assert list(pb_utils.deserialize_bytes_tensor(encoded)) == [b"a", "\u00e9".encode(), b""]


def test_tensor_dlpack_round_trip() -> None:
    tensor = pb_utils.Tensor("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    back = pb_utils.Tensor.from_dlpack("y", tensor)
    np.testing.assert_array_equal(back.as_numpy(), tensor.as_numpy())
    assert back.name() == "y" and back.shape() == [2, 3] and back.is_cpu()
    with pytest.raises(pb_utils.TritonModelException):
        pb_utils.Tensor("s", np.array([b"x"], dtype=np.object_)).to_dlpack()


def test_bf16_tensors_cross_by_dlpack_not_numpy() -> None:
    """As in Triton: a BF16 tensor refuses ``as_numpy()`` and goes to and from a framework
    through DLPack (torch's bfloat16; numpy's own DLPack carries no bfloat16)."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.array([[1.5, -2.0, 3.25], [4.0, 5.0, 6.5]], dtype=ml_dtypes.bfloat16)
    tensor = pb_utils.Tensor("x", data)
    assert tensor.triton_dtype() == pb_utils.TRITONSERVER_TYPE_BF16
    with pytest.raises(pb_utils.TritonModelException, match="dtype is BF16 and cannot be converted to NumPy"):
        tensor.as_numpy()
    as_torch = torch.utils.dlpack.from_dlpack(tensor.to_dlpack())
    assert as_torch.dtype == torch.bfloat16
    assert as_torch.float().tolist() == data.astype(np.float32).tolist()

    # Back from torch: a capsule, a producer, a strided view, and no elements at all.
    back = pb_utils.Tensor.from_dlpack("y", torch.utils.dlpack.to_dlpack(as_torch * 2))
    assert back.triton_dtype() == pb_utils.TRITONSERVER_TYPE_BF16 and back.shape() == [2, 3]
    assert torch.from_dlpack(back).float().tolist() == (data.astype(np.float32) * 2).tolist()
    column = pb_utils.Tensor.from_dlpack("c", as_torch[:, 1])
    assert torch.from_dlpack(column).float().tolist() == [-2.0, 5.0]
    assert pb_utils.Tensor.from_dlpack("e", torch.zeros(0, 3, dtype=torch.bfloat16)).shape() == [0, 3]

    # The producer's memory is shared, and freed with the last tensor over it.
    source = torch.ones(4, dtype=torch.bfloat16)
    shared = pb_utils.Tensor.from_dlpack("s", source)
    source[0] = 7
    assert torch.from_dlpack(shared).float().tolist() == [7.0, 1.0, 1.0, 1.0]
    gone = weakref.ref(source)
    del source, shared, as_torch, back, column
    gc.collect()
    assert gone() is None


def test_a_bf16_capsule_of_ours_is_freed_once_imported() -> None:
    from triton_python_backend_utils import _dlpack

    ml_dtypes = pytest.importorskip("ml_dtypes")
    before = _dlpack.live_count()
    tensor = pb_utils.Tensor("x", np.ones(3, dtype=ml_dtypes.bfloat16))
    back = pb_utils.Tensor.from_dlpack("y", tensor.to_dlpack())
    assert _dlpack.live_count() == before + 1
    assert back.triton_dtype() == pb_utils.TRITONSERVER_TYPE_BF16
    del back
    gc.collect()
    assert _dlpack.live_count() == before


def test_parameters_a_model_sets_are_checked_as_triton_checks_them() -> None:
    """Triton's words, for a response's and a BLS request's parameters (NVIDIA's
    response_parameters model checks them)."""
    ok = pb_utils.InferenceResponse([], parameters={"b": True, "s": "x", "n": 5})
    assert json.loads(ok.parameters()) == {"b": True, "s": "x", "n": 5}
    assert pb_utils.InferenceResponse().parameters() == "{}"
    cases = {
        "Expect dict, got <class 'list'>": [],
        "Expect dict, got <class 'str'>": '{"a": 1}',
        "Expect parameters keys to have type str, found type <class 'int'>": {1: "x"},
        "Expect parameters values to have type bool/int/str, found type <class 'float'>": {"f": 0.5},
        "Expect parameters values to have type bool/int/str, found type <class 'NoneType'>": {"n": None},
        "Expect parameters values to have type bool/int/str, found type <class 'list'>": {"l": ["v"]},
    }
    for message, parameters in cases.items():
        with pytest.raises(pb_utils.TritonModelException) as raised:
            pb_utils.InferenceResponse([], parameters=parameters)  # type: ignore[arg-type]
        assert raised.value.message() == message
        with pytest.raises(pb_utils.TritonModelException) as raised:
            pb_utils.InferenceRequest(
                model_name="m", inputs=[], requested_output_names=[], parameters=parameters
            )  # type: ignore[arg-type]
        assert raised.value.message() == message


def test_arguments_of_the_wrong_type_are_refused_as_triton_s_binding_refuses_them() -> None:
    """NVIDIA's argument_validation model: TypeError for an argument of the wrong type,
    TritonModelException for a None among tensors and for an empty tensor name."""
    inputs = [pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))]
    request = {"model_name": "m", "inputs": inputs, "requested_output_names": ["o"]}
    type_errors: list[Any] = [
        lambda: pb_utils.InferenceRequest(**{**request, "inputs": None}),
        lambda: pb_utils.InferenceRequest(**{**request, "model_name": None}),
        lambda: pb_utils.InferenceRequest(**{**request, "requested_output_names": [None]}),
        lambda: pb_utils.InferenceRequest(**{**request, "requested_output_names": None}),
        lambda: pb_utils.InferenceRequest(**request, correlation_id=None),
        lambda: pb_utils.InferenceRequest(**request, request_id=None),
        lambda: pb_utils.InferenceRequest(**request, model_version=None),
        lambda: pb_utils.InferenceRequest(**request, flags=None),
        lambda: pb_utils.InferenceResponse(output_tensors=None),
        lambda: pb_utils.InferenceResponse([np.zeros(1)]),
        lambda: pb_utils.InferenceResponse([], error="no"),
        lambda: pb_utils.Tensor(None, np.asarray([1])),
        lambda: pb_utils.Tensor("OUTPUT0", None),
        lambda: pb_utils.Tensor("", None),
        lambda: pb_utils.Logger.log("x", None),
        lambda: pb_utils.Logger.log("x", 1),
        lambda: pb_utils.Logger.log_info(None),
        lambda: pb_utils.Logger.log_warn(None),
        lambda: pb_utils.Logger.log_error(None),
        lambda: pb_utils.Logger.log_verbose(None),
    ]
    # What Triton's binding requires: inputs, requested_output_names and model_name.
    type_errors += [
        lambda: pb_utils.InferenceRequest(inputs=[], requested_output_names=["o"]),
        lambda: pb_utils.InferenceRequest(model_name="m", requested_output_names=["o"]),
        lambda: pb_utils.InferenceRequest(model_name="m", inputs=[]),
    ]
    for call in type_errors:
        with pytest.raises(TypeError, match="incompatible function arguments"):
            call()
    model_errors: list[Any] = [
        lambda: pb_utils.InferenceRequest(**{**request, "inputs": [None]}),
        lambda: pb_utils.InferenceResponse(output_tensors=[None]),
        lambda: pb_utils.Tensor("", np.zeros(1)),
        lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None),
        lambda: pb_utils.Tensor.from_dlpack("", None),
    ]
    for call in model_errors:
        with pytest.raises(pb_utils.TritonModelException):
            call()
    # What Triton takes: empty lists, a str or int correlation id, tuples.
    assert pb_utils.InferenceRequest(requested_output_names=[], inputs=[], model_name="m")
    assert pb_utils.InferenceRequest(**request, correlation_id="id-5").correlation_id() == "id-5"
    assert pb_utils.InferenceResponse(output_tensors=[]).output_tensors() == []
    assert pb_utils.InferenceResponse(tuple(inputs)).output_tensors() == inputs


def test_model_config_completes_what_the_user_wrote() -> None:
    config = pb_utils.ModelConfig({"name": "m", "max_batch_size": 4, "input": [{"name": "X", "dims": []}]})
    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})  # no dims written: taken
    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
    config.set_dynamic_batching()
    config.set_model_transaction_policy({"decoupled": True})
    assert config.as_dict()["input"] == [{"name": "X", "dims": [2], "data_type": "TYPE_FP32"}]
    assert pb_utils.using_decoupled_model_transaction_policy(config.as_dict())
    config.set_max_batch_size(8)  # larger than written: Triton takes it
    assert config.as_dict()["max_batch_size"] == 8


#: What Triton's pb_utils.ModelConfig answers (its messages, checked against Triton 2.51).
MODEL_CONFIG_REFUSALS = [
    (
        lambda c: c.set_max_batch_size(2),
        "configuration specified max_batch_size 4, but in auto-complete-config function for model "
        "'m' specified max_batch_size 2",
    ),
    (
        lambda c: c.add_input({"name": "Y", "data_type": "TYPE_FP32", "dims": [1], "reshape": {}}),
        "input 'Y' in auto-complete-config function for model 'm' contains property other than "
        "'name', 'data_type', 'dims' and 'optional'.",
    ),
    (
        lambda c: c.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1], "optional": True}),
        "output 'Y' in auto-complete-config function for model 'm' contains property other than "
        "'name', 'data_type' and 'dims'.",
    ),
    (
        lambda c: c.add_input({"data_type": "TYPE_FP32", "dims": [1]}),
        "input in auto-complete-config function for model 'm' is missing 'name' property.",
    ),
    (
        lambda c: c.add_output({"name": "Y", "dims": [1]}),
        "output 'Y' in auto-complete-config function for model 'm' is missing 'data_type' property.",
    ),
    (
        lambda c: c.add_input({"name": "Y", "data_type": "TYPE_FP32"}),
        "input 'Y' in auto-complete-config function for model 'm' is missing 'dims' property.",
    ),
    (
        lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [3]}),
        "unable to load model 'm', configuration expects datatype TYPE_INT32 for input 'X', "
        "model provides TYPE_FP32",
    ),
    (
        lambda c: c.add_input({"name": "X", "data_type": "TYPE_INT32", "dims": [3]}),
        "model 'm', tensor 'X': the model expects dims [3] but the model configuration specifies dims [2]",
    ),
    (
        lambda c: c.add_input({"name": "X", "data_type": "TYPE_INT32", "dims": [2], "optional": True}),
        "model 'm', tensor 'X': the model expects optional True but the model configuration specifies "
        "optional False",
    ),
    (
        lambda c: c.set_model_transaction_policy({"decoupled": False, "other": 1}),
        "model transaction property in auto-complete-config function for model 'm' contains property "
        "other than 'decoupled'.",
    ),
    (
        lambda c: c.set_model_transaction_policy({"decoupled": True}),
        "trying to change decoupled property in auto-complete-config for model 'm', which is already "
        "set to 'False'.",
    ),
    (
        lambda c: c.set_dynamic_batching(),
        "Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config "
        "function for model 'm' tries to set scheduling_choice as 'dynamic_batching'",
    ),
]


@pytest.mark.parametrize(("change", "message"), MODEL_CONFIG_REFUSALS)
def test_model_config_refuses_as_triton_does(change: Any, message: str) -> None:
    written = {
        "name": "m",
        "max_batch_size": 4,
        "input": [{"name": "X", "data_type": "TYPE_INT32", "dims": [2], "optional": False}],
        "output": [],
        "model_transaction_policy": {"decoupled": False},
        "sequence_batching": {},
    }
    with pytest.raises(ValueError) as err:
        change(pb_utils.ModelConfig(written))
    assert str(err.value) == message


def test_sender_refuses_after_final() -> None:
    sent = []
    request = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    sender = pb_utils.InferenceResponseSender(lambda r, f: sent.append(f), request)
    sender.send(pb_utils.InferenceResponse())
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="closed"):
        sender.send(pb_utils.InferenceResponse())
    assert sent == [0, 1]


FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _received(sent: list[Any], decoupled: bool) -> Any:
    """A request as ``execute`` receives it, whose sender records what it sends."""
    request = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    request._make_sender = lambda r: pb_utils.InferenceResponseSender(
        lambda response, flags: sent.append((r, response, flags)), r, decoupled
    )
    return request


def test_a_sender_refuses_what_triton_s_refuses() -> None:
    """A model that is not decoupled sends one response (then FINAL, or with it); the
    error is raised in the model, in Triton's words (NVIDIA's response_sender test)."""
    sent: list[Any] = []
    sender = _received(sent, decoupled=False).get_response_sender()
    with pytest.raises(pb_utils.TritonModelException) as raised:
        sender.send(flags=FINAL)
    assert raised.value.message() == (
        "Unable to send response. Non-decoupled model cannot send complete final before sending a response."
    )
    sender.send(pb_utils.InferenceResponse())
    with pytest.raises(pb_utils.TritonModelException) as raised:
        sender.send(pb_utils.InferenceResponse())
    assert (
        raised.value.message()
        == "Unable to send response. Non-decoupled model cannot send more than one response."
    )
    sender.send(flags=FINAL)
    assert [flags for _, _, flags in sent] == [0, FINAL]
    decoupled = _received(sent, decoupled=True).get_response_sender()
    for _ in range(3):
        decoupled.send(pb_utils.InferenceResponse())
    decoupled.send(flags=FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        decoupled.send(pb_utils.InferenceResponse())


def test_what_execute_returns_is_checked_as_triton_checks_it() -> None:
    from triton_python_backend_utils._host import ContractError, check_responses

    sent: list[Any] = []
    requests = [_received(sent, decoupled=False) for _ in range(3)]
    answers = [pb_utils.InferenceResponse() for _ in requests]
    assert check_responses(answers, requests, "m_0", False) == answers  # the usual case
    with pytest.raises(
        ContractError, match="^Python model 'm_0' is using the decoupled mode and the execute"
    ):
        check_responses(answers, requests, "m_0", True)
    with pytest.raises(
        ContractError, match="^Expected an 'InferenceResponse' object in the execute function"
    ):
        check_responses([answers[0], "no", answers[2]], requests, "m_0", False)
    # A request left to its response sender (None in the list): the responses returned go
    # through the senders as each request's last, and a request answered neither way gets
    # an error rather than waiting for ever.
    requests = [_received(sent, decoupled=False) for _ in range(3)]
    requests[1].get_response_sender().send(pb_utils.InferenceResponse())
    sent.clear()
    assert check_responses([answers[0], None, None], requests, "m_0", False) is None
    assert [(r, response, flags) for r, response, flags in sent][0] == (requests[0], answers[0], FINAL)
    assert sent[1][0] is requests[2] and sent[1][2] == FINAL and sent[1][1].has_error()
    assert "returned None for a request it did not answer" in sent[1][1].error().message()
    requests[1].get_response_sender().send(flags=FINAL)  # its sender answers it, later
    # A response returned for a request whose sender already sent its one response.
    requests = [_received(sent, decoupled=False)]
    requests[0].get_response_sender().send(pb_utils.InferenceResponse())
    with pytest.raises(pb_utils.TritonModelException, match="cannot send more than one response"):
        check_responses([answers[0]], requests, "m_0", False)


def test_bls_outside_a_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Outside any server, whatever else runs in this process: a server with in-process
    # Python models that is still serving (another module's fixture) is the interpreter's
    # runtime until it stops (test_runtime_after_stop.py covers the stop).
    monkeypatch.setattr(_runtime, "_installed", _runtime._Unattached())
    request = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="needs a running server"):
        request.exec()


def test_bls_model_name_given_as_bytes_is_utf8() -> None:
    # NVIDIA's bls example passes model_name.as_numpy()[0], a numpy bytes_.
    for name in (b"add_sub", np.array([b"add_sub"], dtype=np.object_)[0], np.bytes_(b"add_sub")):
        request = pb_utils.InferenceRequest(model_name=name, inputs=[], requested_output_names=[])
        assert request.model_name() == "add_sub" and type(request.model_name()) is str
    named = pb_utils.InferenceRequest(model_name="h\u00e9".encode(), inputs=[], requested_output_names=[])
    assert named.model_name() == "h\u00e9"
    named = pb_utils.InferenceRequest(model_name=np.str_("add_sub"), inputs=[], requested_output_names=[])
    assert named.model_name() == "add_sub"


def test_arena_reuses_and_coalesces_blocks(tmp_path: Path) -> None:
    arena = Arena(str(tmp_path / "arena"), 1 << 16, create=True)
    a, b, c = (arena.alloc(1000) for _ in range(3))
    assert None not in (a, b, c) and len({a, b, c}) == 3
    assert arena.alloc(1 << 17) is None  # larger than the arena: the caller sends it inline
    for offset in (b, a, c):
        assert offset is not None
        arena.free(offset)
    assert arena.in_use == 0
    assert arena.alloc((1 << 16) - 64) == 0  # everything merged back into one free block
    os.unlink(arena.path)


def test_a_request_with_a_sender_is_freed_without_the_cyclic_gc() -> None:
    gc.disable()
    try:
        x = pb_utils.Tensor("X", np.ones(4))
        request = pb_utils.InferenceRequest(model_name="m", inputs=[x], requested_output_names=[])
        request._sender = pb_utils.InferenceResponseSender(lambda r, f: None, request)
        freed = weakref.ref(request)
        del request
        assert freed() is None
    finally:
        gc.enable()


def test_shared_memory_blocks_return_to_their_writer(tmp_path: Path) -> None:
    ours, theirs = socket.socketpair()
    p2c = Arena(str(tmp_path / "p2c"), 1 << 20, create=True)
    c2p = Arena(str(tmp_path / "c2p"), 1 << 20, create=True)
    server = Link(Connection(ours.detach()), mine=p2c, theirs=c2p)
    stub = Link(Connection(theirs.detach()), mine=c2p, theirs=p2c)
    try:
        big = np.arange(INLINE_BYTES, dtype=np.float32)  # 4 x INLINE_BYTES bytes: shared memory
        small = np.arange(4, dtype=np.int64)
        server.send({"op": "exec", "i": [server.put("A", "FP32", big), server.put("B", "INT64", small)]})
        descs = stub.recv()["i"]
        assert [d[3] for d in descs] == ["s", "i"]  # where: shared memory, inline
        assert p2c.in_use >= big.nbytes
        view = stub.get(descs[0]).reshape(64, -1)
        np.testing.assert_array_equal(stub.get(descs[1]), small)
        np.testing.assert_array_equal(view.reshape(-1), big)
        big[0] = -1  # the reader sees the writer's copy, not the caller's array
        assert view[0, 0] == 0
        stub.flush_releases()  # nothing to release while the reader holds a view
        del view
        stub.flush_releases()  # now the release travels back
        server.recv()
        assert p2c.in_use == 0
    finally:
        server.conn.close()
        stub.conn.close()


def test_a_model_exception_names_the_models_frames_only(tmp_path: Path) -> None:
    from triton_python_backend_utils._host import ModelHost, error_text

    model = tmp_path / "model.py"
    model.write_text(
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        return self.helper()\n"
        "    def helper(self):\n"
        "        raise ValueError('boom')\n"
    )
    host = ModelHost(model)
    host.initialize({"model_config": "{}"})
    with pytest.raises(ValueError) as raised:
        host.execute([])
    text = error_text(raised.value)
    head, frames = text.split("\n\nAt:\n")
    assert head == "ValueError: boom"
    # Innermost first; the host's own frames are left out (the test's frame is the caller's).
    assert frames.splitlines()[:2] == [f"  {model}(5): helper", f"  {model}(3): execute"]
    assert "_host.py" not in text


def test_the_rest_of_tritons_api_surface() -> None:
    # Triton's positional order: request_id, correlation_id, inputs, requested_output_names, model_name
    request = pb_utils.InferenceRequest("id-1", 7, [pb_utils.Tensor("X", np.ones(2))], ["Y"], "target")
    assert (request.request_id(), request.correlation_id(), request.model_name()) == ("id-1", 7, "target")
    assert request.requested_output_names() == ["Y"] and request.trace().get_context() is None
    request.set_flags(pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START)
    assert request.flags() == 1
    memory = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)
    assert pb_utils.InferenceRequest(
        model_name="m", inputs=[], requested_output_names=[], preferred_memory=memory
    )
    assert pb_utils.Logger.INFO == pb_utils.Logger.LogLevel.INFO == pb_utils.LogLevel.INFO
    assert pb_utils.MetricFamily.GAUGE == pb_utils.MetricKind.GAUGE


def _iterator(inbox: Any, cancelled: list[bool], timeout: float | None = None) -> Any:
    from triton_python_backend_utils._bls import ResponseIterator

    request = pb_utils.InferenceRequest(model_name="target", inputs=[], requested_output_names=[])
    return ResponseIterator(
        inbox,
        lambda r: pb_utils.InferenceResponse(r),
        request,
        timeout,
        lambda: cancelled.append(True),
        lambda: None,
    )


def test_response_iterator_plain_and_async() -> None:
    import asyncio
    import threading

    from triton_python_backend_utils._bls import BlsInbox, first_response_async

    cancelled: list[bool] = []
    inbox = BlsInbox()
    for flags in (0, 0, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL):
        inbox.put(([pb_utils.Tensor("Y", np.ones(1))], flags))
    assert len(list(_iterator(inbox, cancelled))) == 3 and not cancelled

    async def scenario() -> tuple[int, int]:
        inbox = BlsInbox(asyncio.get_running_loop())
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        sender = threading.Timer(0.05, lambda: [inbox.put((None, 0)), inbox.put((None, final))])
        sender.start()
        seen = [r async for r in _iterator(inbox, cancelled)]  # the loop keeps running meanwhile
        sender.join()
        inbox = BlsInbox(asyncio.get_running_loop())
        threading.Timer(0.05, inbox.put, [([pb_utils.Tensor("Y", np.ones(1))], final)]).start()
        one = await first_response_async(_iterator(inbox, cancelled))
        return len(seen), len(one.output_tensors())

    assert asyncio.run(scenario()) == (2, 1) and not cancelled


def test_a_finished_response_iterator_iterates_again_from_the_start() -> None:
    """As Triton's (NVIDIA's bls model, test_response_iterator): the responses are kept;
    a for loop over a finished iterator yields them all again, and one broken off midway
    is resumed where it stopped."""
    from triton_python_backend_utils._bls import BlsInbox

    inbox = BlsInbox()
    final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    for i in range(4):
        inbox.put(([pb_utils.Tensor("OUT", np.array([i], np.int32))], 0))
    inbox.put((None, final))  # the empty last response, as NVIDIA's square model sends it
    responses = _iterator(inbox, [])

    def values(iterable: Any) -> list[Any]:
        return [r.output_tensors()[0].as_numpy()[0] if r.output_tensors() else None for r in iterable]

    assert values([next(responses)]) == [0]
    assert values(responses) == [1, 2, 3, None]  # the rest
    assert values(responses) == [0, 1, 2, 3, None]  # again, from the start
    for count, _ in enumerate(responses, 1):
        if count == 2:
            break
    assert values([next(responses)]) == [2]
    assert values(responses) == [3, None]  # resumed
    with pytest.raises(StopIteration):
        next(responses)


def test_response_iterator_timeout_and_cancel() -> None:
    from triton_python_backend_utils._bls import BlsInbox

    cancelled: list[bool] = []
    responses = _iterator(BlsInbox(), cancelled, timeout=0.05)
    (only,) = list(responses)
    assert only.has_error() and "got no response within 0.05 s" in only.error().message()
    assert cancelled == [True]
    cancelled.clear()
    inbox = BlsInbox()
    inbox.put((None, 0))
    responses = _iterator(inbox, cancelled)
    next(responses)
    responses.cancel()
    assert cancelled == [True]
    del responses  # dropped before its end: cancelled (again)
    assert cancelled == [True, True]


def test_a_full_dev_shm_sends_tensors_inline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages are reserved before their first write: no room means inline, never SIGBUS."""
    import errno

    ours, theirs = socket.socketpair()
    mine = Arena(str(tmp_path / "mine"), 16 << 20, create=True)
    peer = Arena(str(tmp_path / "peer"), 1 << 20, create=True)
    link = Link(Connection(ours.detach()), mine=mine, theirs=peer)
    try:
        big = np.ones(1 << 20, np.float32)  # 4 MiB

        def full(fd: int, offset: int, length: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "posix_fallocate", full)
        assert link.put("X", "FP32", big)[3] == "i"  # inline: the arena could not get pages
        assert mine.in_use == 0
        monkeypatch.undo()
        desc = link.put("X", "FP32", big)
        assert desc[3] == "s" and mine.in_use >= big.nbytes  # room again: shared memory
        assert os.stat(mine.path).st_blocks * 512 >= big.nbytes  # its pages are reserved
    finally:
        link.conn.close()
        theirs.close()


def test_frame_reader_reads_what_the_link_sends_without_blocking(tmp_path: Path) -> None:
    """The event loop's reader of a stub: whole messages however the bytes arrive
    (several in one read, one split across reads, one larger than a read), releases
    applied, an empty socket never blocks, and the peer's close is told apart."""
    ours, theirs = socket.socketpair()
    p2c = Arena(str(tmp_path / "p2c"), 1 << 20, create=True)
    c2p = Arena(str(tmp_path / "c2p"), 1 << 20, create=True)
    server = Link(Connection(os.dup(ours.fileno())), mine=p2c, theirs=c2p)
    stub = Link(Connection(theirs.detach()), mine=c2p, theirs=p2c)
    reader = FrameReader(ours, chunk=64)
    try:
        assert reader.read() == []  # nothing there: no wait
        for i in range(3):
            stub.send({"op": "log", "i": i})
        got: list[dict[str, Any]] = []
        while len(got) < 3:
            messages = reader.read()
            assert messages is not None
            got += messages
        assert [m["i"] for m in got] == [0, 1, 2]

        large = bytes(range(256)) * 64  # 16 KiB: many 64-byte reads at first
        stub.send({"op": "send", "r": large})
        got = []
        while not got:
            messages = reader.read()
            assert messages is not None
            got += messages
        assert got == [{"op": "send", "r": large}]

        offset = p2c.alloc(128)
        assert offset is not None and p2c.in_use
        stub._releases.append(offset)  # a release riding on the stub's next message
        stub.send({"op": "done", "b": 1})
        got = []
        while not got:
            messages = reader.read()
            assert messages is not None
            got += [server.take_message(m) for m in messages]
        assert got == [{"op": "done", "b": 1}]
        assert p2c.in_use == 0

        stub.conn.close()
        assert reader.read() is None  # the stub is gone
    finally:
        server.conn.close()
        ours.close()
