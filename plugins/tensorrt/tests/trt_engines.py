"""Engines as plain data (``EngineInfo``), the shapes the GPU tests build for real."""

from __future__ import annotations

from tritonpy_backend_tensorrt._engine import EngineInfo, ProfileShapes, TensorInfo


def tensor(name: str, dims: tuple[int, ...], dtype: str = "FLOAT", is_input: bool = True) -> TensorInfo:
    return TensorInfo(name, is_input, dtype, dims)


def profile(index: int, **shapes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]) -> ProfileShapes:
    return ProfileShapes(index, shapes)


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
