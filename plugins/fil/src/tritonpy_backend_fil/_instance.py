"""One model instance: its own loaded forest and the execution of a batch of requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tritonpy_sdk import (
    DataType,
    InferenceRequest,
    InferenceResponse,
    TritonError,
    gather_inputs,
    scatter_responses,
)

from ._config import INPUT, OUTPUT, SHAP, _dims
from ._forest import Forest, fil_output
from ._params import Options

FP32 = DataType.from_config("TYPE_FP32")
#: Every output of a FIL model is FP32.
_TYPES = {OUTPUT: FP32, SHAP: FP32}


@dataclass(slots=True)
class InstanceState:
    """What ``execute`` needs, computed once per instance."""

    forest: Forest
    options: Options
    #: output__0's width in the config (2 turns a binary classifier's p into [1 - p, p]).
    width: int
    has_shap: bool
    batching: bool

    @classmethod
    def create(cls, forest: Forest, options: Options, config: dict[str, Any]) -> InstanceState:
        outputs = {o["name"]: o for o in config.get("output", [])}
        dims = _dims(outputs[OUTPUT])
        width = dims[0] if dims and dims[0] > 0 else 1
        return cls(
            forest=forest,
            options=options,
            width=width,
            has_shap=SHAP in outputs,
            batching=int(config.get("max_batch_size", 0) or 0) > 0,
        )

    def execute(self, requests: Sequence[InferenceRequest], allocator: Any = None) -> list[InferenceResponse]:
        """Run ``requests`` as one call of the library."""
        if len(requests) > 1 and not self.batching:
            return [self.execute([r], allocator)[0] for r in requests]
        x = gather_inputs(requests, INPUT, allocator=allocator)
        if not self.batching:
            x = x.reshape(1, -1)
        if x.dtype != np.float32:
            raise TritonError.invalid_arg(f"input '{INPUT}' must be FP32, got {x.dtype}")
        forest = self.forest
        try:
            out = fil_output(forest.predict(x), self.options, forest.num_classes, self.width)
            shap = forest.shap(x) if self.has_shap and _wants(requests, SHAP) else None
        except TritonError:
            raise
        except Exception as exc:  # the library's own error for a bad batch
            raise TritonError.internal(f"{forest.library} prediction failed: {exc}") from None
        arrays = {OUTPUT: np.ascontiguousarray(out, dtype=np.float32)}
        if shap is not None:
            arrays[SHAP] = shap
        if not self.batching:
            arrays = {n: a.reshape(a.shape[1:]) for n, a in arrays.items()}
        return scatter_responses(requests, arrays, _TYPES)


def _wants(requests: Sequence[InferenceRequest], name: str) -> bool:
    return any(r.output_requested(name) for r in requests)
