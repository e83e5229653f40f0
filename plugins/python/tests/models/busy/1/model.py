# Pure-Python CPU work (holds the GIL): N loop iterations; reports when it ran.
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            start = time.time()
            total = 0
            for i in range(n):
                total += i * i
            end = time.time()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("START", np.array([start])),
                        pb_utils.Tensor("END", np.array([end])),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return responses
