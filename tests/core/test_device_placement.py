"""The core places device-resident inputs before ``execute``: a served model whose
instance does not take device inputs gets them as host tensors, copied once; the
request is validated without a copy. (The decision itself, per instance kind,
GPU and declaration, is tested in test_device_inputs.py.)"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tritonpy
from tritonpy_sdk import DataType, DeviceArray, InferenceRequest, InferenceResponse, Tensor, hookimpl
from tritonpy_testbackend import CpuBackend


class Seen(CpuBackend):
    """Records where each input was when ``execute`` got it."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, str, list[float]]] = []

    @hookimpl
    def execute(self, requests: Sequence[InferenceRequest]) -> list[InferenceResponse]:
        for r in requests:
            x = r.inputs["X"]
            self.seen.append((x.is_device, x.memory_type, x.data.tolist()))
        return CpuBackend.echo(requests)


def _gpu_labelled(values: np.ndarray[Any, Any], copies: list[int]) -> DeviceArray:
    """Host memory presented as CUDA memory, counting its copies to the host."""
    buffer = ctypes.create_string_buffer(values.tobytes(), values.nbytes)

    def to_host() -> np.ndarray[Any, Any]:
        copies.append(1)
        return np.frombuffer(bytes(buffer), dtype=values.dtype).reshape(values.shape).copy()

    return DeviceArray(ctypes.addressof(buffer), values.shape, values.dtype, owner=buffer, to_host=to_host)


def test_a_cpu_instance_gets_a_device_input_as_a_host_copy(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(
        'backend: "seen"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
    )
    backend = Seen()
    server = tritonpy.Server(model_repository=tmp_path)
    server.backends.register("seen", backend)
    with server:
        (version,) = server.loaded_versions()
        version.device_tensors = True  # as on a host with a GPU
        handle = server.model("m")
        copies: list[int] = []
        request = handle.create_request({"X": np.zeros(2, np.float32)})
        array = _gpu_labelled(np.array([1.5, 2.5], np.float32), copies)
        request.inputs["X"] = Tensor.on_device("X", array, DataType.FP32)
        response = server.infer(request)
        assert backend.seen == [(False, "CPU", [1.5, 2.5])]
        assert copies == [1]  # validated without a copy, copied once for the instance
        np.testing.assert_array_equal(response.outputs["Y"].data, [1.5, 2.5])
