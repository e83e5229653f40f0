# Allocates MB megabytes: past its STUB_MEMORY_LIMIT_MB the allocation fails inside the model.
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mb = int(pb_utils.get_input_tensor_by_name(request, "MB").as_numpy()[0])
            block = np.ones(mb << 20, np.uint8)
            total = np.array([int(block.sum()) >> 20], np.int64)
            pid = np.array([os.getpid()], np.int64)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("GOT_MB", total), pb_utils.Tensor("PID", pid)])
            )
        return responses
