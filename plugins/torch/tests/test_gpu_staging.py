"""A GPU instance's inputs and outputs on their way through host memory: gathered into the
server's pinned pool (in pieces for a large batch), copied up and back asynchronously on the
instance's stream, and the staging buffers held until that stream is synchronised.

The gathering itself is checked on any host with the pool's logic over pageable memory (the
device copy is then a CPU copy); the rest needs a GPU and is marked ``gpu``."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy_backend_torch as backend
import tritonpy_backend_torch._instance as instance_module
from torch import Tensor, nn
from torch_testmodels import Raises, config, io, save_script
from tritonpy.memory import PinnedPool, host_allocator
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


@pytest.mark.parametrize("piece", [0, 3 * ROW * 4, 1 << 30])
def test_a_batch_is_staged_whole_or_in_pieces_of_whole_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int
) -> None:
    """The staging step alone, on this host: the core's pool logic over pageable memory, and a
    CPU 'device' (the copies up are CPU copies). Pieces of 3 rows split the batch 2+2 | 1+3 | 4."""
    monkeypatch.setattr(instance_module, "STAGE_PIECE_BYTES", piece)
    pool = PinnedPool(host_allocator(), 64 << 20)
    feeds = _feeds((2, 2, 1, 3, 4))
    feeds[3] = np.asfortranarray(feeds[3])  # not C-contiguous: copied by numpy, not as bytes
    feeds[4] = np.frombuffer(feeds[4].tobytes(), np.float32).reshape(4, ROW)  # read-only, as a body
    with BackendHarness(backend, _double(tmp_path / "m")) as h:
        state = h.instance.state
        requests = [h.request({"INPUT__0": x}) for x in feeds]
        staged: list[Any] = []
        value = state._to_device(state.inputs[0], requests, pool.allocate, staged)
        assert value.shape == (12, ROW)
        np.testing.assert_array_equal(value.numpy(), np.concatenate(feeds))
        # One buffer for the whole batch, held (and counted as in use) until released.
        assert len(staged) == 1 and staged[0].shape == (12, ROW)
        assert pool.used_bytes >= 12 * ROW * 4
        del value
        staged.clear()
        gc.collect()
        assert pool.used_bytes == 0


def test_without_a_pinned_pool_a_batch_is_staged_in_pageable_memory(tmp_path: Path) -> None:
    feeds = _feeds((1, 3))
    with BackendHarness(backend, _double(tmp_path / "m")) as h:
        state = h.instance.state
        staged: list[Any] = []
        value = state._to_device(state.inputs[0], [h.request({"INPUT__0": x}) for x in feeds], None, staged)
        np.testing.assert_array_equal(value.numpy(), np.concatenate(feeds))
        assert len(staged) == 1 and staged[0].shape == (4, ROW)


def test_a_batch_with_mismatched_shapes_is_refused_before_staging(tmp_path: Path) -> None:
    pool = PinnedPool(host_allocator(), 64 << 20)
    with BackendHarness(backend, _double(tmp_path / "m")) as h:
        state = h.instance.state
        requests = [h.request({"INPUT__0": x}) for x in _feeds((1, 2))]
        requests[1].inputs["INPUT__0"].data = np.zeros((2, ROW // 2), np.float32)
        with pytest.raises(TritonError, match="cannot batch input 'INPUT__0'"):
            state._to_device(state.inputs[0], requests, pool.allocate, [])
    assert pool.used_bytes == 0


# -- on a GPU --------------------------------------------------------------------------------------


def _gpu_pool() -> PinnedPool:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    pool = PinnedPool.create()
    if pool is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    return pool


@pytest.mark.gpu
@pytest.mark.parametrize("piece", [0, 3 * ROW * 4])
def test_kind_gpu_batches_staged_in_pieces_come_back_exact_in_pinned_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int
) -> None:
    pool = _gpu_pool()
    monkeypatch.setattr(instance_module, "STAGE_PIECE_BYTES", piece)
    feeds = _feeds((1, 3, 2, 5, 1))
    with BackendHarness(backend, _double(tmp_path / "m"), instance_kind="KIND_GPU") as h:
        h.instance.host_allocator = pool.allocate
        assert h.instance.state.program.device == torch.device("cuda", 0)
        responses = h.execute([h.request({"INPUT__0": x}) for x in feeds])
        for x, response in zip(feeds, responses):
            out = response.outputs["OUTPUT__0"].data
            np.testing.assert_array_equal(out, x * 2)
            # Copied back into page-locked memory (torch pins a non-blocking copy's target).
            assert torch.from_numpy(out).is_pinned()
        (single,) = h.execute([h.request({"INPUT__0": feeds[3]})])
        np.testing.assert_array_equal(single.outputs["OUTPUT__0"].data, feeds[3] * 2)
    del responses, single
    gc.collect()
    assert pool.used_bytes == 0  # every staging buffer went back
    pool.close()


@pytest.mark.gpu
def test_two_gpu_instances_sharing_the_pinned_pool_each_read_their_own_inputs(tmp_path: Path) -> None:
    """Staging buffers go back to the shared pool only after the copies that read them: two
    instances executing at once, batches of 8 MiB, never see each other's rows."""
    pool = _gpu_pool()
    folder = _double(tmp_path / "m")
    harnesses = [BackendHarness(backend, folder, instance_kind="KIND_GPU").start() for _ in range(2)]
    errors: list[str] = []

    def drive(h: BackendHarness, seed: int) -> None:
        h.instance.host_allocator = pool.allocate
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
    pool.close()


@pytest.mark.gpu
def test_a_failing_gpu_forward_waits_for_its_copies_and_gives_the_buffers_back(tmp_path: Path) -> None:
    pool = _gpu_pool()
    save_script(
        Raises(),
        tmp_path / "r",
        config([io("INPUT__0", "TYPE_FP32", [ROW])], [io("OUTPUT__0", "TYPE_FP32", [ROW])], 8),
    )
    with BackendHarness(backend, tmp_path / "r", instance_kind="KIND_GPU") as h:
        h.instance.host_allocator = pool.allocate
        with pytest.raises(TritonError, match="only non-positive inputs"):
            h.infer({"INPUT__0": np.ones((2, ROW), np.float32)})
        gc.collect()
        assert pool.used_bytes == 0
        x = -np.abs(_feeds((3,))[0])
        np.testing.assert_array_equal(h.infer({"INPUT__0": x})["OUTPUT__0"], -x)
    pool.close()
