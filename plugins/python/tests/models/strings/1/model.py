import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            upper = np.array([[v.decode("utf-8").upper() for v in row] for row in text], dtype=np.object_)
            length = np.array([[len(v) for v in row] for row in text], dtype=np.int64)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("UPPER", upper), pb_utils.Tensor("LENGTH", length)]
                )
            )
        return responses
