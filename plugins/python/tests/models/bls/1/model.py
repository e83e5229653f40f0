# BLS in Triton's documented style: forward INPUT0/INPUT1 to the model named by
# MODEL_NAME and return its outputs. MODEL_NAME "repeat" runs the decoupled model
# with exec(decoupled=True) and returns how many responses it streamed in COUNT.
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw_name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            name = raw_name.decode()
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            if name == "repeat":
                bls = pb_utils.InferenceRequest(
                    model_name="repeat",
                    requested_output_names=["OUT"],
                    inputs=[pb_utils.Tensor("IN", np.arange(5, dtype=np.int32))],
                )
                count = 0
                for response in bls.exec(decoupled=True):
                    if response.has_error():
                        raise pb_utils.TritonModelException(response.error().message())
                    if len(response.output_tensors()) > 0:
                        count += 1
                zeros = np.zeros(4, np.float32)
                responses.append(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("OUTPUT0", zeros),
                            pb_utils.Tensor("OUTPUT1", zeros),
                            pb_utils.Tensor("COUNT", np.array([count], np.int32)),
                        ]
                    )
                )
                continue
            bls = pb_utils.InferenceRequest(
                model_name=raw_name,  # numpy bytes_, as NVIDIA's bls example passes it
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[
                    pb_utils.Tensor("INPUT0", in0.as_numpy()),
                    pb_utils.Tensor("INPUT1", in1.as_numpy()),
                ],
            )
            response = bls.exec()
            if response.has_error():
                responses.append(pb_utils.InferenceResponse(error=response.error()))
                continue
            out0 = pb_utils.get_output_tensor_by_name(response, "OUTPUT0")
            out1 = pb_utils.get_output_tensor_by_name(response, "OUTPUT1")
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", out0.as_numpy()),
                        pb_utils.Tensor("OUTPUT1", out1.as_numpy()),
                        pb_utils.Tensor("COUNT", np.array([1], np.int32)),
                    ]
                )
            )
        return responses
