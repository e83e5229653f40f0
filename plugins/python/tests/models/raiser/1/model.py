# X = 0: raise from execute; X = 1: answer with an error response; otherwise echo.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] == 0:
                raise ValueError("the model raised on purpose")
            if x[0] == 1:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("bad input on purpose"))
                )
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
