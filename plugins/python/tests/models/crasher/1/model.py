# X = 1 kills the model's own process; otherwise it answers with its process id.
import os
import signal

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))])
            )
        return responses
