"""A GPU instance's inputs and outputs on their way between host and device: each request's
rows copied straight into one device tensor (one call), results copied back asynchronously
into pinned memory on the instance's stream, every source held until that stream is synchronised.

The copy step itself is checked on any host with the CPU as the 'device'; the rest needs a GPU
and is marked ``gpu``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy_backend_torch as backend
from torch import Tensor, nn
from torch_testmodels import Raises, config, io, save_script
from tritonpy_sdk import TritonError
from tritonpy_sdk.testing import BackendHarness

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
]

ROW = 1024  # floats per row: 4 KiB


class Double(nn.Module):
    """Exact in float32: any mix-up of rows between requests or batches shows."""

    def forward(self, x: Tensor) -> Tensor:
        return x * 2.0


def _double(folder: Path, max_batch: int = 64) -> Path:
    save_script(
        Double(),
        folder,
        config([io("INPUT__0", "TYPE_FP32", [ROW])], [io("OUTPUT__0", "TYPE_FP32", [ROW])], max_batch),
    )
    return folder


def _feeds(sizes: tuple[int, ...], seed: int = 0) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, ROW)).astype(np.float32) for n in sizes]


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach_copy", "copy_per_request"])
def test_a_batch_is_copied_row_exact_from_each_request_into_one_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, foreach: bool
) -> None:
    """The copy step alone, on this host (the 'device' is the CPU): each request's rows land
    in order, whatever their memory layout, and every source stays referenced for the sync.
    Without ``torch._foreach_copy_`` (older torch) one copy per request does the same."""
    if not foreach:
        monkeypatch.delattr(torch, "_foreach_copy_", raising=False)
    feeds = _feeds((2, 2, 1, 3, 4))
    feeds[3] = np.asfortranarray(feeds[3])  # not C-contiguous
    feeds[4] = np.frombuffer(feeds[4].tobytes(), np.float32).reshape(4, ROW)  # read-only, as a body
    with BackendHarness(backend, _double(tmp_path / "m")) as h:
        state = h.instance.state
        requests = [h.request({"INPUT__0": x}) for x in feeds]
        staged: list[Any] = []
        value = state._to_device(state.inputs[0], requests, staged)
        assert value.shape == (12, ROW)
        np.testing.assert_array_equal(value.numpy(), np.concatenate(feeds))
        assert len(staged) == len(feeds)
        staged.clear()
        (one,) = [h.request({"INPUT__0": feeds[1]})]
        np.testing.assert_array_equal(state._to_device(state.inputs[0], [one], staged).numpy(), feeds[1])
        assert len(staged) == 1


def test_a_batch_with_mismatched_shapes_is_refused_before_any_copy(tmp_path: Path) -> None:
    with BackendHarness(backend, _double(tmp_path / "m")) as h:
        state = h.instance.state
        requests = [h.request({"INPUT__0": x}) for x in _feeds((1, 2))]
        requests[1].inputs["INPUT__0"].data = np.zeros((2, ROW // 2), np.float32)
        staged: list[Any] = []
        with pytest.raises(TritonError, match="cannot batch input 'INPUT__0'"):
            state._to_device(state.inputs[0], requests, staged)
        assert staged == []


# -- on a GPU --------------------------------------------------------------------------------------


def _needs_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")


@pytest.mark.gpu
def test_kind_gpu_batches_come_back_exact_in_pinned_memory(tmp_path: Path) -> None:
    _needs_gpu()
    feeds = _feeds((1, 3, 2, 5, 1))
    feeds[2] = np.asfortranarray(feeds[2])
    with BackendHarness(backend, _double(tmp_path / "m"), instance_kind="KIND_GPU") as h:
        assert h.instance.state.program.device == torch.device("cuda", 0)
        responses = h.execute([h.request({"INPUT__0": x}) for x in feeds])
        for x, response in zip(feeds, responses):
            out = response.outputs["OUTPUT__0"].data
            np.testing.assert_array_equal(out, x * 2)
            # Copied back into page-locked memory (torch pins a non-blocking copy's target).
            assert torch.from_numpy(out).is_pinned()
        (single,) = h.execute([h.request({"INPUT__0": feeds[3]})])
        np.testing.assert_array_equal(single.outputs["OUTPUT__0"].data, feeds[3] * 2)


@pytest.mark.gpu
def test_two_gpu_instances_sharing_the_pinned_pool_each_read_their_own_inputs(tmp_path: Path) -> None:
    """Two instances executing at once on one GPU, batches of 8 MiB, never see each other's rows."""
    _needs_gpu()
    folder = _double(tmp_path / "m")
    harnesses = [BackendHarness(backend, folder, instance_kind="KIND_GPU").start() for _ in range(2)]
    errors: list[str] = []

    def drive(h: BackendHarness, seed: int) -> None:
        for round_ in range(40):
            feeds = _feeds((256, 256, 512, 1024), seed=seed * 1000 + round_)
            for x, response in zip(feeds, h.execute([h.request({"INPUT__0": x}) for x in feeds])):
                if not np.array_equal(response.outputs["OUTPUT__0"].data, x * 2):
                    errors.append(f"instance {seed} round {round_}: wrong rows")

    try:
        threads = [threading.Thread(target=drive, args=(h, i)) for i, h in enumerate(harnesses)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    finally:
        for h in harnesses:
            h.close()
    assert errors == []


@pytest.mark.gpu
def test_a_failing_gpu_forward_answers_and_the_next_execution_is_exact(tmp_path: Path) -> None:
    _needs_gpu()
    save_script(
        Raises(),
        tmp_path / "r",
        config([io("INPUT__0", "TYPE_FP32", [ROW])], [io("OUTPUT__0", "TYPE_FP32", [ROW])], 8),
    )
    with BackendHarness(backend, tmp_path / "r", instance_kind="KIND_GPU") as h:
        with pytest.raises(TritonError, match="only non-positive inputs"):
            h.infer({"INPUT__0": np.ones((2, ROW), np.float32)})
        x = -np.abs(_feeds((3,))[0])
        np.testing.assert_array_equal(h.infer({"INPUT__0": x})["OUTPUT__0"], -x)
