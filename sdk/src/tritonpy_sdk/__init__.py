"""tritonpy-sdk: the contract between the tritonpy server and its backends.

A backend is a small package that implements the hooks in
:mod:`tritonpy_sdk.hookspecs` (marked with :data:`hookimpl`) and declares
itself under the entry-point group ``tritonpy.backends``. It depends on this
package only, never on the server.
"""

from ._backend_info import BackendInfo
from ._batching import batch_sizes, gather_inputs, outputs_to_compute, scatter_output, scatter_responses
from ._bytes import deserialize_bytes_tensor, serialize_bytes_tensor
from ._cache import CACHE_ENTRY_POINT_GROUP, CacheFactory, ResponseCache
from ._datatype import DataType
from ._errors import ErrorCode, TritonError
from ._hookspecs import PROJECT_NAME, hookimpl, hookspec
from ._inference import InferenceRequest, InferenceResponse, ParameterValue, RequestedOutput
from ._metrics import Metric, MetricFamily, MetricKind, MetricRegistry
from ._objects import Backend, ExecuteComplete, Model, ModelInstance
from ._plugin import BackendHooks, PluginError, call_hook, validate_backend
from ._ragged import batch_input_array, gather_ragged
from ._sender import RESPONSE_COMPLETE_FINAL, ResponseSender, execute_collect
from ._sequence import SEQUENCE_END, SEQUENCE_START, sequence_inputs, sequence_state_outputs
from ._server_api import OnResponse, ServerApi
from ._tensor import Tensor, as_bytes_array

#: The entry-point group under which backend packages declare themselves.
ENTRY_POINT_GROUP = "tritonpy.backends"

__all__ = [
    "CACHE_ENTRY_POINT_GROUP",
    "ENTRY_POINT_GROUP",
    "CacheFactory",
    "ResponseCache",
    "PROJECT_NAME",
    "Backend",
    "BackendHooks",
    "BackendInfo",
    "DataType",
    "ErrorCode",
    "ExecuteComplete",
    "InferenceRequest",
    "InferenceResponse",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "MetricRegistry",
    "Model",
    "OnResponse",
    "RESPONSE_COMPLETE_FINAL",
    "SEQUENCE_END",
    "SEQUENCE_START",
    "ResponseSender",
    "ServerApi",
    "ModelInstance",
    "ParameterValue",
    "PluginError",
    "RequestedOutput",
    "Tensor",
    "TritonError",
    "as_bytes_array",
    "batch_input_array",
    "batch_sizes",
    "call_hook",
    "deserialize_bytes_tensor",
    "execute_collect",
    "gather_inputs",
    "gather_ragged",
    "hookimpl",
    "hookspec",
    "outputs_to_compute",
    "scatter_output",
    "scatter_responses",
    "sequence_inputs",
    "sequence_state_outputs",
    "serialize_bytes_tensor",
    "validate_backend",
]
