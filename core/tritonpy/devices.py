"""How many GPUs this host has, found through the CUDA driver, with no framework.

Loading ``libcuda`` with ctypes costs nothing when it is absent and needs no
Python CUDA package; anything that fails means "no GPU".
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
