"""tritonpy: a Triton-compatible inference server in Python, built from plugins.

The in-process API::

    import tritonpy
    with tritonpy.Server(model_repository="models") as server:
        outputs = server.model("simple").predict({"INPUT0": a, "INPUT1": b})
"""

from tritonpy_sdk import DataType, InferenceRequest, InferenceResponse, Tensor, TritonError

from ._version import __version__
from .handle import ModelDictionary, ModelHandle
from .options import Options, ServerOptions
from .runtime.model import ModelState
from .server import Server
from .tritonserver_options import (
    InstanceGroupKind,
    LogFormat,
    MetricFormat,
    ModelBatchFlag,
    ModelControlMode,
    ModelLoadDeviceLimit,
    ModelTxnPropertyFlag,
    RateLimiterResource,
    RateLimitMode,
)

__all__ = [
    "DataType",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceGroupKind",
    "LogFormat",
    "MetricFormat",
    "ModelBatchFlag",
    "ModelDictionary",
    "ModelControlMode",
    "ModelHandle",
    "ModelLoadDeviceLimit",
    "ModelState",
    "ModelTxnPropertyFlag",
    "Options",
    "RateLimitMode",
    "RateLimiterResource",
    "Server",
    "ServerOptions",
    "Tensor",
    "TritonError",
    "__version__",
]
