# What a request shows the model: its parameters() string and its timeout() (µs).
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            info = json.dumps({"parameters": request.parameters(), "timeout": request.timeout()})
            out = pb_utils.Tensor("INFO", np.array([info.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
