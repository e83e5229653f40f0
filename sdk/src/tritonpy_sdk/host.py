"""What a host of backends needs: the server, or a test harness. Not for backends.

A backend never calls these; the server (and :mod:`tritonpy_sdk.testing`)
uses them to check a backend against the hook specifications, bind its hooks
for direct calls, call lifecycle hooks with uniform errors, and collect the
responses a backend sends through response senders.
"""

from ._plugin import BackendHooks, PluginError, ask_gpu_support, call_hook, validate_backend
from ._sender import execute_collect

__all__ = [
    "BackendHooks",
    "PluginError",
    "ask_gpu_support",
    "call_hook",
    "execute_collect",
    "validate_backend",
]
