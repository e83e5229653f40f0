# Returns an output its config does not declare, next to the two it does.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            outputs = [pb_utils.Tensor(n, x * k) for k, n in enumerate(("Y", "W", "UNDECLARED"), 1)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
