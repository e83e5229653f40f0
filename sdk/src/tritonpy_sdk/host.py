"""What a host of backends needs: the server, or a test harness. Not for backends.

A backend never calls these; the server (and :mod:`tritonpy_sdk.testing`)
uses them to check a backend against the hook specifications, bind its hooks
for direct calls, call lifecycle hooks with uniform errors, and collect the
responses a backend sends through response senders. It also holds the names
a host uses to find and describe backends: the entry-point group, the pluggy
project name and hook-specification marker, and the registry of backends'
custom metrics (a backend reaches its families through ``backend.server.metrics``).
"""

from ._hookspecs import PROJECT_NAME, hookspec
from ._metrics import MetricRegistry
from ._plugin import (
    ENTRY_POINT_GROUP,
    BackendHooks,
    PluginError,
    ask_gpu_support,
    call_hook,
    validate_backend,
)
from ._sender import execute_collect

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "BackendHooks",
    "MetricRegistry",
    "PluginError",
    "ask_gpu_support",
    "call_hook",
    "execute_collect",
    "hookspec",
    "validate_backend",
]
