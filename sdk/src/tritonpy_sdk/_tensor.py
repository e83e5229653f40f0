"""``Tensor``: a named, typed array handed between the core and backends."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._datatype import DataType
from ._device_array import DeviceArray
from ._dlpack import KDLCPU


class Tensor:
    """A named tensor: a numpy array on the host, or a ``DeviceArray`` in device memory.

    ``data`` is always a numpy array on the host whose dtype matches ``datatype``
    (an object array of ``bytes`` for BYTES). A device-resident tensor (made with
    ``Tensor.on_device``; ``is_device`` true, ``memory_type`` ``"GPU"``) keeps its
    memory where it is: ``device`` is the ``DeviceArray`` and ``__dlpack__``
    hands it to a framework without a copy; reading ``data`` copies it to the
    host once. The core hands device tensors only to instances that accept
    them (``ModelInstance.device_inputs``); every other backend sees host tensors.

    ``data`` of a host tensor is a plain attribute (a slot): the request path reads
    it many times per request, and only device tensors (a subclass) pay for the
    property that copies on first read.
    """

    __slots__ = ("data", "datatype", "device", "name")

    def __init__(self, name: str, data: np.ndarray[Any, Any], datatype: DataType) -> None:
        self.name = name
        self.data: np.ndarray[Any, Any] = data
        self.datatype = datatype
        #: The tensor's device memory when it is device-resident, else None.
        self.device: DeviceArray | None = None

    @classmethod
    def on_device(cls, name: str, array: DeviceArray, datatype: DataType) -> Tensor:
        """A device-resident tensor over ``array`` (no copy)."""
        return _DeviceTensor(name, array, datatype)

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, datatype={self.datatype}, data={self.data!r})"

    @property
    def is_device(self) -> bool:
        """Whether the tensor lies in device memory (``device`` is set)."""
        return self.device is not None and self.device.device_type != KDLCPU

    @property
    def memory_type(self) -> str:
        """``"GPU"`` for a device-resident tensor, else ``"CPU"``."""
        return "GPU" if self.is_device else "CPU"

    @property
    def device_id(self) -> int:
        """The GPU a device-resident tensor is on (0 for host tensors)."""
        return self.device.device_id if self.device is not None else 0

    def renamed(self, name: str) -> Tensor:
        """The same data (no copy, same memory) under another name."""
        return Tensor(name, self.data, self.datatype)

    def to_host(self) -> Tensor:
        """This tensor if it is on the host; else a host tensor of its data (one copy)."""
        if self.device is None:
            return self
        return Tensor(self.name, self.data, self.datatype)

    @classmethod
    def from_numpy(cls, name: str, array: Any, datatype: DataType | None = None) -> Tensor:
        """Wrap ``array`` (anything ``numpy.asarray`` takes) as a tensor.

        The data type is inferred from the array unless given. Strings become
        BYTES, encoded as UTF-8.
        """
        arr = np.asarray(array)
        dt = datatype or DataType.from_numpy(arr.dtype)
        if dt is DataType.BYTES:
            arr = as_bytes_array(arr)
        return cls(name, arr, dt)

    @classmethod
    def from_dlpack(cls, producer: Any, name: str = "") -> Tensor:
        """A tensor over what ``producer`` exports through DLPack (numpy, torch, cupy ...),
        without a copy: a host tensor over host memory, a device tensor over GPU
        memory (``tritonserver``'s ``Tensor.from_dlpack``)."""
        dlpack_device = getattr(producer, "__dlpack_device__", None)
        if dlpack_device is None or dlpack_device()[0] == KDLCPU:
            array = np.from_dlpack(producer)
            return cls(name, array, DataType.from_numpy(array.dtype))
        device = DeviceArray.from_dlpack(producer)
        return cls.on_device(name, device, DataType.from_numpy(device.dtype))

    @classmethod
    def from_string_array(cls, array: Any, name: str = "") -> Tensor:
        """A BYTES tensor of ``str`` values (UTF-8), as ``tritonserver``'s."""
        return cls(name, as_bytes_array(np.asarray(array, dtype=np.object_)), DataType.BYTES)

    @classmethod
    def from_bytes_array(cls, array: Any, name: str = "") -> Tensor:
        """A BYTES tensor of ``bytes`` values, as ``tritonserver``'s."""
        return cls(name, as_bytes_array(np.asarray(array, dtype=np.object_)), DataType.BYTES)

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape (a device tensor's without copying it). Assigning one of as
        many elements reshapes a host tensor's data (a view, no copy)."""
        device = self.device
        return device.shape if device is not None else self.data.shape

    @shape.setter
    def shape(self, shape: Any) -> None:
        if self.device is not None:
            self.device = self.device.reshape(shape)
            return
        self.data = self.data.reshape(tuple(shape))

    @property
    def data_ptr(self) -> int:
        """The address of the tensor's memory (0 for BYTES, which has no flat buffer here)."""
        if self.device is not None:
            return self.device.address
        return 0 if self.datatype is DataType.BYTES else int(self.data.ctypes.data)

    @property
    def size(self) -> int:
        """The tensor's size in bytes (BYTES: as serialized, each element behind its length)."""
        if self.device is not None:
            return self.device.nbytes
        if self.datatype is DataType.BYTES:
            return sum(4 + len(b) for b in as_bytes_array(self.data).reshape(-1))
        return int(self.data.nbytes)

    def as_numpy(self) -> np.ndarray[Any, Any]:
        """The tensor's data as a numpy array (no copy)."""
        return self.data

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Same as ``as_numpy`` (the name Triton's in-process API uses)."""
        return self.data

    def to_bytes_array(self) -> np.ndarray[Any, Any]:
        """BYTES data as an object array of ``bytes`` (other types: their values' text)."""
        return as_bytes_array(self.data)

    def to_string_array(self) -> np.ndarray[Any, Any]:
        """BYTES data decoded as UTF-8 ``str`` (object array)."""
        out = np.empty(self.data.shape, dtype=np.object_)
        out.reshape(-1)[:] = [b.decode("utf-8") for b in self.to_bytes_array().reshape(-1)]
        return out

    def __dlpack__(self, **kwargs: Any) -> Any:
        """DLPack of the tensor where it lies: its device memory, or its numpy array."""
        if self.device is not None:
            return self.device.__dlpack__(**kwargs)
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self.device is not None:
            return self.device.__dlpack_device__()
        return self.data.__dlpack_device__()


#: The slot behind a host tensor's ``data``; a device tensor's property reads and fills it.
_DATA_SLOT: Any = Tensor.__dict__["data"]


class _DeviceTensor(Tensor):
    """A device-resident ``Tensor``: ``data`` is copied to the host on first read."""

    __slots__ = ()

    def __init__(self, name: str, array: DeviceArray, datatype: DataType) -> None:
        self.name = name
        self.datatype = datatype
        self.device = array  # the data slot stays empty until ``data`` is read

    @property
    def data(self) -> np.ndarray[Any, Any]:
        """The tensor as a numpy array on the host (copied there once)."""
        try:
            return _DATA_SLOT.__get__(self)  # type: ignore[no-any-return]
        except AttributeError:
            assert self.device is not None
            value = self.device.to_host()
            _DATA_SLOT.__set__(self, value)
            return value

    @data.setter
    def data(self, value: np.ndarray[Any, Any]) -> None:
        """Assigned host data makes the tensor a host tensor."""
        _DATA_SLOT.__set__(self, value)
        self.device = None

    def __repr__(self) -> str:
        if self.device is None:
            return super().__repr__()
        return f"Tensor(name={self.name!r}, datatype={self.datatype}, data={self.device!r})"

    def renamed(self, name: str) -> Tensor:
        if self.device is None:
            return super().renamed(name)
        tensor = _DeviceTensor(name, self.device, self.datatype)
        try:  # the host copy, when it was made already, goes along
            _DATA_SLOT.__set__(tensor, _DATA_SLOT.__get__(self))
        except AttributeError:
            pass
        return tensor


def as_bytes_array(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Return ``array`` as an object array of ``bytes`` (UTF-8 for str)."""
    if array.dtype == np.object_:
        flat = array.reshape(-1)
        if all(isinstance(v, bytes) for v in flat):
            return array
    out = np.empty(array.shape, dtype=np.object_)
    src = array.reshape(-1)
    dst = out.reshape(-1)
    for i, value in enumerate(src):
        if isinstance(value, bytes):
            dst[i] = value
        elif isinstance(value, str):
            dst[i] = value.encode("utf-8")
        elif isinstance(value, np.bytes_):
            dst[i] = bytes(value)
        else:
            dst[i] = str(value).encode("utf-8")
    return out
