"""A template tritonpy backend: ``OUTPUTn = INPUTn * scale``, the scale read from ``model.json``.

Written against the SDK's high-level ``Predictor``: the SDK derives the hooks,
and the server validates, batches, counts statistics and encodes for it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from tritonpy_sdk import BackendInfo, Model, Predictor, TritonError, complete_output

__version__ = "0.1.0"
Arrays = dict[str, np.ndarray[Any, Any]]


class Scale(Predictor):
    # What the server needs before loading a model: the file that marks this backend's models.
    backend_info = BackendInfo(default_model_filename="model.json", default_instance_kind="KIND_CPU")

    @classmethod
    def auto_complete(cls, model: Model) -> None:
        # Optional: each input INPUTn gets an output OUTPUTn alike, unless the config has one.
        for i in model.config.get("input", []):
            complete_output(model, _output_name(i["name"]), i["data_type"], i["dims"])

    def load(self) -> None:  # once per instance; self.model_path is <model>/<version>/model.json
        try:
            spec = json.loads(self.model_path.read_text())
        except (OSError, ValueError) as exc:
            raise TritonError.invalid_arg(f"cannot read model file {self.model_path}: {exc}") from None
        self.scale = spec.get("scale", float(self.model.backend.config.get("default-scale", "1")))
        if not isinstance(self.scale, int | float):
            raise TritonError.invalid_arg(f"'scale' in {self.model_path} must be a number")

    def predict(self, inputs: Arrays) -> Arrays:  # batched arrays in, batched arrays out
        return {
            _output_name(name): x if x.dtype == object else (x * self.scale).astype(x.dtype)
            for name, x in inputs.items()
        }


def _output_name(input_name: str) -> str:
    return input_name.replace("INPUT", "OUTPUT", 1)
