# A BLS call with a timeout (microseconds) to a model that takes longer: the error it gets.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            call = pb_utils.InferenceRequest(
                model_name="busy",
                inputs=[pb_utils.Tensor("N", np.array([5_000_000], np.int64))],
                requested_output_names=["END"],
                timeout=10_000,
            )
            answer = call.exec()
            message = answer.error().message() if answer.has_error() else ""
            text = np.array([message.encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("MESSAGE", text)]))
        return responses
