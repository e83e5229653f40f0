# As NVIDIA's async_execute_decouple_bls: each request awaits a decoupled BLS call to
# rendezvous and then iterates its responses with a plain (blocking) for loop.
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def one(self, request):
        x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
        bls = pb_utils.InferenceRequest(
            model_name="rendezvous", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["MET"]
        )
        responses = await bls.async_exec(decoupled=True)
        sender = request.get_response_sender()
        for response in responses:
            if response.has_error():
                sender.send(pb_utils.InferenceResponse(error=response.error()))
            elif response.output_tensors():
                met = pb_utils.get_output_tensor_by_name(response, "MET").as_numpy()
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("MET", met)]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def execute(self, requests):
        await asyncio.gather(*(self.one(r) for r in requests))
        return None
