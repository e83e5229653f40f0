# Ready while no file named "closed" sits in its model folder (Triton's is_ready hook);
# `async def execute` and `async def is_ready`, which Triton allows too.
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.flag = os.path.join(args["model_repository"], "closed")

    async def is_ready(self):
        return not os.path.exists(self.flag)

    async def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]
