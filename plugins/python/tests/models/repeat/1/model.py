# A decoupled model in Triton's documented style: one response per element of IN,
# sent from a thread, then the FINAL flag alone. With WAIT_CANCEL it keeps the
# request open until the client cancels it, then reports that it saw it.
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []
        self.cancelled = 0

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT_CANCEL")
            wait_cancel = bool(wait.as_numpy()[0]) if wait is not None else False
            thread = threading.Thread(target=self.stream, args=(request, values, wait_cancel))
            thread.start()
            self.threads.append(thread)
        return None

    def stream(self, request, values, wait_cancel):
        sender = request.get_response_sender()
        for index, value in enumerate(values):
            out = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
            idx = pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
        if wait_cancel:
            deadline = time.monotonic() + 30
            while not request.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.01)
            if request.is_cancelled():
                self.cancelled += 1
                pb_utils.Logger.log_info(f"repeat: request {request.request_id()} was cancelled")
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(5)
