"""Host and device memory: the pinned and per-GPU CUDA pools (cuda-python), and
the system and CUDA shared-memory regions that clients register."""

from .cuda import CudaRuntime, Runtime, load_runtime
from .device_memory import PooledDeviceMemory
from .device_pool import DeviceBuffer, DevicePool
from .pinned import PinnedPool
from .pool import Allocator, Pool, host_allocator
from .shared import OutputSlot, Region, SystemSharedMemory

__all__ = [
    "Allocator",
    "CudaRuntime",
    "DeviceBuffer",
    "DevicePool",
    "OutputSlot",
    "PinnedPool",
    "PooledDeviceMemory",
    "Pool",
    "Region",
    "Runtime",
    "SystemSharedMemory",
    "host_allocator",
    "load_runtime",
]
