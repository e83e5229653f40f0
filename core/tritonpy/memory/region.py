"""What every kind of registered region shares: the bounds check of the slice a
tensor's ``shared_memory_offset`` / ``shared_memory_byte_size`` name."""

from __future__ import annotations

from tritonpy_sdk import TritonError

#: The largest ``size_t``: offsets and sizes are unsigned 64-bit numbers, as in Triton.
SIZE_MAX = 2**64 - 1


def check_bounds(name: str, region_size: int, offset: int, byte_size: int) -> None:
    """Triton's error unless ``byte_size`` bytes at ``offset`` lie inside the region, in
    its order: an offset at or past the region's end, then a sum past 64 bits, then a
    slice that runs past the end. A negative number reads as C reads it as a ``size_t``."""
    offset %= SIZE_MAX + 1
    byte_size %= SIZE_MAX + 1
    if offset >= region_size:
        raise TritonError.invalid_arg(f"Invalid offset for shared memory region: '{name}'")
    if byte_size > SIZE_MAX - offset:
        raise TritonError.invalid_arg(
            f"Integer overflow detected: byte_size ({byte_size}) + offset ({offset}) exceeds "
            f"maximum value ({SIZE_MAX}) for region '{name}'"
        )
    if offset + byte_size > region_size:
        raise TritonError.invalid_arg(f"Invalid offset + byte size for shared memory region: '{name}'")
