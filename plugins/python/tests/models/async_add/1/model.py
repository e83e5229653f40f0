# async def execute: awaits a BLS call to add_sub while other requests are in flight.
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        return list(await asyncio.gather(*(self.one(r) for r in requests)))

    async def one(self, request):
        x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
        await asyncio.sleep(0.05)
        padded = np.concatenate([x, np.zeros(2, np.float32)])
        bls = pb_utils.InferenceRequest(
            model_name="add_sub",
            requested_output_names=["OUTPUT0"],
            inputs=[pb_utils.Tensor("INPUT0", padded), pb_utils.Tensor("INPUT1", padded)],
        )
        response = await bls.async_exec()
        if response.has_error():
            return pb_utils.InferenceResponse(error=response.error())
        out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()[:2]
        return pb_utils.InferenceResponse([pb_utils.Tensor("Y", out)])
