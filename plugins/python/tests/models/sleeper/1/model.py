# Sleeps S seconds (no CPU), then answers SLEPT = S.
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
            time.sleep(float(s[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SLEPT", s)]))
        return responses
