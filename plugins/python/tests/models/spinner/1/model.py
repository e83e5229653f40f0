# Spins in execute itself (the stub's main thread) until its request is cancelled
# or SECONDS pass, then says which; logs when it saw the cancellation, and whether
# it saw it before it began.
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = float(pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()[0])
            deadline = time.monotonic() + seconds
            if request.is_cancelled():
                rid = request.request_id()
                pb_utils.Logger.log_info(f"spinner: request {rid} was cancelled before it ran")
            while not request.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.005)
            saw = request.is_cancelled()
            if saw:
                pb_utils.Logger.log_info(f"spinner: request {request.request_id()} was cancelled")
            out = pb_utils.Tensor("SAW_CANCEL", np.array([saw]))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
