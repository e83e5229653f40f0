"""Which requests may share a batch (Triton's ``RequiredEqualInputs``).

A batch reaches the model as one tensor per input, so its requests must agree
on what that tensor cannot vary: the same inputs (a model with optional inputs
batches only requests that gave the same ones), the same shape past the batch
dimension for each input of variable size (unless it has
``allow_ragged_batch``), and for a shape tensor (``is_shape_tensor``, a
TensorRT feature), whose one copy stands for the whole batch, the same values.
A model whose inputs all have fixed sizes, none optional and none a shape
tensor, batches any requests: ``matters`` is false and every key is ``()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonpy_sdk import InferenceRequest, Tensor


@dataclass(frozen=True, slots=True)
class EqualInputs:
    #: The config's inputs but those with ``allow_ragged_batch`` (any shapes batch
    #: together); inputs the core adds (sequence controls and states) do not count.
    compared: frozenset[str] = frozenset()
    #: Shape tensors: their values must be equal too.
    shape_tensors: frozenset[str] = frozenset()
    #: Whether requests can differ in a way that keeps them apart at all.
    matters: bool = False

    @classmethod
    def from_config(cls, config: Any) -> EqualInputs:
        """From a ``ModelConfig`` message."""
        compared = frozenset(i.name for i in config.input if not i.allow_ragged_batch)
        shape_tensors = frozenset(i.name for i in config.input if i.is_shape_tensor)
        variable = any(-1 in i.dims and not i.allow_ragged_batch for i in config.input)
        optional = any(i.optional for i in config.input)
        return cls(compared, shape_tensors, bool(shape_tensors) or variable or optional)

    def key(self, request: InferenceRequest) -> tuple[Any, ...]:
        """Equal for requests that may share a batch."""
        if not self.matters:
            return ()
        compared, shape_tensors = self.compared, self.shape_tensors
        return tuple(
            _values(name, tensor) if name in shape_tensors else (name, tensor.shape[1:], tensor.datatype)
            for name, tensor in sorted(request.inputs.items())
            if name in compared
        )


def _values(name: str, tensor: Tensor) -> tuple[Any, ...]:
    """A shape tensor's key: its whole shape (it has no batch dimension) and its values.
    One in device memory is compared with nothing, as Triton does: it batches alone."""
    if tensor.device is not None:
        return (name, object())
    return (name, tensor.shape, tensor.datatype, tensor.data.tobytes())
