"""``DirectCall``: one request of the in-process API's ``predict``, as arrays.

What a backend's optional ``execute_direct`` hook receives instead of a list of
``InferenceRequest``: the request's validated input arrays, and the request
itself only when the backend asks for it (``request()``), for what arrays do
not carry (a response sender, ``reschedule()``, an answer the core must see as
``execute``'s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._inference import InferenceRequest
from ._tensor import Tensor


class DirectCall:
    """One request handed to ``execute_direct``.

    ``inputs`` maps each input name to a host numpy array of the data type and
    shape the model's config declares (validated; no ``reshape`` applies).
    ``model_name``, ``model_version`` and ``batch_size`` are the request's. The
    request has no id, no parameters, no requested outputs (every output of the
    config is wanted) and no correlation id; it is never traced or cached, and
    nothing can cancel it before it is answered.
    """

    __slots__ = ("model_name", "model_version", "batch_size", "inputs", "made")

    def __init__(
        self, model_name: str, model_version: int, batch_size: int, inputs: dict[str, np.ndarray[Any, Any]]
    ) -> None:
        self.model_name = model_name
        self.model_version = model_version
        self.batch_size = batch_size
        self.inputs = inputs
        #: The request once ``request()`` made it, else None.
        self.made: InferenceRequest | None = None

    def request(self) -> InferenceRequest:
        """The call as the ``InferenceRequest`` that ``execute`` would get, made on the
        first call (the same object after): its ``response_sender``, ``reschedule()``
        and cancellation work as they do for ``execute``. Once it is made, the hook
        answers as ``execute`` does for ``[call.request()]``."""
        request = self.made
        if request is None:
            request = self.made = self._make()
        return request

    def _make(self) -> InferenceRequest:
        """Build the request (the server overrides this to attach what answering needs)."""
        request = InferenceRequest(
            self.model_name,
            self.model_version,
            {name: Tensor.from_numpy(name, array) for name, array in self.inputs.items()},
        )
        request.batch_size = self.batch_size
        return request
