"""What the backend knows of an engine, as plain data.

``EngineInfo`` holds an engine's I/O tensors (name, input or output, data
type, dims with -1 for dynamic ones, shape tensor or not) and, per
optimization profile, each input's min / opt / max shape (a shape tensor
input's min / opt / max values). Everything that
decides something (auto-complete, config checks, profile choice, request
shape checks) works on it, so it is tested without TensorRT or a GPU;
``read_engine`` is the only code here that touches a TensorRT object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One I/O tensor of an engine.

    ``data_type`` is TensorRT's ``DataType`` name (``FLOAT``, ``HALF``,
    ``BF16``, ``INT8``, ``INT32``, ``INT64``, ``BOOL``, ``UINT8``, ...);
    ``dims`` has -1 for a dimension set at run time; ``io_format`` is TensorRT's
    ``TensorFormat`` name (``LINEAR``, or a vectorized layout such as ``CHW32``).
    """

    name: str
    is_input: bool
    data_type: str
    dims: tuple[int, ...]
    is_shape_tensor: bool = False
    io_format: str = "LINEAR"

    @property
    def is_non_linear(self) -> bool:
        """Whether the tensor's memory layout is not plain row-major (Triton's
        ``is_non_linear_format_io``)."""
        return self.io_format != "LINEAR"


#: Name → (min, opt, max): shapes of inputs, or values of shape tensor inputs.
Ranges = Mapping[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


@dataclass(frozen=True, slots=True)
class ProfileShapes:
    """One optimization profile: each input's (min, opt, max) shape, and each shape
    tensor input's (min, opt, max) values."""

    index: int
    shapes: Ranges = field(default_factory=dict)
    values: Ranges = field(default_factory=dict)

    def min(self, name: str) -> tuple[int, ...]:
        return self.shapes[name][0]

    def opt(self, name: str) -> tuple[int, ...]:
        return self.shapes[name][1]

    def max(self, name: str) -> tuple[int, ...]:
        return self.shapes[name][2]


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """An engine's tensors (in the engine's order) and optimization profiles."""

    tensors: tuple[TensorInfo, ...]
    profiles: tuple[ProfileShapes, ...]

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if t.is_input)

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if not t.is_input)

    def tensor(self, name: str) -> TensorInfo | None:
        return next((t for t in self.tensors if t.name == name), None)


def read_engine(trt: Any, engine: Any) -> EngineInfo:
    """``EngineInfo`` of a deserialized ``tensorrt.ICudaEngine`` (TensorRT >= 10's
    tensor-name API: ``num_io_tensors``, ``get_tensor_*``, ``get_tensor_profile_shape``)."""
    tensors = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        tensors.append(
            TensorInfo(
                name=name,
                is_input=is_input,
                data_type=engine.get_tensor_dtype(name).name,
                dims=tuple(int(d) for d in engine.get_tensor_shape(name)),
                is_shape_tensor=bool(engine.is_shape_inference_io(name)),
                io_format=engine.get_tensor_format(name).name,
            )
        )
    profiles = []
    for p in range(engine.num_optimization_profiles):
        shapes = {}
        values = {}
        for t in tensors:
            if t.is_input and t.is_shape_tensor:
                # (profile, name): the bindings' own parameter names say the opposite
                low, opt, high = engine.get_tensor_profile_values(p, t.name)
                values[t.name] = (_dims(low), _dims(opt), _dims(high))
            elif t.is_input:
                try:
                    low, opt, high = engine.get_tensor_profile_shape(t.name, p)
                    shapes[t.name] = (_dims(low), _dims(opt), _dims(high))
                except Exception:  # an input without dynamic dims may have no profile shapes
                    shapes[t.name] = (t.dims, t.dims, t.dims)
                if any(d < 0 for d in shapes[t.name][2]):  # none given: the fixed dims are the range
                    shapes[t.name] = (t.dims, t.dims, t.dims)
        profiles.append(ProfileShapes(p, shapes, values))
    return EngineInfo(tuple(tensors), tuple(profiles))


def _dims(shape: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)
