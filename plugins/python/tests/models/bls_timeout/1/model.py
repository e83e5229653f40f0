# A BLS call with a timeout (microseconds) to a model that takes far longer: the error it
# gets (the target has no queue policy to reject it: the caller stops waiting).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            call = pb_utils.InferenceRequest(
                model_name="sleeper",
                inputs=[pb_utils.Tensor("S", np.array([1.5], np.float32))],
                requested_output_names=["SLEPT"],
                timeout=10_000,
            )
            answer = call.exec()
            message = answer.error().message() if answer.has_error() else ""
            text = np.array([message.encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("MESSAGE", text)]))
        return responses
