"""``DeviceArray``: an array in memory that the SDK does not own, usually on a GPU.

The core makes one for an input that lies in a client's CUDA shared-memory
region, or for a batch gathered into a pooled device buffer; a backend may make
one for a device-resident output (a torch CUDA tensor, an ONNX Runtime
``OrtValue`` on CUDA). It is a pointer, a shape, a dtype and a device, plus the
object that keeps the memory alive. Frameworks take it without a copy through
DLPack (``torch.from_dlpack(array)``, ``cupy.from_dlpack``); ``to_host()``
copies it to a numpy array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._dlpack import KDLCPU, KDLCUDA, capsule, data_type, take


class DeviceArray:
    """``shape`` elements of ``dtype`` at ``address`` on device ``device_id``.

    ``device_type`` is DLPack's: ``KDLCUDA`` (2) for GPU memory, ``KDLCPU`` (1)
    for host memory. ``owner`` is kept alive for as long as this array, and any
    framework tensor made from it through DLPack, exists. ``to_host`` copies the
    bytes to a new numpy array; without it, host memory (``KDLCPU``) is read in
    place and device memory cannot be read from the host.
    """

    __slots__ = ("address", "device_id", "device_type", "dtype", "owner", "shape", "_to_host")

    def __init__(
        self,
        address: int,
        shape: Sequence[int],
        dtype: Any,
        *,
        device_id: int = 0,
        owner: Any = None,
        to_host: Callable[[], np.ndarray[Any, Any]] | None = None,
        device_type: int = KDLCUDA,
    ) -> None:
        self.address = address
        self.shape = tuple(int(d) for d in shape)
        self.dtype: np.dtype[Any] = np.dtype(dtype)
        data_type(self.dtype)  # refuse what DLPack cannot carry (BYTES) now, not at use
        self.device_id = device_id
        self.device_type = device_type
        self.owner = owner
        self._to_host = to_host

    def __repr__(self) -> str:
        return (
            f"DeviceArray(address={self.address:#x}, shape={list(self.shape)}, dtype={self.dtype}, "
            f"memory_type={self.memory_type}, device_id={self.device_id})"
        )

    @classmethod
    def from_dlpack(cls, producer: Any) -> DeviceArray:
        """Wrap what ``producer`` (a torch or cupy tensor: anything with
        ``__dlpack__``) exports, without a copy; the producer's memory stays alive
        as long as the array. ``to_host`` asks the producer for a host copy."""
        address, shape, dtype, device, owner = take(producer)

        def to_host() -> np.ndarray[Any, Any]:
            cpu = getattr(producer, "cpu", None)  # torch: one copy to the host
            if cpu is not None:
                return np.asarray(cpu().numpy())
            return np.from_dlpack(producer, device="cpu", copy=True)

        return cls(
            address,
            shape,
            dtype,
            device_id=device[1],
            owner=(owner, producer),
            to_host=to_host if device[0] != KDLCPU else None,
            device_type=device[0],
        )

    @property
    def memory_type(self) -> str:
        """``"GPU"`` or ``"CPU"`` (Triton's ``TRITONSERVER_MEMORY_GPU`` / ``_CPU``)."""
        return "GPU" if self.device_type == KDLCUDA else "CPU"

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def reshape(self, shape: Sequence[int]) -> DeviceArray:
        """The same memory under another shape of as many elements."""
        new = tuple(int(d) for d in shape)
        if int(np.prod(new, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape {list(self.shape)} to {list(new)}")
        source = self
        return DeviceArray(
            self.address,
            new,
            self.dtype,
            device_id=self.device_id,
            owner=self,
            to_host=lambda: source.to_host().reshape(new),
            device_type=self.device_type,
        )

    def rows(self, start: int, count: int) -> DeviceArray:
        """Rows ``start`` to ``start + count`` along axis 0, in place (the same
        memory, kept alive by this array); ``to_host`` copies this array's host
        copy's rows."""
        if not self.shape or start < 0 or count < 0 or start + count > self.shape[0]:
            raise ValueError(
                f"rows {start}:{start + count} are not rows of an array of shape {list(self.shape)}"
            )
        tail = self.shape[1:]
        row_bytes = int(np.prod(tail, dtype=np.int64)) * self.dtype.itemsize
        source = self
        return DeviceArray(
            self.address + start * row_bytes,
            (count, *tail),
            self.dtype,
            device_id=self.device_id,
            owner=self,
            to_host=lambda: source.to_host()[start : start + count],
            device_type=self.device_type,
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.device_id)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of this array, no copy. ``stream`` is ignored: the data
        is ready when the array is handed out (every copy made into it is
        synchronous). A request to copy, or to move it to another device, is refused."""
        if copy:
            raise BufferError("a DeviceArray is shared without copying; copy it after import")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"a DeviceArray on {self.__dlpack_device__()} cannot move to {dl_device}")
        return capsule(self.address, self.shape, self.dtype, self.__dlpack_device__(), self)

    def to_host(self) -> np.ndarray[Any, Any]:
        """The array as numpy (a copy from device memory; a view of host memory)."""
        if self._to_host is not None:
            return self._to_host()
        if self.device_type == KDLCPU:
            return np.from_dlpack(self)
        raise BufferError(f"{self!r} has no way to be copied to the host")
