"""GPU memory as the stub hands it to ``model.py`` and takes it back, with no framework.

``GpuView`` is a pointer, a shape, a dtype and a GPU, plus what keeps the memory
alive; frameworks take it without a copy through DLPack (``torch.from_dlpack``).
It is the SDK's ``DeviceArray`` reduced to what the stub needs, written again
here because a stub may run in an environment with numpy only (the SDK is not
there); ``_dlpack.capsule`` builds its DLPack capsule. ``gpu_source`` reads where a
model's own GPU tensor lies through the CUDA array interface (torch, cupy, numba),
also with no import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._dlpack import KDLCUDA, capsule

__all__ = ["KDLCUDA", "GpuView", "gpu_source"]


class GpuView:
    """``shape`` elements of ``dtype`` at ``address`` on GPU ``device_id``; ``owner``
    lives as long as this view and every tensor a framework made of it."""

    __slots__ = ("address", "device_id", "dtype", "owner", "shape", "_to_host")

    def __init__(
        self,
        address: int,
        shape: Sequence[int],
        dtype: Any,
        device_id: int,
        owner: Any,
        to_host: Callable[[], np.ndarray[Any, Any]],
    ) -> None:
        self.address = address
        self.shape = tuple(int(d) for d in shape)
        self.dtype: np.dtype[Any] = np.dtype(dtype)
        self.device_id = device_id
        self.owner = owner
        self._to_host = to_host

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDLCUDA, self.device_id)

    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule, no copy (the data is complete when the view is handed out)."""
        if kwargs.get("copy"):
            raise BufferError("GPU memory is shared without copying; copy it after import")
        return capsule(self.address, self.shape, self.dtype, self.__dlpack_device__(), self)

    def to_host(self) -> np.ndarray[Any, Any]:
        return self._to_host()

    def __repr__(self) -> str:
        where = f"address={self.address:#x}, GPU {self.device_id}"
        return f"GpuView({where}, shape={list(self.shape)}, dtype={self.dtype})"


def gpu_source(producer: Any) -> tuple[int, int, tuple[int, ...], int] | None:
    """``(device, address, shape, nbytes)`` of a GPU tensor, read without a copy; None
    when it cannot be (not C-contiguous, no CUDA array interface: send it by host)."""
    if isinstance(producer, GpuView):
        return producer.device_id, producer.address, producer.shape, producer.nbytes
    try:
        face = producer.__cuda_array_interface__
        device_type, device = producer.__dlpack_device__()
    except Exception:  # e.g. torch refuses a tensor that requires grad
        return None
    if int(device_type) != KDLCUDA:
        return None
    shape = tuple(int(d) for d in face["shape"])
    dtype = np.dtype(face["typestr"])
    strides = face.get("strides")
    if strides is not None:
        expected = dtype.itemsize
        for size, stride in zip(reversed(shape), reversed(strides)):
            if size != 1 and int(stride) != expected:
                return None
            expected *= size
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return int(device), int(face["data"][0]), shape, nbytes
