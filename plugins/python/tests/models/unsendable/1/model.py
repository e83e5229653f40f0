# X = 0: answers with a response the stub cannot send (a parameter that does not pickle):
# the stub's own machinery fails after execute returned. Otherwise: its PID.
import os
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            pid = pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))
            response = pb_utils.InferenceResponse([pid])
            if x[0] == 0:  # past the constructor's checks, which refuse it
                response._parameters["lock"] = threading.Lock()
            responses.append(response)
        return responses
