"""tritonpy: a Triton-compatible inference server in Python, built from plugins.

The in-process API::

    import tritonpy
    with tritonpy.Server(model_repository="models") as server:
        outputs = server.model("simple").predict({"INPUT0": a, "INPUT1": b})
"""

from tritonpy_sdk import DataType, InferenceRequest, InferenceResponse, Tensor, TritonError

from ._version import __version__
from .flags import MetricFormat, ModelBatchFlag, ModelTxnPropertyFlag
from .handle import ModelDictionary, ModelHandle
from .options import ServerOptions
from .runtime.model import ModelState
from .server import Server

#: ``tritonserver``-style alias: ``tritonpy.Options(model_repository=...)``.
Options = ServerOptions

__all__ = [
    "DataType",
    "InferenceRequest",
    "InferenceResponse",
    "MetricFormat",
    "ModelBatchFlag",
    "ModelDictionary",
    "ModelHandle",
    "ModelState",
    "ModelTxnPropertyFlag",
    "Options",
    "Server",
    "ServerOptions",
    "Tensor",
    "TritonError",
    "__version__",
]
