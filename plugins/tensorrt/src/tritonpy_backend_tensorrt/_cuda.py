"""The few CUDA runtime calls the backend makes itself, through cuda-python.

Device buffers and pinned host memory come from the core (``instance.device_memory``,
``instance.host_allocator``); what is left is the instance's own stream and
event, asynchronous copies on it, and CUDA graph capture. Imported only once
TensorRT is there and a model is loaded, never on listing backends.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonpy_sdk import DeviceArray, TritonError


class Cuda:
    """cuda-python's runtime with errors as ``TritonError`` (INTERNAL)."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt

    def check(self, result: Any, what: str) -> Any:
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            _, text = self.rt.cudaGetErrorString(err)
            text = text.decode() if isinstance(text, bytes) else str(text)
            raise TritonError.internal(f"{what}: {text}")
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def device_count(self) -> int:
        try:
            err, count = self.rt.cudaGetDeviceCount()
        except Exception:  # a broken install or no driver: no GPU
            return 0
        return int(count) if int(err) == 0 else 0

    def set_device(self, device: int) -> None:
        self.check(self.rt.cudaSetDevice(device), f"unable to set device {device}")

    def compute_capability(self, device: int) -> tuple[str, str]:
        """(name, "major.minor") of GPU ``device``."""
        props = self.check(self.rt.cudaGetDeviceProperties(device), f"unable to read GPU {device}")
        name = props.name.decode(errors="replace") if isinstance(props.name, bytes) else str(props.name)
        return name.rstrip("\x00"), f"{props.major}.{props.minor}"

    def stream(self) -> Any:
        return self.check(
            self.rt.cudaStreamCreateWithFlags(self.rt.cudaStreamNonBlocking), "unable to create a stream"
        )

    def event(self) -> Any:
        return self.check(
            self.rt.cudaEventCreateWithFlags(self.rt.cudaEventDisableTiming), "unable to create an event"
        )

    def destroy(self, stream: Any = None, event: Any = None) -> None:
        if event is not None:
            self.rt.cudaEventDestroy(event)
        if stream is not None:
            self.rt.cudaStreamDestroy(stream)

    def to_device(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self.check(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "failed to copy input to GPU")

    def to_host(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self.check(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "failed to copy output from GPU")

    def on_device(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        self.check(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "failed to copy on GPU")

    def record_and_wait(self, event: Any, stream: Any) -> None:
        """Wait for what ``stream`` was given so far, through ``event`` (not a stream sync:
        work queued on the stream later, by another thread, is not waited for)."""
        self.check(self.rt.cudaEventRecord(event, stream), "failed to record an event")
        self.check(self.rt.cudaEventSynchronize(event), "failed to wait for the GPU")

    def begin_capture(self, stream: Any) -> None:
        mode = self.rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
        self.check(self.rt.cudaStreamBeginCapture(stream, mode), "unable to start CUDA graph capture")

    def end_capture(self, stream: Any) -> Any:
        graph = self.check(self.rt.cudaStreamEndCapture(stream), "unable to finish CUDA graph capture")
        try:
            return self.check(self.rt.cudaGraphInstantiate(graph, 0), "unable to instantiate a CUDA graph")
        finally:
            self.rt.cudaGraphDestroy(graph)

    def launch(self, graph: Any, stream: Any) -> None:
        self.check(self.rt.cudaGraphLaunch(graph, stream), "unable to launch a CUDA graph")

    def destroy_graph(self, graph: Any) -> None:
        self.rt.cudaGraphExecDestroy(graph)


class PlainDeviceMemory:
    """``tritonpy_sdk.DeviceMemory`` by ``cudaMalloc`` for a server without a CUDA runtime
    of its own (``instance.device_memory`` None: the server was installed without
    ``tritonpy[cuda]``): each array freed when it and its users are gone."""

    def __init__(self, cuda: Cuda) -> None:
        self._cuda = cuda

    def allocate(self, device_id: int, shape: Sequence[int], dtype: Any) -> DeviceArray:
        dt = np.dtype(dtype)
        dims = tuple(int(d) for d in shape)
        nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
        cuda = self._cuda
        cuda.set_device(device_id)
        address = int(cuda.check(cuda.rt.cudaMalloc(max(nbytes, 1)), f"failed to allocate {nbytes} bytes"))
        owner = _Allocation()
        weakref.finalize(owner, cuda.rt.cudaFree, address)

        def to_host() -> np.ndarray[Any, Any]:
            out = np.empty(dims, dt)
            kind = cuda.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
            cuda.check(cuda.rt.cudaMemcpy(out.ctypes.data, address, nbytes, kind), "failed to copy to host")
            return out

        return DeviceArray(address, dims, dt, device_id=device_id, owner=owner, to_host=to_host)

    def copy(self, device_id: int, dst: int, src: int, nbytes: int) -> None:
        cuda = self._cuda
        cuda.set_device(device_id)
        kind = cuda.rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        cuda.check(cuda.rt.cudaMemcpy(dst, src, nbytes, kind), "failed to copy on GPU")


class _Allocation:
    """Keeps a plain allocation alive (its finalizer frees it)."""
