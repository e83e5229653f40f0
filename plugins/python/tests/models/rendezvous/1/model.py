# async, decoupled: each execute waits until 4 of them are in flight at once (or 20 s)
# and answers MET = 1 when they met, 0 when it gave up; X < 0: sends FINAL, then raises
# (the error reaches no client: only the server's log).
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

GROUP = 4


class TritonPythonModel:
    def initialize(self, args):
        self.waiting = 0
        self.met = None

    async def execute(self, requests):
        if pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()[0, 0] < 0:
            for request in requests:
                request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            raise ValueError("raised after the final response")
        if self.met is None or self.met.is_set():
            self.met, self.waiting = asyncio.Event(), 0
        met = self.met
        self.waiting += 1
        if self.waiting == GROUP:
            met.set()
        try:
            await asyncio.wait_for(met.wait(), 20)
        except asyncio.TimeoutError:
            pass
        for request in requests:
            sender = request.get_response_sender()
            answer = np.full((1, 1), int(met.is_set()), np.int32)
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("MET", answer)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
