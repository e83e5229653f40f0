"""The response cache: the built-in ``local`` cache, cache plugins, and cache keys.

``--cache-config local,size=N`` gives an in-process LRU cache bounded to N
bytes of output data; other caches are packages declaring a factory under the
entry-point group ``tritonpy.caches`` (``--cache-config redis,host=...``).
Models opt in with ``response_cache { enable: true }``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from importlib.metadata import entry_points

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    Tensor,
    TritonError,
    serialize_bytes_tensor,
)
from tritonpy_sdk.cache import CACHE_ENTRY_POINT_GROUP, ResponseCache


def cache_key(request: InferenceRequest) -> bytes:
    """A digest of what determines a response: model, version, inputs, requested outputs."""
    h = hashlib.blake2b(digest_size=32)
    h.update(f"{request.model_name}\0{request.model_version}\0".encode())
    for name in sorted(request.inputs):
        tensor = request.inputs[name]
        h.update(f"{name}\0{tensor.datatype.value}\0{tensor.data.shape}\0".encode())
        data = tensor.data
        if tensor.datatype is DataType.BYTES:
            h.update(serialize_bytes_tensor(data))
        else:
            h.update(np.ascontiguousarray(data).view(np.uint8).reshape(-1).data)
    for out in sorted(request.requested_outputs, key=lambda o: o.name):
        h.update(f"out\0{out.name}\0{sorted(out.parameters.items())}\0".encode())
    return h.digest()


def _size(response: InferenceResponse) -> int:
    total = 0
    for tensor in response.outputs.values():
        data = tensor.data
        total += sum(len(v) for v in data.reshape(-1)) if data.dtype == object else data.nbytes
    return total + 256  # bookkeeping per entry


def _snapshot(tensor: Tensor) -> Tensor:
    """A read-only copy of ``tensor`` for the cache to keep. What a model answered may
    be a view of memory its owner changes later (a model that hands back its input: a
    client's shared-memory region, an in-process caller's array), and whoever gets a
    cached answer must not change it for the next."""
    data = np.array(tensor.data, copy=True)
    data.flags.writeable = False
    return Tensor(tensor.name, data, tensor.datatype)


class LocalCache:
    """In-process LRU cache bounded by the bytes of the outputs it holds."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("the local cache needs size=<bytes> greater than 0")
        self.capacity = size
        self._entries: OrderedDict[bytes, tuple[InferenceResponse, int]] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()
        self._counts = {"lookups": 0, "hits": 0, "misses": 0, "evictions": 0}
        #: Total time spent in ``lookup`` and in ``insert``, in nanoseconds.
        self._lookup_ns = 0
        self._insertion_ns = 0

    def lookup(self, key: bytes) -> InferenceResponse | None:
        start = time.monotonic_ns()
        with self._lock:
            self._counts["lookups"] += 1
            entry = self._entries.get(key)
            if entry is None:
                self._counts["misses"] += 1
            else:
                self._entries.move_to_end(key)
                self._counts["hits"] += 1
            self._lookup_ns += time.monotonic_ns() - start
        return None if entry is None else entry[0]

    def insert(self, key: bytes, response: InferenceResponse) -> None:
        start = time.monotonic_ns()
        size = _size(response)
        if size > self.capacity:  # never stored; Triton's local cache's words
            raise TritonError.internal(
                f"Requested byte_size: {size} is greater than total cache size: {self.capacity}"
            )
        outputs = {name: _snapshot(tensor) for name, tensor in response.outputs.items()}
        stored = InferenceResponse(outputs, parameters=dict(response.parameters))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._used -= old[1]
            while self._entries and self._used + size > self.capacity:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._used -= evicted
                self._counts["evictions"] += 1
            self._entries[key] = (stored, size)
            self._used += size
            self._insertion_ns += time.monotonic_ns() - start

    def stats(self) -> Mapping[str, float]:
        with self._lock:
            return {
                **self._counts,
                "entries": len(self._entries),
                "utilization": self._used / self.capacity,
                "lookup_duration_us": self._lookup_ns // 1000,
                "insertion_duration_us": self._insertion_ns // 1000,
            }


def create_cache(name: str, settings: Mapping[str, str]) -> ResponseCache:
    """The cache ``name`` (``local`` or a ``tritonpy.caches`` plugin) with ``settings``."""
    if name == "local":
        try:
            return LocalCache(int(settings.get("size", "0")))
        except ValueError as exc:
            raise TritonError.invalid_arg(f"--cache-config local: {exc}") from None
    for ep in entry_points(group=CACHE_ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                cache = ep.load()(settings)
            except Exception as exc:  # the plugin's failure, reported with its name
                raise TritonError.invalid_arg(f"cache '{name}' failed to start: {exc}") from None
            if not isinstance(cache, ResponseCache):
                raise TritonError.invalid_arg(f"cache '{name}' does not implement lookup/insert/stats")
            return cache
    raise TritonError.invalid_arg(f"unknown cache '{name}': use 'local' or install a tritonpy.caches package")
