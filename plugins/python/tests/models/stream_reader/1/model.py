# Reads a decoupled model through BLS the way Triton documents it: the iterator from
# `await async_exec(decoupled=True)` walked with a plain `for`, and `cancel()` on it.
# CANCEL_AFTER = 0: read all of "repeat"'s responses; n > 0: cancel after n of them
# (repeat waits for the cancellation, then ends the stream).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    async def execute(self, requests):
        responses = []
        for request in requests:
            cancel_after = int(pb_utils.get_input_tensor_by_name(request, "CANCEL_AFTER").as_numpy()[0])
            bls = pb_utils.InferenceRequest(
                model_name="repeat",
                requested_output_names=["OUT"],
                inputs=[
                    pb_utils.Tensor("IN", np.arange(5, dtype=np.int32)),
                    pb_utils.Tensor("WAIT_CANCEL", np.array([cancel_after > 0])),
                ],
                request_id=f"{self.name}-{cancel_after}",
            )
            stream = await bls.async_exec(decoupled=True)
            received = 0
            for response in stream:
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
                if response.output_tensors():
                    received += 1
                    if received == cancel_after:
                        stream.cancel()
            count = np.array([received], np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RECEIVED", count)]))
        return responses
