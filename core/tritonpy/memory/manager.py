"""The memory of one server: its CUDA runtime (if any), the pinned host pool, the
per-GPU CUDA pools, and the registered shared-memory regions.

Chosen when the server is made, and said in the log when it starts: with a GPU and
cuda-python, pinned memory of ``--pinned-memory-pool-byte-size`` bytes and a
pool of ``--cuda-memory-pool-byte-size`` bytes per GPU; otherwise pageable host
memory, with the pools' configured sizes still reported (as Triton's metrics do).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .cuda import Runtime, load_runtime
from .device_memory import PooledDeviceMemory
from .device_pool import DEFAULT_CUDA_POOL_BYTES, DevicePool
from .pinned import DEFAULT_PINNED_POOL_BYTES, PinnedPool
from .shared import SystemSharedMemory

log = logging.getLogger("tritonpy")


class MemoryManager:
    """Pools and regions of one server. ``runtime`` None: host memory only."""

    def __init__(
        self,
        runtime: Runtime | None,
        pinned_bytes: int = DEFAULT_PINNED_POOL_BYTES,
        cuda_bytes: Mapping[int, int] | None = None,
    ) -> None:
        self.runtime = runtime
        self.pinned = PinnedPool.on(runtime, pinned_bytes)
        sizes = dict(cuda_bytes or {})
        self.device_pools: dict[int, DevicePool] = {}
        if runtime is not None:
            for device in range(runtime.device_count):
                size = sizes.get(device, DEFAULT_CUDA_POOL_BYTES)
                if size > 0:
                    self.device_pools[device] = DevicePool.on(runtime, device, size)
        #: What GPU instances gather device-resident batches in (None without CUDA).
        self.device_memory = PooledDeviceMemory(runtime, self.device_pools) if runtime is not None else None
        #: Regions that clients register (CUDA ones only where ``runtime`` is).
        self.shared_memory = SystemSharedMemory(runtime)

    @classmethod
    def create(cls, pinned_bytes: int, cuda_bytes: Mapping[int, int]) -> MemoryManager:
        """The manager this host supports: CUDA through cuda-python when it sees a GPU."""
        return cls(load_runtime(), pinned_bytes, cuda_bytes)

    @property
    def cuda_shared_memory(self) -> bool:
        """Whether CUDA shared-memory regions can be registered (a GPU and cuda-python)."""
        return self.runtime is not None

    def describe(self) -> None:
        """Say in the log what memory was chosen (the server does so when it starts)."""
        if self.runtime is None:
            # Verbose only: on a CPU-only host this is every start's news and nothing to act on
            # (Triton even warns of it; a user with a GPU who expected the pool sees --log-verbose 1).
            log.debug(
                "no CUDA runtime (a GPU and tritonpy[cuda] are needed): pinned memory pool "
                "(%d bytes) not available, host buffers are pageable; CUDA shared memory off",
                self.pinned.total_bytes,
            )
            return
        if self.pinned.enabled:
            log.info("pinned memory pool: up to %d bytes of page-locked memory", self.pinned.total_bytes)
        else:
            log.info("pinned memory pool disabled (0 bytes): host buffers are pageable")
        for device in range(self.runtime.device_count):
            pool = self.device_pools.get(device)
            if pool is None:
                log.info("CUDA memory pool on GPU %d disabled", device)
            else:
                log.info("CUDA memory pool on GPU %d: up to %d bytes", device, pool.pool.total_bytes)

    def close(self) -> None:
        """Forget every region and free the pools' idle buffers."""
        self.shared_memory.unregister()
        self.shared_memory.unregister_cuda()
        self.pinned.close()
        for pool in self.device_pools.values():
            pool.close()
