"""How many GPUs this host has, found through the CUDA driver, with no framework.

Loading ``libcuda`` with ctypes costs nothing when it is absent and needs no
Python CUDA package; anything that fails means "no GPU".

Model loading asks ``devices.gpu_count()`` through this module, so a test on a host
without a GPU can drive the count the loader sees (instance kinds, GPU ids, what a
backend's ``gpu_support`` is asked) with
``monkeypatch.setattr(tritonpy.devices, "gpu_count", lambda: 1)``; the CUDA memory
code keeps the driver's own answer.
"""

from __future__ import annotations

import ctypes
import functools
import logging

log = logging.getLogger(__name__)


@functools.cache
def gpu_count() -> int:
    """The number of CUDA devices the driver reports (0 without a driver or GPU)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    try:
        if lib.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except AttributeError:  # not a real CUDA driver library
        return 0
    log.debug("CUDA driver reports %d GPU(s)", count.value)
    return int(count.value)
