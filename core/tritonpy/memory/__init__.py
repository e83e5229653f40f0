"""Host memory for GPU instances: pinned (page-locked) buffers from the CUDA runtime."""

from .pinned import PinnedPool, cuda_runtime

__all__ = ["PinnedPool", "cuda_runtime"]
