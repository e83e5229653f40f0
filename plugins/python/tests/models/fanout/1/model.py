# execute starts BLS calls on threads of its own and waits for them (a common pattern
# for parallel BLS): the stub must keep reading answers while execute blocks.
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils


def add_sub(value):
    x = np.full(4, value, np.float32)
    call = pb_utils.InferenceRequest(
        model_name="add_sub_onnx",
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
        requested_output_names=["OUTPUT0"],
    )
    answer = call.exec()
    if answer.has_error():
        raise pb_utils.TritonModelException(answer.error().message())
    return float(pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()[0])


class TritonPythonModel:
    def initialize(self, args):
        self.pool = ThreadPoolExecutor(4)

    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            total = sum(self.pool.map(add_sub, range(n)))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([total]))]))
        return responses

    def finalize(self):
        self.pool.shutdown()
