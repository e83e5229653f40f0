"""tritonpy: a Triton-compatible inference server in Python, built from plugins.

The in-process API::

    import tritonpy
    with tritonpy.Server(model_repository="models") as server:
        outputs = server.model("simple").predict({"INPUT0": a, "INPUT1": b})
"""

from tritonpy_sdk import (
    AlreadyExistsError,
    CancelledError,
    DataType,
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    MetricKind,
    NotFoundError,
    Tensor,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)

from ._version import __version__
from .handle import ModelDictionary, ModelHandle
from .options import Options, ServerOptions
from .response_iterators import AsyncResponseIterator, ResponseIterator
from .runtime.model import ModelState
from .server import Server
from .tritonserver_metrics import Metric, MetricFamily
from .tritonserver_options import (
    InstanceGroupKind,
    LogFormat,
    MemoryType,
    MetricFormat,
    ModelBatchFlag,
    ModelControlMode,
    ModelLoadDeviceLimit,
    ModelTxnPropertyFlag,
    RateLimiterResource,
    RateLimitMode,
)
from .tritonserver_request import InferenceRequest

__all__ = [
    "AlreadyExistsError",
    "AsyncResponseIterator",
    "CancelledError",
    "DataType",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceGroupKind",
    "InternalError",
    "InvalidArgumentError",
    "LogFormat",
    "MemoryType",
    "Metric",
    "MetricFamily",
    "MetricFormat",
    "MetricKind",
    "ModelBatchFlag",
    "ModelControlMode",
    "ModelDictionary",
    "ModelHandle",
    "ModelLoadDeviceLimit",
    "ModelState",
    "ModelTxnPropertyFlag",
    "NotFoundError",
    "Options",
    "RateLimitMode",
    "RateLimiterResource",
    "ResponseIterator",
    "Server",
    "ServerOptions",
    "Tensor",
    "TritonError",
    "UnavailableError",
    "UnknownError",
    "UnsupportedError",
    "__version__",
]
