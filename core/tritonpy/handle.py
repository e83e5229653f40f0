"""``ModelHandle``: one model of an in-process ``Server``, as ``tritonserver``'s ``Model``.

What ``Server.model(name)`` and ``Server.load(name)`` return: readiness,
metadata and config of the model, requests built from numpy arrays
(``inputs.input_tensor``), and inference as an iterator of responses (``infer``,
``async_infer``) or numpy in, numpy out (``predict``). Everything goes through
the ``Server``'s own methods: a handle holds no state of the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    RequestedOutput,
    Tensor,
    TritonError,
)

from .inputs import NUMERIC, input_tensor
from .response_iterators import AsyncResponseIterator, ResponseIterator
from .tritonserver_options import MemoryType, ModelBatchFlag, ModelTxnPropertyFlag, parse_memory_type

if TYPE_CHECKING:
    from .server import Server


class ModelDictionary(dict[tuple[str, int], dict[str, Any]]):
    """What ``Server.models()`` returns, as ``tritonserver``'s: ``{(name, version): {"name",
    "version", "state"[, "reason"]}}``; indexed by a name alone, the model's handle."""

    def __init__(self, server: Server, rows: Mapping[tuple[str, int], dict[str, Any]]) -> None:
        super().__init__(rows)
        self._server = server

    def __getitem__(self, key: tuple[str, int] | str) -> Any:
        if isinstance(key, tuple):
            try:
                return dict.__getitem__(self, key)
            except KeyError:
                raise KeyError(f"Unknown Model: {key}") from None
        if any(name == key for name, _ in self):
            return ModelHandle(self._server, key)
        raise KeyError(f"Unknown Model: {key}")


class ModelHandle:
    """One model of a ``Server``, as ``tritonserver``'s ``Model`` object."""

    def __init__(self, server: Server, name: str, version: int = -1) -> None:
        self._server = server
        self.name = name
        self.version = version

    def ready(self) -> bool:
        return self._server.model_ready(self.name, self.version)

    def metadata(self) -> dict[str, Any]:
        return self._server.model_metadata(self.name, self.version)

    def config(self, config_version: int = 1) -> dict[str, Any]:
        """The model's configuration (``config_version``: 1, the only one, as in Triton)."""
        if config_version != 1:
            raise TritonError.invalid_arg(f"model configuration version {config_version} not supported")
        return self._server.model_config(self.name, self.version)

    def statistics(self) -> dict[str, Any]:
        """``{"model_stats": [...]}``: the statistics extension's answer for this model
        (every loaded version when the handle's version is -1)."""
        version = None if self.version == -1 else self.version
        return {"model_stats": self._server.model_statistics(self.name, version)}

    def batch_properties(self) -> ModelBatchFlag:
        """``FIRST_DIM`` when the model batches along its first dimension, else ``UNKNOWN``."""
        batches = self._server.get_version(self.name, self.version).config.max_batch_size > 0
        return ModelBatchFlag.FIRST_DIM if batches else ModelBatchFlag.UNKNOWN

    def transaction_properties(self) -> ModelTxnPropertyFlag:
        """``DECOUPLED`` for a model that sends any number of responses per request, else
        ``ONE_TO_ONE``."""
        if self._server.is_decoupled(self.name, self.version):
            return ModelTxnPropertyFlag.DECOUPLED
        return ModelTxnPropertyFlag.ONE_TO_ONE

    def _declared(self, input_name: str) -> DataType | None:
        """The data type the model declares for an input (None: no such model or input)."""
        try:
            spec = self._server.model_spec(self.name, self.version)
        except TritonError:
            return None
        found = spec.inputs.get(input_name)
        return found.datatype if found is not None else None

    def create_request(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        requested_output_names: list[str] | None = None,
        parameters: Mapping[str, ParameterValue] | None = None,
        request_id: str | None = "",
        correlation_id: int | str | None = None,
        flags: int = 0,
        priority: int = 0,
        timeout: int = 0,
        output_memory_type: Any = None,
    ) -> InferenceRequest:
        """Build a request from numpy arrays (see ``input_tensor`` for what else is taken),
        with ``tritonserver``'s request fields: ``correlation_id``, ``flags``, ``priority``,
        ``timeout`` (µs) and ``output_memory_type`` (``"cpu"``, ``"gpu:0"``, a
        ``MemoryType``: where the outputs are wanted). A parameter that is not a bool,
        int, float or str raises InvalidArgumentError, as ``tritonserver`` does."""
        tensors: dict[str, Tensor] = {}
        for name, value in (inputs or {}).items():
            # A plain numeric array (the common case) is taken as it is, without a call
            # of ``input_tensor`` (which would take it the same way).
            datatype = NUMERIC.get(value.dtype) if type(value) is np.ndarray else None
            tensors[name] = (
                Tensor(name, value, datatype)
                if datatype is not None
                else input_tensor(self.name, name, value, self._declared)
            )
        if parameters:
            _check_parameters(parameters)
        outputs = [RequestedOutput(n) for n in requested_output_names] if requested_output_names else []
        if output_memory_type is not None:
            outputs = self._placed(outputs, output_memory_type)
        request = InferenceRequest(
            self.name,
            self.version,
            tensors,
            outputs,
            request_id or "",
            dict(parameters) if parameters else {},
        )
        if correlation_id is not None or flags or priority or timeout:  # set only when given: the common
            request.correlation_id = correlation_id if correlation_id is not None else 0  # call stays short
            request.flags = flags
            request.priority = priority
            request.timeout_us = timeout
        return request

    def _placed(self, outputs: list[RequestedOutput], memory_type: Any) -> list[RequestedOutput]:
        """``outputs`` (every output of the model when none is named) wanted where
        ``memory_type`` says: on a GPU, or (CPU, pinned CPU) on the host, as always."""
        kind, device_id = parse_memory_type(memory_type)
        if kind is not MemoryType.GPU:
            return outputs
        if not outputs:
            outputs = [RequestedOutput(n) for n in self._server.model_spec(self.name, self.version).outputs]
        for output in outputs:
            output.device_id = device_id
        return outputs

    def infer(
        self,
        inputs: Mapping[str, Any] | InferenceRequest | None = None,
        raise_on_error: bool = True,
        response_queue: Any = None,
        **kwargs: Any,
    ) -> ResponseIterator:
        """Submit one request; iterate what this returns for its responses (one unless the
        model is decoupled). A request the server refuses raises here (with
        ``raise_on_error``); ``response_queue`` also gets every response. ``inputs`` is
        a mapping of inputs, or a request (also by ``tritonserver``'s keyword,
        ``inference_request``), whose inputs and parameters may have been set since
        it was made."""
        request, queue = self._request(inputs, kwargs)
        return ResponseIterator(self._server, request, raise_on_error, response_queue or queue)

    def async_infer(
        self,
        inputs: Mapping[str, Any] | InferenceRequest | None = None,
        raise_on_error: bool = True,
        response_queue: asyncio.Queue[InferenceResponse] | None = None,
        **kwargs: Any,
    ) -> AsyncResponseIterator:
        """``infer`` on the running event loop: ``async for response in model.async_infer(...)``;
        ``response_queue`` (an ``asyncio.Queue``) also gets every response."""
        request, queue = self._request(inputs, kwargs)
        return AsyncResponseIterator(self._server, request, raise_on_error, response_queue or queue)

    def _request(
        self, inputs: Mapping[str, Any] | InferenceRequest | None, kwargs: dict[str, Any]
    ) -> tuple[InferenceRequest, Any]:
        """The request ``infer`` submits, and the response queue it carries (a
        ``tritonpy.InferenceRequest``'s): ``inputs`` (or ``tritonserver``'s keyword
        ``inference_request``) as submitted, or one made from ``inputs`` and ``kwargs``."""
        if "inference_request" in kwargs:
            inputs = kwargs.pop("inference_request")
        if isinstance(inputs, InferenceRequest):
            return self._submitted(inputs), getattr(inputs, "response_queue", None)
        return self.create_request(inputs, **kwargs), None

    def _submitted(self, request: InferenceRequest) -> InferenceRequest:
        """``request`` as submitted: inputs set since it was made (``request.inputs[name]
        = array``, as ``tritonserver``'s requests take them) made tensors, its parameters
        checked, and its ``output_memory_type`` (a ``tritonpy.InferenceRequest``'s) applied."""
        inputs = request.inputs
        for name, value in inputs.items():
            if not isinstance(value, Tensor):
                inputs[name] = input_tensor(request.model_name, name, value, self._declared)
        if request.parameters:
            _check_parameters(request.parameters)
        memory_type = getattr(request, "output_memory_type", None)
        if memory_type is not None:
            request.requested_outputs = self._placed(list(request.requested_outputs), memory_type)
        return request

    def predict(self, inputs: Mapping[str, Any], **kwargs: Any) -> dict[str, np.ndarray[Any, Any]]:
        """Python-native shortcut: numpy arrays in, ``{output name: numpy array}`` out."""
        if not kwargs and type(inputs) is dict:
            # Through the backend's ``execute_direct`` when nothing needs the request and
            # response objects, else the usual way (``Server.predict``).
            return self._server.predict(self.name, self.version, inputs, self.create_request)
        return response_arrays(self._server.infer(self.create_request(inputs, **kwargs)))


def _check_parameters(parameters: Mapping[str, Any]) -> None:
    """A parameter that is not a bool, int, float or str raises InvalidArgumentError, as
    ``tritonserver`` refuses it."""
    for key, value in parameters.items():
        if not isinstance(value, bool | int | float | str):
            raise TritonError.invalid_arg(
                f"parameter '{key}' must be a bool, int, float or str, not {type(value).__name__}"
            )


def response_arrays(response: InferenceResponse) -> dict[str, np.ndarray[Any, Any]]:
    """``predict``'s answer: ``{output name: array}`` of a response without an error."""
    outputs = {}
    for name, tensor in response.outputs.items():  # a loop: no comprehension's frame
        outputs[name] = tensor.data
    return outputs
