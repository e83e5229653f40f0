"""What every kind of registered region shares: the bounds check of the slice a
tensor's ``shared_memory_offset`` / ``shared_memory_byte_size`` name."""

from __future__ import annotations

from tritonpy_sdk import TritonError


def check_bounds(name: str, region_size: int, offset: int, byte_size: int) -> None:
    """Triton's error unless ``byte_size`` bytes at ``offset`` lie inside the region."""
    if offset < 0 or byte_size < 0 or offset + byte_size > region_size:
        raise TritonError.invalid_arg(f"Invalid offset + byte size for shared memory region: '{name}'")
