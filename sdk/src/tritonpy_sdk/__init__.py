"""tritonpy-sdk: the contract between the tritonpy server and its backends.

A backend is a small package that declares itself under the entry-point group
``tritonpy.backends`` and depends on this package only, never on the server.
It is written in one of two styles:

- a :class:`Predictor` subclass (``load()`` and ``predict(inputs) -> outputs``),
  from which the SDK derives the hooks;
- a module implementing the hooks themselves, each marked with
  :data:`hookimpl`; their specifications, call order and threads are the
  docstring of ``tritonpy_sdk._hookspecs``.

What only a host of backends uses (the server, the test harness) lives in
:mod:`tritonpy_sdk.host`; what a response-cache plugin implements, in
:mod:`tritonpy_sdk.cache`. Their names that this namespace held before are
still found here, with a DeprecationWarning naming the new place.
"""

import warnings
from typing import TYPE_CHECKING, Any

from ._autocomplete import complete_input, complete_max_batch_size, complete_output
from ._backend_info import BackendInfo, GpuSupport
from ._batching import (
    batch_arrays,
    batch_sizes,
    copy_rows,
    gather_inputs,
    outputs_to_compute,
    scatter_output,
    scatter_responses,
)
from ._bytes import deserialize_bytes_tensor, serialize_bytes_tensor
from ._datatype import DataType
from ._device_array import DeviceArray
from ._device_memory import (
    DeviceMemory,
    cuda_runtime_module,
    gather_tensor,
    scatter_device,
    scatter_device_outputs,
    wanted_on_device,
)
from ._direct import DirectCall
from ._dlpack import KDLCPU, KDLCUDA
from ._errors import (
    AlreadyExistsError,
    CancelledError,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)
from ._hookspecs import hookimpl
from ._inference import InferenceRequest, InferenceResponse, ParameterValue, RequestedOutput
from ._metrics import Metric, MetricFamily, MetricKind
from ._objects import Backend, ExecuteComplete, Model, ModelInstance
from ._predictor import PartialResult, Predictor
from ._ragged import BatchOutputs, batch_input_array, gather_ragged
from ._sender import RESPONSE_COMPLETE_FINAL, ResponseSender
from ._sequence import SEQUENCE_END, SEQUENCE_START, sequence_inputs, sequence_state_outputs
from ._server_api import OnResponse, ServerApi
from ._tensor import Tensor, as_bytes_array

__all__ = [
    "AlreadyExistsError",
    "Backend",
    "BackendInfo",
    "BatchOutputs",
    "CancelledError",
    "DataType",
    "DeviceArray",
    "DeviceMemory",
    "DirectCall",
    "ErrorCode",
    "ExecuteComplete",
    "GpuSupport",
    "InferenceRequest",
    "InferenceResponse",
    "InternalError",
    "InvalidArgumentError",
    "KDLCPU",
    "KDLCUDA",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "Model",
    "ModelInstance",
    "NotFoundError",
    "OnResponse",
    "ParameterValue",
    "PartialResult",
    "Predictor",
    "RESPONSE_COMPLETE_FINAL",
    "RequestedOutput",
    "ResponseSender",
    "SEQUENCE_END",
    "SEQUENCE_START",
    "ServerApi",
    "Tensor",
    "TritonError",
    "UnavailableError",
    "UnknownError",
    "UnsupportedError",
    "as_bytes_array",
    "batch_arrays",
    "batch_input_array",
    "batch_sizes",
    "complete_input",
    "complete_max_batch_size",
    "complete_output",
    "copy_rows",
    "cuda_runtime_module",
    "deserialize_bytes_tensor",
    "gather_inputs",
    "gather_ragged",
    "gather_tensor",
    "hookimpl",
    "outputs_to_compute",
    "scatter_device",
    "scatter_device_outputs",
    "scatter_output",
    "scatter_responses",
    "sequence_inputs",
    "sequence_state_outputs",
    "serialize_bytes_tensor",
    "wanted_on_device",
]

#: Names that moved out of the backend author's namespace: where each lives now.
_MOVED = {
    "ENTRY_POINT_GROUP": "tritonpy_sdk.host",
    "PROJECT_NAME": "tritonpy_sdk.host",
    "hookspec": "tritonpy_sdk.host",
    "MetricRegistry": "tritonpy_sdk.host",
    "CACHE_ENTRY_POINT_GROUP": "tritonpy_sdk.cache",
    "CacheFactory": "tritonpy_sdk.cache",
    "ResponseCache": "tritonpy_sdk.cache",
}

if not TYPE_CHECKING:  # at run time only: type checkers see the moved names as gone

    def __getattr__(name: str) -> Any:
        where = _MOVED.get(name)
        if where is None:
            raise AttributeError(f"module 'tritonpy_sdk' has no attribute '{name}'")
        warnings.warn(
            f"tritonpy_sdk.{name} moved to {where}.{name}: import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        import importlib

        return getattr(importlib.import_module(where), name)
