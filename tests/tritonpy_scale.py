"""The ``scale`` test backend: OUTPUT0 = INPUT0 * k, k read from the version's model.txt,
so an answer shows which file a model was loaded from."""

from __future__ import annotations

from collections.abc import Sequence

from tritonpy_sdk import (
    BackendInfo,
    InferenceRequest,
    InferenceResponse,
    Model,
    ModelInstance,
    Tensor,
    hookimpl,
)

#: A model of the ``scale`` backend (its folder's ``1/model.txt`` holds k).
CONFIG = """backend: "scale"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""


class Scale:
    """Register it as ``server.backends.register("scale", Scale())``."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def model_initialize(self, model: Model) -> None:
        model.state = int((model.version_path / "model.txt").read_text())

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        k = instance.model.state
        return [
            InferenceResponse({"OUTPUT0": Tensor.from_numpy("OUTPUT0", r.inputs["INPUT0"].data * k)})
            for r in requests
        ]
