"""Running a session through ONNX Runtime's IOBinding: each input bound by pointer
where it lies, so a device-resident input (a client's CUDA shared-memory region,
a batch gathered on the GPU) is read in place by the CUDA execution provider.

The same code binds host inputs (``"cpu"``, numpy's pointer), so it runs, and is
tested, without a GPU; only the device type and pointer differ on one.

Outputs are bound to host memory, except those named in ``on_device``: bound to
the GPU (``bind_output(name, "cuda", device_id)``), they stay in the memory ORT
allocated for them there and come back as ``DeviceArray``s over the
``OrtValue``'s data (the ``OrtValue`` is the owner that keeps it alive), once
the outputs are synchronised. A client's CUDA shared-memory region, or an
ensemble step that takes device inputs, then gets them without a trip through
host memory. That path binds to ``"cpu"`` too, for tests without a GPU; with
``"cuda"`` it has not run yet (no onnxruntime CUDA provider where tritonpy's
GPU tests ran).
Sessions on the CPU provider use ``session.run`` instead: measured on a tiny
model (Add+Sub, [64,16] float32, one thread) ``run`` takes ~6 µs and a bound run
~50 µs, the binding calls' own cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonpy_sdk import KDLCPU, KDLCUDA, DeviceArray

#: What may be fed: a host array, or an array in memory ORT reads by pointer.
Feed = np.ndarray[Any, Any] | DeviceArray


@dataclass(frozen=True, slots=True)
class DeviceOutput:
    """Where an output is bound instead of host memory: ORT's device name (``"cuda"``;
    ``"cpu"`` in tests), the device id, and the output's numpy dtype."""

    device: str
    device_id: int
    dtype: Any


def run_bound(
    session: Any,
    run_options: Any,
    feeds: Mapping[str, Feed],
    outputs: Sequence[str],
    on_device: Mapping[str, DeviceOutput] | None = None,
) -> list[np.ndarray[Any, Any] | DeviceArray]:
    """``session.run(outputs, feeds, run_options)`` through an IOBinding; outputs are
    copied to host memory (by ORT, once), except those in ``on_device``: left where
    ORT wrote them, as ``DeviceArray``s."""
    binding = session.io_binding()
    kept: list[np.ndarray[Any, Any]] = []  # host arrays bound by pointer live until the run ends
    for name, value in feeds.items():
        if isinstance(value, DeviceArray):
            device = "cuda" if value.memory_type == "GPU" else "cpu"
            binding.bind_input(name, device, value.device_id, value.dtype, list(value.shape), value.address)
        else:  # (ORT binds no string tensor: sessions with strings use run())
            host = np.ascontiguousarray(value)
            kept.append(host)
            binding.bind_input(name, "cpu", 0, host.dtype, list(host.shape), host.ctypes.data)
    if not on_device:
        for name in outputs:
            binding.bind_output(name, "cpu")
        session.run_with_iobinding(binding, run_options)
        results: list[np.ndarray[Any, Any] | DeviceArray] = binding.copy_outputs_to_cpu()
        return results
    for name in outputs:
        where = on_device.get(name)
        if where is None:
            binding.bind_output(name, "cpu")
        else:
            binding.bind_output(name, where.device, where.device_id)
    session.run_with_iobinding(binding, run_options)
    binding.synchronize_outputs()  # the device outputs are read on other streams
    values = binding.get_outputs()
    return [
        _device_array(value, on_device[name]) if name in on_device else value.numpy()
        for name, value in zip(outputs, values)
    ]


def _device_array(value: Any, where: DeviceOutput) -> DeviceArray:
    """The memory of ``value`` (an ``OrtValue``) as a ``DeviceArray``, kept alive by it."""
    return DeviceArray(
        int(value.data_ptr()),
        tuple(int(d) for d in value.shape()),
        where.dtype,
        device_id=where.device_id,
        owner=value,
        to_host=value.numpy,
        device_type=KDLCUDA if where.device == "cuda" else KDLCPU,
    )
