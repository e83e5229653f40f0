"""The response cache interface: what a cache plugin implements.

A cache package declares a factory under the entry-point group
``tritonpy.caches``; the entry point's name is the cache name used by
``--cache-config <name>,<key>=<value>``. The factory is called once with the
settings (strings) and returns an object with ``lookup`` and ``insert``. The
server calls them from several threads at once: implementations must be
thread-safe. Keys are opaque bytes (a digest of the model, version, inputs and
requested outputs); values are complete responses, which a cache may store
by reference (in process) or serialise (remote caches).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from ._inference import InferenceResponse

#: The entry-point group of cache implementations.
CACHE_ENTRY_POINT_GROUP = "tritonpy.caches"


@runtime_checkable
class ResponseCache(Protocol):
    """A response cache. ``lookup`` returns None on a miss; ``insert`` may evict, and
    raises (a ``TritonError`` says why) when it cannot keep the response: the server
    logs Triton's ``Failed to insert key [...] into response cache: <why>`` and answers
    the request as usual."""

    def lookup(self, key: bytes) -> InferenceResponse | None: ...

    def insert(self, key: bytes, response: InferenceResponse) -> None: ...

    def stats(self) -> Mapping[str, float]:
        """Counters for metrics: at least ``entries``, ``lookups``, ``hits``,
        ``misses``, ``evictions`` and ``utilization`` (0..1); optionally
        ``lookup_duration_us`` and ``insertion_duration_us``, the total time
        spent in ``lookup`` and ``insert`` (0 when left out)."""
        ...


#: What a ``tritonpy.caches`` entry point refers to.
CacheFactory = Callable[[Mapping[str, str]], ResponseCache]
