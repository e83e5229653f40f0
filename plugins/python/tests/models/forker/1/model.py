# A BLS call from a process the model forked (NVIDIA's test_multiprocess): what it gets.
import multiprocessing

import numpy as np
import triton_python_backend_utils as pb_utils


def call_add_sub(_):
    x = pb_utils.Tensor("INPUT0", np.ones(4, np.float32))
    request = pb_utils.InferenceRequest(
        model_name="add_sub",
        inputs=[x, pb_utils.Tensor("INPUT1", x.as_numpy())],
        requested_output_names=["OUTPUT0"],
    )
    try:
        return "answered" if not request.exec().has_error() else "error response"
    except pb_utils.TritonModelException as exc:
        return str(exc)


class TritonPythonModel:
    def execute(self, requests):
        with multiprocessing.get_context("fork").Pool(1) as pool:
            message = pool.map(call_add_sub, [0])[0]
        text = np.array([message.encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("MESSAGE", text)]) for _ in requests]
