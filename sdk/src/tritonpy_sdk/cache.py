"""What a response-cache plugin implements (entry-point group ``tritonpy.caches``).

A cache package declares a :data:`CacheFactory` under :data:`CACHE_ENTRY_POINT_GROUP`;
the entry point's name is the cache name of ``--cache-config <name>,<key>=<value>``.
The factory is called once with the settings and returns a :class:`ResponseCache`.
Backends never need this module.
"""

from ._cache import CACHE_ENTRY_POINT_GROUP, CacheFactory, ResponseCache

__all__ = ["CACHE_ENTRY_POINT_GROUP", "CacheFactory", "ResponseCache"]
