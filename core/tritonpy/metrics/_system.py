"""Host metrics: CPU utilization and memory from /proc, GPU gauges through NVML.

NVML is reached with ctypes (``libnvidia-ml.so.1``, shipped with the driver),
so no Python GPU package is needed; without a driver there are no GPU metrics.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


class CpuSampler:
    """CPU utilization between two samples of /proc/stat, and memory from /proc/meminfo."""

    def __init__(self) -> None:
        self._last: tuple[int, int] | None = self._read_stat()
        self.utilization = 0.0

    @staticmethod
    def _read_stat() -> tuple[int, int] | None:
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except (OSError, IndexError):
            return None
        values = [int(v) for v in fields]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return sum(values), idle

    def poll(self) -> None:
        now = self._read_stat()
        if now is not None and self._last is not None:
            total, idle = now[0] - self._last[0], now[1] - self._last[1]
            if total > 0:
                self.utilization = max(0.0, min(1.0, 1.0 - idle / total))
        self._last = now

    @staticmethod
    def memory() -> tuple[int, int]:
        """(total, used) bytes; used = total - available, as Triton reports."""
        info: dict[str, int] = {}
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
        except (OSError, ValueError, IndexError):
            return 0, 0
        total = info.get("MemTotal", 0)
        return total, total - info.get("MemAvailable", 0)


@dataclass
class GpuReading:
    uuid: str
    utilization: float
    memory_total: int
    memory_used: int
    power_watts: float


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Nvml:
    """The few NVML calls Triton's GPU metrics need. ``available`` is False without a GPU."""

    def __init__(self) -> None:
        self.available = False
        self._handles: list[ctypes.c_void_p] = []
        try:
            self._lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self._lib.nvmlInit_v2() != 0:
                return
            count = ctypes.c_uint(0)
            if self._lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return
            for i in range(count.value):
                handle = ctypes.c_void_p()
                if self._lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0:
                    self._handles.append(handle)
        except (OSError, AttributeError):
            return
        self.available = bool(self._handles)
        log.debug("NVML: %d GPU(s)", len(self._handles))

    def read(self) -> list[GpuReading]:
        readings = []
        for handle in self._handles:
            uuid = ctypes.create_string_buffer(96)
            util, mem, power = _Utilization(), _Memory(), ctypes.c_uint(0)
            if self._lib.nvmlDeviceGetUUID(handle, uuid, 96) != 0:
                continue
            self._lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util))
            self._lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
            self._lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(power))  # milliwatts
            readings.append(
                GpuReading(uuid.value.decode(), util.gpu / 100.0, mem.total, mem.used, power.value / 1000.0)
            )
        return readings
