"""How many GPUs this host has, found through the CUDA driver, with no framework.

Loading ``libcuda`` with ctypes costs nothing when it is absent and needs no
Python CUDA package; anything that fails means "no GPU".

Model loading asks ``devices.gpu_count()`` and ``devices.compute_capability(gpu)``
through this module, so a test on a host without a GPU can drive what the loader
sees (instance kinds, GPU ids, what a backend's ``gpu_support`` is asked, the model
file ``cc_model_filenames`` picks) with
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


#: ``CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`` / ``_MINOR`` of the CUDA driver API.
_CC_MAJOR, _CC_MINOR = 75, 76


@functools.cache
def compute_capability(gpu: int) -> str:
    """GPU ``gpu``'s compute capability as Triton spells it in ``cc_model_filenames``
    (``"8.6"``, ``"9.0"``); "" when the driver cannot say."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuInit(0) != 0:
            return ""
        device = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(device), gpu) != 0:
            return ""
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device) != 0:
            return ""
        if lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device) != 0:
            return ""
    except (OSError, AttributeError):  # no driver, or not a real one
        return ""
    return f"{major.value}.{minor.value}"
