"""Pinned host memory for GPU instances (needs a CUDA device)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from tritonpy.memory import PinnedPool, cuda_runtime

pytestmark = pytest.mark.gpu


@pytest.fixture
def pool() -> PinnedPool:
    if cuda_runtime() is None:
        pytest.skip("no CUDA runtime with a visible GPU")
    created = PinnedPool.create()
    assert created is not None
    return created


def test_pinned_arrays_are_reused(pool: PinnedPool) -> None:
    a = pool.allocate((4, 1024), np.float32)
    a[:] = 1.0
    address = a.__array_interface__["data"][0]
    lib = cuda_runtime()
    import ctypes

    class Attributes(ctypes.Structure):
        _fields_ = [
            ("type", ctypes.c_int),
            ("device", ctypes.c_int),
            ("dev", ctypes.c_void_p),
            ("host", ctypes.c_void_p),
        ]

    attrs = Attributes()
    assert lib.cudaPointerGetAttributes(ctypes.byref(attrs), ctypes.c_void_p(address)) == 0
    assert attrs.type == 1  # cudaMemoryTypeHost: page-locked
    del a
    gc.collect()
    b = pool.allocate((4, 1024), np.float32)
    assert b.__array_interface__["data"][0] == address  # the block came back to the pool
    pool.close()


def test_object_arrays_use_ordinary_memory(pool: PinnedPool) -> None:
    assert pool.allocate((2,), object).dtype == object
