"""The memory manager: per-GPU pools and their fallback, what a host without a GPU
gets (pageable memory, pool sizes still reported, no CUDA shared memory), the
pool flags, and the pinned-pool metrics Triton exports on every host."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest
from tritonpy import Server
from tritonpy.cli import build_parser, options_from_args
from tritonpy.memory import DevicePool, host_allocator, load_runtime
from tritonpy.memory.manager import MemoryManager
from tritonpy.metrics import Metrics
from tritonpy_hostcuda import HostRuntime
from tritonpy_sdk import TritonError


def test_device_buffers_come_from_the_budget_and_go_back() -> None:
    pool = DevicePool(host_allocator(), device=1, total_bytes=8192)
    first = pool.allocate(5000)
    assert first is not None and (first.nbytes, first.device) == (5000, 1)
    assert pool.pool.used_bytes == 8192
    assert pool.allocate(1) is None  # spent: the caller uses host memory
    address = first.address
    del first
    gc.collect()
    assert pool.pool.used_bytes == 0
    again = pool.allocate(8192)
    assert again is not None and again.address == address
    assert pool.allocate(0) is None


def test_without_a_runtime_everything_is_host_memory(caplog: pytest.LogCaptureFixture) -> None:
    manager = MemoryManager(None, 1 << 20, {0: 1 << 20})
    with caplog.at_level(logging.INFO, logger="tritonpy"):
        manager.describe()
    assert not caplog.records  # nothing at the default level: every CPU-only start would say it
    with caplog.at_level(logging.DEBUG, logger="tritonpy"):
        manager.describe()
    assert not manager.pinned.enabled and manager.pinned.total_bytes == 1 << 20
    assert manager.device_pools == {} and not manager.cuda_shared_memory
    said = [r.getMessage() for r in caplog.records if "pinned memory pool" in r.getMessage()]
    assert len(said) == 1 and "pageable" in said[0] and caplog.records[0].levelno == logging.DEBUG


def test_with_a_runtime_each_gpu_gets_its_pool(caplog: pytest.LogCaptureFixture) -> None:
    runtime = HostRuntime(device_count=3)
    manager = MemoryManager(runtime, 1 << 20, {1: 0, 2: 1 << 16})
    with caplog.at_level(logging.INFO, logger="tritonpy"):
        manager.describe()
    assert manager.pinned.enabled and manager.cuda_shared_memory
    assert {d: p.pool.total_bytes for d, p in manager.device_pools.items()} == {0: 64 << 20, 2: 1 << 16}
    text = caplog.text
    assert "CUDA memory pool on GPU 1 disabled" in text and "GPU 2: up to 65536 bytes" in text
    buffer = manager.device_pools[2].allocate(100)
    assert buffer is not None and buffer.device == 2
    del buffer
    gc.collect()
    manager.close()


def test_a_zero_byte_pinned_pool_is_off() -> None:
    manager = MemoryManager(HostRuntime(), 0, {})
    assert not manager.pinned.enabled
    assert manager.pinned.allocate((4,), "float32").shape == (4,) and manager.pinned.used_bytes == 0


def _options(*flags: str):  # type: ignore[no-untyped-def]
    return options_from_args(build_parser().parse_args(["serve", "--model-repository", "m", *flags]))


def test_pool_flags_default_as_triton() -> None:
    options = _options()
    assert options.pinned_memory_pool_byte_size == 268435456
    assert options.cuda_memory_pool_byte_size == {}
    options = _options(
        "--pinned-memory-pool-byte-size",
        "0",
        "--cuda-memory-pool-byte-size",
        "0:1024",
        "--cuda-memory-pool-byte-size",
        "1:0",
    )
    assert options.pinned_memory_pool_byte_size == 0
    assert options.cuda_memory_pool_byte_size == {0: 1024, 1: 0}


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--pinned-memory-pool-byte-size", "abc"),
        ("--pinned-memory-pool-byte-size", "-1"),
        ("--cuda-memory-pool-byte-size", "abc"),
        ("--cuda-memory-pool-byte-size", "0:abc"),
        ("--cuda-memory-pool-byte-size", "x:1"),
        ("--cuda-memory-pool-byte-size", "0:-5"),
    ],
)
def test_bad_pool_flags_are_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _options(f"{flag}={value}")
    assert f"Invalid option value. Got {value}" in capsys.readouterr().err


def test_server_refuses_negative_pool_sizes(tmp_path: Path) -> None:
    with pytest.raises(TritonError, match="pinned-memory-pool-byte-size"):
        Server(model_repository=tmp_path, pinned_memory_pool_byte_size=-1)
    with pytest.raises(TritonError, match="cuda-memory-pool-byte-size"):
        Server(model_repository=tmp_path, cuda_memory_pool_byte_size={0: -1})


def test_metadata_lists_cuda_shared_memory_only_where_it_works(tmp_path: Path) -> None:
    server = Server(model_repository=tmp_path)
    extensions = server.metadata()["extensions"]
    if load_runtime() is None:
        assert "cuda_shared_memory" not in extensions
    else:
        index = extensions.index("system_shared_memory")
        assert extensions[index + 1] == "cuda_shared_memory"


def test_pinned_pool_gauges_are_exported_with_tritons_help(tmp_path: Path) -> None:
    server = Server(model_repository=tmp_path, pinned_memory_pool_byte_size=12345)
    text = Metrics([], cpu=False, gpu=False, pinned=server.memory.pinned).render()
    assert "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes" in text
    assert "# TYPE nv_pinned_memory_pool_total_bytes gauge" in text
    assert "\nnv_pinned_memory_pool_total_bytes 12345\n" in text
    assert "# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used memory size, in bytes" in text
    assert "\nnv_pinned_memory_pool_used_bytes 0\n" in text


def test_pinned_pool_gauges_follow_the_pool() -> None:
    manager = MemoryManager(HostRuntime(), 1 << 20, {})
    metrics = Metrics([], cpu=False, gpu=False, pinned=manager.pinned)
    array = manager.pinned.allocate((1000,), "float64")
    assert "\nnv_pinned_memory_pool_used_bytes 8192\n" in metrics.render()
    del array
    gc.collect()
    assert "\nnv_pinned_memory_pool_used_bytes 0\n" in metrics.render()
    manager.close()


class _AnyDevice:
    """cuda-python's runtime module, except that ``cudaSetDevice`` succeeds: so each
    call after it reaches the real binding, which checks its arguments."""

    def __init__(self, rt: object) -> None:
        self._rt = rt

    def __getattr__(self, name: str) -> object:
        return getattr(self._rt, name)

    def cudaSetDevice(self, device: int) -> tuple[object]:  # noqa: N802 (cuda-python's name)
        return (self._rt.cudaError_t.cudaSuccess,)  # type: ignore[attr-defined]


def test_the_runtime_calls_are_well_formed_for_cuda_python() -> None:
    """Without a driver every call fails, with the runtime's message: a call with
    arguments cuda-python does not take would raise TypeError instead."""
    import numpy as np

    rt = pytest.importorskip("cuda.bindings.runtime")
    from tritonpy.memory.cuda import CudaError, CudaRuntime

    if int(rt.cudaGetDeviceCount()[0]) == 0:
        pytest.skip("a driver is present: these calls would really run")
    runtime = CudaRuntime(_AnyDevice(rt), 1)
    host = np.zeros(16, np.uint8)
    calls = [
        lambda: runtime.host_alloc(4096),
        lambda: runtime.free_host(host.ctypes.data),
        lambda: runtime.malloc(0, 4096),
        lambda: runtime.free(0, 1 << 40),
        lambda: runtime.ipc_open(0, bytes(range(64))),
        lambda: runtime.ipc_close(0, 1 << 40),
        lambda: runtime.copy_to_host(0, host.ctypes.data, 1 << 40, 16),
        lambda: runtime.copy_to_device(0, 1 << 40, host.ctypes.data, 16),
        lambda: runtime.copy_on_device(0, 1 << 40, 1 << 41, 16),
    ]
    for call in calls:
        with pytest.raises(CudaError) as info:
            call()
        assert str(info.value)  # the runtime's own words (e.g. "CUDA driver version is insufficient ...")
    with pytest.raises(CudaError, match="64 bytes"):
        runtime.ipc_open(0, b"short")
