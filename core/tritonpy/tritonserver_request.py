"""``tritonpy.InferenceRequest``: ``tritonserver``'s request class, which is also the backend SDK's.

Given a model handle first, it is built as ``tritonserver`` builds its own::

    request = tritonpy.InferenceRequest(server.model("simple"), request_id="7", timeout=1000)
    request.inputs["INPUT0"] = numpy.ones((1, 16), numpy.int32)  # set or replaced until submitted
    for response in server.model("simple").infer(request): ...

with ``tritonserver``'s fields: ``model``, ``request_id``, ``flags``,
``correlation_id``, ``priority``, ``timeout`` (µs), ``inputs`` (tensors, or what
``Tensor`` is made from: arrays, lists, strings), ``parameters``,
``output_memory_type`` and ``response_queue``. Given a model name (a str) first,
it is the SDK's ``InferenceRequest(model_name, model_version, inputs, ...)``,
what ``Server.infer`` and ``server.infer_async`` take. Either way it is a
``tritonpy_sdk.InferenceRequest``: ``model.create_request(...)`` makes one too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tritonpy_sdk import InferenceRequest as RequestBase
from tritonpy_sdk import ParameterValue

if TYPE_CHECKING:
    from .handle import ModelHandle


class InferenceRequest(RequestBase):
    """A request of ``model`` (a handle) as ``tritonserver``'s, or the SDK's by model name."""

    __slots__ = ("model", "output_memory_type", "response_queue")

    def __init__(self, model: ModelHandle | str | None = None, *args: Any, **kwargs: Any) -> None:
        self.model: ModelHandle | None = None
        #: Where the outputs are wanted (``"cpu"``, ``"gpu:0"``, a ``MemoryType``): applied
        #: when the request is submitted through its model's ``infer``.
        self.output_memory_type: Any = None
        #: A queue that gets every response too (``infer``'s own ``response_queue`` wins).
        self.response_queue: Any = None
        if model is None:  # the SDK's form, by keyword: InferenceRequest(model_name=..., ...)
            RequestBase.__init__(self, *args, **kwargs)
            return
        if isinstance(model, str):  # the SDK's form: InferenceRequest(model_name, model_version, ...)
            RequestBase.__init__(self, model, *args, **kwargs)
            return
        self._build(model, *args, **kwargs)

    def _build(
        self,
        model: ModelHandle,
        request_id: str | None = None,
        flags: int = 0,
        correlation_id: int | str | None = None,
        priority: int = 0,
        timeout: int = 0,
        inputs: Mapping[str, Any] | None = None,
        parameters: Mapping[str, ParameterValue] | None = None,
        output_memory_type: Any = None,
        response_queue: Any = None,
    ) -> None:
        made = model.create_request(
            inputs,
            parameters=parameters,
            request_id=request_id,
            correlation_id=correlation_id,
            flags=flags,
            priority=priority,
            timeout=timeout,
        )
        RequestBase.__init__(
            self,
            made.model_name,
            made.model_version,
            made.inputs,
            made.requested_outputs,
            made.id,
            made.parameters,
            made.correlation_id,
            made.flags,
            made.priority,
            made.timeout_us,
        )
        self.model = model
        self.output_memory_type = output_memory_type
        self.response_queue = response_queue
