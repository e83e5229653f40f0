"""Engines as plain data (``EngineInfo``), the shapes the GPU tests build for real."""

from __future__ import annotations

from tritonpy_backend_tensorrt._engine import EngineInfo, ProfileShapes, TensorInfo


def tensor(name: str, dims: tuple[int, ...], dtype: str = "FLOAT", is_input: bool = True) -> TensorInfo:
    return TensorInfo(name, is_input, dtype, dims)


Range = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def profile(index: int, values: dict[str, Range] | None = None, **shapes: Range) -> ProfileShapes:
    """Profile ``index``: each input's (min, opt, max) shape; a shape tensor's values in ``values``."""
    return ProfileShapes(index, shapes, values or {})


def add_engine(max_batch: int = 8) -> EngineInfo:
    """INPUT0 + INPUT1 -> OUTPUT0, [-1,4] float, one profile of batch 1..max_batch."""
    rng = ((1, 4), (max(1, max_batch // 2), 4), (max_batch, 4))
    return EngineInfo(
        (tensor("INPUT0", (-1, 4)), tensor("INPUT1", (-1, 4)), tensor("OUTPUT0", (-1, 4), is_input=False)),
        (profile(0, INPUT0=rng, INPUT1=rng),),
    )


def two_profile_engine() -> EngineInfo:
    """X [-1,-1] -> Y: profile 0 holds batches 1..4 of width 1..8, profile 1 batches 5..16."""
    return EngineInfo(
        (tensor("X", (-1, -1)), tensor("Y", (-1, -1), is_input=False)),
        (
            profile(0, X=((1, 1), (2, 4), (4, 8))),
            profile(1, X=((5, 1), (8, 4), (16, 8))),
        ),
    )


def static_engine() -> EngineInfo:
    """An engine without dynamic dims: X [2,3] int32 -> Y [2,3]."""
    shape = ((2, 3), (2, 3), (2, 3))
    return EngineInfo(
        (tensor("X", (2, 3), "INT32"), tensor("Y", (2, 3), "INT32", is_input=False)),
        (profile(0, X=shape),),
    )


def shape_tensor_engine(max_batch: int = 8, max_value: int = 32) -> EngineInfo:
    """The engine of Triton's own shape tensor tests (``plan_zero_1_float32_int32``): DUMMY_INPUT0
    [-1,-1,-1] float resized to the values of INPUT0, an INT32 shape tensor of the batch size
    and 2 values, into DUMMY_OUTPUT0, and OUTPUT0, an INT64 shape tensor of the same values."""
    low, opt, high = (1, 1, 1), (max(1, max_batch // 2), 16, 16), (max_batch, max_value, max_value)
    return EngineInfo(
        (
            tensor("DUMMY_INPUT0", (-1, -1, -1)),
            TensorInfo("INPUT0", True, "INT32", (3,), is_shape_tensor=True),
            tensor("DUMMY_OUTPUT0", (-1, -1, -1), is_input=False),
            TensorInfo("OUTPUT0", False, "INT64", (3,), is_shape_tensor=True),
        ),
        (profile(0, {"INPUT0": (low, opt, high)}, DUMMY_INPUT0=(low, opt, high)),),
    )
