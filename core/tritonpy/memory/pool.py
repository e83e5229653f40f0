"""A byte budget of buffers from one allocator, pooled by size class.

Allocating pinned host memory (``cudaHostAlloc`` locks pages) or device memory
(``cudaMalloc`` synchronises) is slow, so buffers are kept by power-of-two size
class and reused. ``total_bytes`` is the budget (Triton's
``--pinned-memory-pool-byte-size`` / ``--cuda-memory-pool-byte-size``);
``used_bytes`` counts the buffers handed out and not yet given back. A request
the budget cannot meet answers None: the caller falls back to ordinary memory,
as Triton does when its pools are exhausted.

The pool only does accounting; the ``Allocator`` owns the memory, so the same
logic runs on host memory where there is no GPU.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass

#: The smallest size class (one page).
MIN_CLASS = 4096


@dataclass(frozen=True, slots=True)
class Allocator:
    """Where a pool's buffers come from: ``alloc(nbytes) -> address`` (raises on
    failure) and ``free(address)``."""

    alloc: Callable[[int], int]
    free: Callable[[int], None]


def size_class(nbytes: int) -> int:
    """The pooled size that holds ``nbytes``: the next power of two, at least a page."""
    return max(MIN_CLASS, 1 << max(0, (nbytes - 1).bit_length()))


class Pool:
    """Buffers of ``allocator`` within ``total_bytes``; thread-safe."""

    def __init__(self, allocator: Allocator, total_bytes: int) -> None:
        self._allocator = allocator
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        self.total_bytes = total_bytes
        #: Bytes of buffers handed out and not given back.
        self.used_bytes = 0
        #: Bytes taken from the allocator (handed out or kept for reuse).
        self.held_bytes = 0
        #: Requests the budget or the allocator could not meet.
        self.fallbacks = 0

    def take(self, nbytes: int) -> tuple[int, int] | None:
        """``(address, size)`` of a buffer of at least ``nbytes``; None to fall back."""
        size = size_class(nbytes)
        with self._lock:
            free = self._free.get(size)
            if free:
                self.used_bytes += size
                return free.pop(), size
            if self.held_bytes + size > self.total_bytes:
                self._evict(self.held_bytes + size - self.total_bytes)
            if self.held_bytes + size > self.total_bytes:
                self.fallbacks += 1
                return None
            self.held_bytes += size
            self.used_bytes += size
        try:
            address = self._allocator.alloc(size)
        except Exception:  # out of memory or a driver error: the caller falls back
            address = 0
        if not address:
            with self._lock:
                self.held_bytes -= size
                self.used_bytes -= size
                self.fallbacks += 1
            return None
        return address, size

    def give_back(self, address: int, size: int) -> None:
        """Return a buffer that ``take`` handed out."""
        with self._lock:
            self.used_bytes -= size
            self._free.setdefault(size, []).append(address)

    def _evict(self, wanted: int) -> None:
        """Free idle buffers of other sizes until ``wanted`` bytes are released (lock held)."""
        for size in sorted(self._free, reverse=True):
            addresses = self._free[size]
            while addresses and wanted > 0:
                self._allocator.free(addresses.pop())
                self.held_bytes -= size
                wanted -= size
            if wanted <= 0:
                return

    def close(self) -> None:
        """Free every idle buffer (buffers still handed out are freed by nobody:
        close a pool only when its users are gone)."""
        with self._lock:
            for size, addresses in self._free.items():
                for address in addresses:
                    self._allocator.free(address)
                self.held_bytes -= size * len(addresses)
            self._free.clear()


def host_allocator() -> Allocator:
    """Pageable host memory through ctypes: the pool logic without a GPU (tests,
    and a stand-in wherever an ``Allocator`` is wanted without CUDA)."""
    buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}
    lock = threading.Lock()

    def alloc(nbytes: int) -> int:
        buffer = ctypes.create_string_buffer(nbytes)
        address = ctypes.addressof(buffer)
        with lock:
            buffers[address] = buffer
        return address

    def free(address: int) -> None:
        with lock:
            del buffers[address]

    return Allocator(alloc, free)
