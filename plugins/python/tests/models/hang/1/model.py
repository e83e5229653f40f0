# X = 0: execute never returns (a hung model); otherwise answers with its process id.
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0] == 0:
                while True:
                    time.sleep(1)
            pid = np.array([os.getpid()], np.int64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)]))
        return responses
