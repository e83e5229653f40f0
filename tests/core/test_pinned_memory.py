"""The pinned host pool: its accounting, reuse and fallbacks on host memory (here),
and page-locked memory from the CUDA runtime (``gpu``: where there is one)."""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from tritonpy.memory import Allocator, PinnedPool, Pool, host_allocator, load_runtime
from tritonpy.memory.pool import size_class


class CountingAllocator:
    """Host memory that records what the pool asked for and can be made to fail."""

    def __init__(self) -> None:
        self.inner = host_allocator()
        self.allocs: list[int] = []
        self.frees: list[int] = []
        self.fail = False

    def alloc(self, nbytes: int) -> int:
        if self.fail:
            raise MemoryError("out of pinned memory")
        address = self.inner.alloc(nbytes)
        self.allocs.append(nbytes)
        return address

    def free(self, address: int) -> None:
        self.frees.append(address)
        self.inner.free(address)

    def allocator(self) -> Allocator:
        return Allocator(self.alloc, self.free)


def test_size_classes_are_powers_of_two_from_a_page() -> None:
    assert [size_class(n) for n in (1, 4096, 4097, 10_000, 1 << 20)] == [4096, 4096, 8192, 16384, 1 << 20]


def test_buffers_are_counted_and_reused() -> None:
    counting = CountingAllocator()
    pool = Pool(counting.allocator(), 64 << 10)
    taken = pool.take(5000)
    assert taken is not None
    address, size = taken
    assert size == 8192 and pool.used_bytes == 8192 and pool.held_bytes == 8192
    pool.give_back(address, size)
    assert pool.used_bytes == 0 and pool.held_bytes == 8192
    again = pool.take(8000)
    assert again == (address, 8192)  # the same buffer, not a second allocation
    assert counting.allocs == [8192]


def test_a_request_past_the_budget_falls_back() -> None:
    pool = Pool(host_allocator(), 16 << 10)
    first = pool.take(16 << 10)
    assert first is not None
    assert pool.take(1) is None
    assert pool.fallbacks == 1 and pool.used_bytes == 16 << 10


def test_idle_buffers_of_other_sizes_are_freed_to_make_room() -> None:
    counting = CountingAllocator()
    pool = Pool(counting.allocator(), 16 << 10)
    small = [pool.take(4096) for _ in range(4)]
    for taken in small:
        assert taken is not None
        pool.give_back(*taken)
    big = pool.take(16 << 10)
    assert big is not None  # the four idle pages went back to the allocator first
    assert len(counting.frees) == 4 and pool.held_bytes == 16 << 10


def test_an_allocator_failure_falls_back_and_restores_the_books() -> None:
    counting = CountingAllocator()
    pool = Pool(counting.allocator(), 1 << 20)
    counting.fail = True
    assert pool.take(100) is None
    assert (pool.used_bytes, pool.held_bytes, pool.fallbacks) == (0, 0, 1)
    counting.fail = False
    assert pool.take(100) is not None


def test_close_frees_idle_buffers() -> None:
    counting = CountingAllocator()
    pool = Pool(counting.allocator(), 1 << 20)
    taken = pool.take(100)
    assert taken is not None
    pool.give_back(*taken)
    pool.close()
    assert counting.frees == [taken[0]] and pool.held_bytes == 0


def test_threads_never_share_a_buffer_and_the_books_balance() -> None:
    pool = Pool(host_allocator(), 64 << 10)
    in_use: set[int] = set()
    lock = threading.Lock()
    clashes: list[int] = []

    def work(mark: int) -> None:
        for n in range(300):
            taken = pool.take(4096 * (1 + n % 3))
            if taken is None:
                continue
            with lock:
                if taken[0] in in_use:
                    clashes.append(taken[0])
                in_use.add(taken[0])
            ctypes.memset(taken[0], mark, taken[1])  # another holder would overwrite this
            if ctypes.string_at(taken[0], taken[1]) != bytes([mark]) * taken[1]:
                clashes.append(taken[0])
            with lock:
                in_use.discard(taken[0])
            pool.give_back(*taken)

    threads = [threading.Thread(target=work, args=(mark,)) for mark in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == []
    assert pool.used_bytes == 0 and pool.held_bytes <= pool.total_bytes


@pytest.fixture
def host_pool() -> Iterator[PinnedPool]:
    pool = PinnedPool(host_allocator(), 1 << 20)
    yield pool
    gc.collect()
    pool.close()


def test_arrays_live_in_pool_memory_and_come_back(host_pool: PinnedPool) -> None:
    a = host_pool.allocate((4, 1024), np.float32)
    a[:] = 2.0
    address = a.__array_interface__["data"][0]
    assert host_pool.used_bytes == 16384
    del a
    gc.collect()
    assert host_pool.used_bytes == 0
    b = host_pool.allocate((4, 1024), np.float32)
    assert b.__array_interface__["data"][0] == address


def test_an_exhausted_pool_gives_pageable_arrays(host_pool: PinnedPool) -> None:
    held = host_pool.allocate((1 << 20,), np.uint8)
    extra = host_pool.allocate((3, 5), np.int64)
    extra[:] = 7
    assert extra.shape == (3, 5) and int(extra.sum()) == 105
    assert host_pool.pool.fallbacks == 1 and host_pool.used_bytes == 1 << 20
    del held


def test_object_and_empty_arrays_use_ordinary_memory(host_pool: PinnedPool) -> None:
    assert host_pool.allocate((2,), object).dtype == object
    assert host_pool.allocate((0, 4), np.float32).shape == (0, 4)
    assert host_pool.used_bytes == 0


def test_without_a_runtime_the_pool_reports_its_size_and_hands_out_pageable_arrays() -> None:
    pool = PinnedPool.on(None, 268435456)
    assert not pool.enabled
    assert (pool.total_bytes, pool.used_bytes) == (268435456, 0)
    array = pool.allocate((8,), np.float32)
    assert array.shape == (8,) and pool.used_bytes == 0


# -- with a GPU --------------------------------------------------------------------------


@pytest.fixture
def cuda_pool() -> Iterator[PinnedPool]:
    runtime = load_runtime()
    if runtime is None:
        pytest.skip("no GPU with cuda-python (pip install tritonpy[cuda])")
    pool = PinnedPool.on(runtime, 1 << 20)
    yield pool
    gc.collect()
    pool.close()


@pytest.mark.gpu
def test_pinned_arrays_are_page_locked_and_reused(cuda_pool: PinnedPool) -> None:
    from cuda.bindings import runtime as cudart

    a = cuda_pool.allocate((4, 1024), np.float32)
    a[:] = 1.0
    address = a.__array_interface__["data"][0]
    err, attrs = cudart.cudaPointerGetAttributes(address)
    assert int(err) == 0
    assert attrs.type == cudart.cudaMemoryType.cudaMemoryTypeHost  # page-locked
    del a
    gc.collect()
    b = cuda_pool.allocate((4, 1024), np.float32)
    assert b.__array_interface__["data"][0] == address


@pytest.mark.gpu
def test_pinned_arrays_copy_to_a_device(cuda_pool: PinnedPool) -> None:
    from cuda.bindings import runtime as cudart

    a = cuda_pool.allocate((256,), np.float32)
    a[:] = np.arange(256, dtype=np.float32)
    err, device = cudart.cudaMalloc(a.nbytes)
    assert int(err) == 0
    back = np.zeros_like(a)
    h2d, d2h = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
    assert int(cudart.cudaMemcpy(device, a.ctypes.data, a.nbytes, h2d)[0]) == 0
    assert int(cudart.cudaMemcpy(back.ctypes.data, device, a.nbytes, d2h)[0]) == 0
    cudart.cudaFree(device)
    np.testing.assert_array_equal(back, a)
