"""Measurements in millimetres → iris species, through the iris_classifier model (BLS).

Written for Triton's Python backend and served unchanged by tritonpy: one BLS
request per batch (the dynamic batcher groups client requests), so the ONNX
model sees the whole batch at once.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        names = config["parameters"]["species"]["string_value"].split(",")
        self.species = np.array([name.encode() for name in names], dtype=object)
        pb_utils.Logger.log_info(f"{args['model_name']}: classifying into {', '.join(names)}")

    def execute(self, requests):
        batches = [pb_utils.get_input_tensor_by_name(r, "MEASUREMENTS_MM").as_numpy() for r in requests]
        features = np.concatenate(batches).astype(np.float32) / 10.0  # the classifier wants cm
        classify = pb_utils.InferenceRequest(
            model_name="iris_classifier",
            inputs=[pb_utils.Tensor("FEATURES", features)],
            requested_output_names=["PROBABILITIES"],
        )
        answer = classify.exec()
        if answer.has_error():
            error = pb_utils.TritonError(f"iris_classifier failed: {answer.error().message()}")
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        probabilities = pb_utils.get_output_tensor_by_name(answer, "PROBABILITIES").as_numpy()
        best = probabilities.argmax(axis=1)
        species = self.species[best].reshape(-1, 1)
        confidence = probabilities[np.arange(len(best)), best].reshape(-1, 1).astype(np.float32)
        responses = []
        start = 0
        for batch in batches:
            end = start + len(batch)
            outputs = [
                pb_utils.Tensor("SPECIES", species[start:end]),
                pb_utils.Tensor("PROBABILITY", confidence[start:end]),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            start = end
        return responses
