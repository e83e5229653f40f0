"""Outputs that stay on the instance's GPU when the requests' consumers want them there
(``RequestedOutput.device_id``: a client's CUDA shared-memory region, an ensemble step that
takes device inputs): each request gets its rows of the result in place, no copy to the host.

The decision and the hand-out run everywhere: on a CPU instance told that its device is
"GPU 0" (``state.gpu``), the result tensor in host memory stands in for the GPU's and goes the
same way (DLPack, rows per request). On a GPU (``gpu``): a KIND_GPU instance in the backend
harness and in an in-process ``tritonpy.Server``, alone and as an ensemble torch → torch.
Served over HTTP and gRPC into CUDA shared memory: test_device_outputs_served.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy
import tritonpy_backend_torch as backend
from torch_testmodels import OUT, Words, config, double_and_halve, io, save_script
from tritonpy_sdk import KDLCPU, InferenceRequest, RequestedOutput
from tritonpy_sdk import Tensor as SdkTensor
from tritonpy_sdk.testing import BackendHarness

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]


def _feeds(sizes: tuple[int, ...]) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    return [rng.normal(size=(n, 4)).astype(np.float32) for n in sizes]


def _tensor(x: np.ndarray[Any, Any], name: str = "INPUT__0") -> SdkTensor:
    return SdkTensor.from_numpy(name, x)


def _asking(request: InferenceRequest, *outputs: RequestedOutput) -> InferenceRequest:
    request.requested_outputs = list(outputs)
    return request


# -- everywhere ------------------------------------------------------------------------------


def test_a_cpu_instance_answers_on_the_host_whatever_is_wanted(tmp_path: Path) -> None:
    with BackendHarness(backend, double_and_halve(tmp_path / "m")) as h:
        state = h.instance.state
        assert state.gpu is None and not h.instance.device_inputs
        (x,) = _feeds((2,))
        request = _asking(h.request({"INPUT__0": x}), RequestedOutput(OUT, device_id=0))
        assert state.stays_on_device([request], OUT) == (False, True)
        (response,) = h.execute([request])
        tensor = response.outputs[OUT]
        assert tensor.device is None  # a plain host tensor, as before
        np.testing.assert_array_equal(tensor.data, x * 2)
        assert state.device_outputs == 0


def test_the_decision_per_batch_on_a_gpu_instance(tmp_path: Path) -> None:
    save_script(
        Words(),
        tmp_path / "w",
        config(
            [io("WORDS__0", "TYPE_STRING", [-1])],
            [io("UPPER__0", "TYPE_STRING", [-1]), io("LENGTHS__1", "TYPE_INT64", [-1])],
        ),
    )
    with (
        BackendHarness(backend, double_and_halve(tmp_path / "m")) as h,
        BackendHarness(backend, tmp_path / "w") as hw,
    ):
        state = h.instance.state
        state.gpu = 0  # what a KIND_GPU instance on GPU 0 has (the rest of the test needs no GPU)
        want0 = _asking(
            h.request({"INPUT__0": np.ones((1, 4), np.float32)}), RequestedOutput(OUT, device_id=0)
        )
        want1 = _asking(
            h.request({"INPUT__0": np.ones((1, 4), np.float32)}), RequestedOutput(OUT, device_id=1)
        )
        host = _asking(h.request({"INPUT__0": np.ones((1, 4), np.float32)}), RequestedOutput(OUT))
        every = h.request({"INPUT__0": np.ones((1, 4), np.float32)})  # no outputs named: all, on the host
        assert state.stays_on_device([want0, want0], OUT) == (True, False)  # never copied to the host
        assert state.stays_on_device([want0, host], OUT) == (True, True)  # mixed: both
        assert state.stays_on_device([want0, every], OUT) == (True, True)
        assert state.stays_on_device([host, want1], OUT) == (False, True)  # another GPU: the host
        assert state.stays_on_device([want0], "OUTPUT__1") == (False, True)  # not asked there
        wstate = hw.instance.state
        wstate.gpu = 0
        wants = _asking(
            hw.request({"WORDS__0": np.array([b"a"], object)}), RequestedOutput("UPPER__0", device_id=0)
        )
        assert wstate.stays_on_device([wants], "UPPER__0") == (False, True)  # strings: always the host


def test_a_mixed_batch_gets_rows_of_the_result_in_place_or_on_the_host(tmp_path: Path) -> None:
    """The whole hand-out on a CPU instance standing in for GPU 0: the result tensor is kept
    (its memory stands in for the GPU's), and each request that wants it there gets its rows
    of it in place; the others get host rows; OUTPUT__1 goes to the host for everyone."""
    with BackendHarness(backend, double_and_halve(tmp_path / "m")) as h:
        state = h.instance.state
        state.gpu = 0
        feeds = _feeds((2, 1, 3))
        wants = [RequestedOutput(OUT, device_id=0), RequestedOutput("OUTPUT__1")]
        requests = [
            _asking(h.request({"INPUT__0": feeds[0]}), *wants),
            _asking(h.request({"INPUT__0": feeds[1]}), RequestedOutput(OUT), RequestedOutput("OUTPUT__1")),
            _asking(h.request({"INPUT__0": feeds[2]}), *wants),
        ]
        responses = h.execute(requests)
        kept = [r.outputs[OUT].device for r in responses]
        assert kept[1] is None  # the host rows
        first, third = kept[0], kept[2]
        assert first is not None and third is not None
        assert (first.device_type, first.device_id, first.shape, third.shape) == (KDLCPU, 0, (2, 4), (3, 4))
        assert third.address == first.address + 3 * 4 * 4  # rows 3..5 of one result, in place
        for x, response in zip(feeds, responses):
            np.testing.assert_array_equal(response.outputs[OUT].data, x * 2)
            np.testing.assert_array_equal(response.outputs["OUTPUT__1"].data, x * 0.5)
            assert response.outputs["OUTPUT__1"].device is None
        assert state.device_outputs == 2 and state.said_on_device == {OUT}


# -- on a GPU --------------------------------------------------------------------------------


def _need_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")


@pytest.mark.gpu
def test_kind_gpu_outputs_stay_on_the_gpu_for_a_batch_that_wants_them_there(tmp_path: Path) -> None:
    _need_gpu()
    with BackendHarness(backend, double_and_halve(tmp_path / "m"), instance_kind="KIND_GPU") as h:
        state = h.instance.state
        assert state.gpu == 0, f"a KIND_GPU instance's GPU is torch's index 0, got {state.gpu!r}"
        feeds = _feeds((1, 3, 2))
        mixed = [RequestedOutput(OUT, device_id=0), RequestedOutput("OUTPUT__1")]
        requests = [_asking(h.request({"INPUT__0": x}), *mixed) for x in feeds]
        requests[1] = _asking(
            h.request({"INPUT__0": feeds[1]}), RequestedOutput(OUT), RequestedOutput("OUTPUT__1")
        )
        responses = h.execute(requests)
        where = [(r.outputs[OUT].memory_type, r.outputs["OUTPUT__1"].memory_type) for r in responses]
        assert where == [("GPU", "CPU"), ("CPU", "CPU"), ("GPU", "CPU")], f"memory types per request: {where}"
        for x, response in zip(feeds, responses):
            tensor = response.outputs[OUT]
            if tensor.is_device:
                # Read on the GPU where it lies, without the host: torch takes it through DLPack.
                on_gpu = torch.from_dlpack(tensor)
                assert on_gpu.device == torch.device("cuda", 0)
                torch.testing.assert_close(on_gpu.cpu(), torch.from_numpy(x * 2), rtol=0, atol=0)
            np.testing.assert_array_equal(tensor.data, x * 2)
            np.testing.assert_array_equal(response.outputs["OUTPUT__1"].data, x * 0.5)
        assert state.device_outputs == 2


def _gpu_repository(root: Path) -> Path:
    double_and_halve(root / "first", "KIND_GPU")
    double_and_halve(root / "second", "KIND_GPU")
    (root / "pipe" / "1").mkdir(parents=True)
    (root / "pipe" / "config.pbtxt").write_text(
        'name: "pipe"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        "ensemble_scheduling { step [ "
        '{ model_name: "first" model_version: -1 input_map { key: "INPUT__0" value: "IN" } '
        'output_map { key: "OUTPUT__0" value: "MID" } }, '
        '{ model_name: "second" model_version: -1 input_map { key: "INPUT__0" value: "MID" } '
        'output_map { key: "OUTPUT__0" value: "OUT" } } ] }\n'
    )
    return root


@pytest.mark.gpu
def test_in_process_a_kind_gpu_model_and_an_ensemble_keep_outputs_on_the_gpu(tmp_path: Path) -> None:
    _need_gpu()
    (x,) = _feeds((2,))
    with tritonpy.Server(model_repository=_gpu_repository(tmp_path)) as server:
        first = server.get_version("first").instances[0]
        second = server.get_version("second").instances[0]
        assert (first.kind, first.device_inputs) == ("KIND_GPU", True), f"{first}"
        asked = InferenceRequest("first", -1, {"INPUT__0": _tensor(x)}, [RequestedOutput(OUT, device_id=0)])
        out = server.infer(asked).outputs[OUT]
        assert out.is_device and out.device_id == 0, f"expected a device tensor on GPU 0, got {out!r}"
        np.testing.assert_array_equal(out.data, x * 2)
        plain = server.infer(InferenceRequest("first", -1, {"INPUT__0": _tensor(x)})).outputs[OUT]
        assert not plain.is_device  # nobody asked: the host, as always
        before = (first.state.device_outputs, second.state.device_outputs)
        # The ensemble: MID's only reader (second) takes device inputs on GPU 0, so first hands
        # it out there; OUT goes to the client on the host.
        result = server.infer(InferenceRequest("pipe", -1, {"IN": _tensor(x, "IN")}))
        np.testing.assert_array_equal(result.outputs["OUT"].data, x * 4)
        after = (first.state.device_outputs, second.state.device_outputs)
        assert after == (before[0] + 1, before[1]), f"device outputs (first, second): {before} -> {after}"
        # A client that wants OUT on GPU 0 too: nothing of the ensemble touches the host.
        kept = server.infer(
            InferenceRequest("pipe", -1, {"IN": _tensor(x, "IN")}, [RequestedOutput("OUT", device_id=0)])
        )
        assert kept.outputs["OUT"].is_device, f"{kept.outputs['OUT']!r}"
        np.testing.assert_array_equal(kept.outputs["OUT"].data, x * 4)
        assert (first.state.device_outputs, second.state.device_outputs) == (after[0] + 1, after[1] + 1)
