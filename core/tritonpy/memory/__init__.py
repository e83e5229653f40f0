"""Host memory: pinned (page-locked) buffers for GPU instances, and the system
shared-memory regions that clients register."""

from .pinned import PinnedPool, cuda_runtime
from .shared import OutputSlot, Region, SystemSharedMemory

__all__ = ["OutputSlot", "PinnedPool", "Region", "SystemSharedMemory", "cuda_runtime"]
