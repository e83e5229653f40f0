# Allocates MB megabytes: past its STUB_MEMORY_LIMIT_MB the allocation fails inside the model.
# START_AT_SHARE_OF_LIMIT: initialize first reserves address space (never touched: no real
# memory) up to that share of the limit, to start as a stub does on a host with many cores.
import mmap
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def _address_space_mb():
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) >> 10
    return 0


class TritonPythonModel:
    def initialize(self, args):
        import json

        parameters = json.loads(args["model_config"])["parameters"]
        limit_mb = int(parameters["STUB_MEMORY_LIMIT_MB"]["string_value"])
        share = float(parameters.get("START_AT_SHARE_OF_LIMIT", {"string_value": "0"})["string_value"])
        reserve_mb = int(limit_mb * share) - _address_space_mb()
        self.reserved = mmap.mmap(-1, reserve_mb << 20) if reserve_mb > 0 else None

    def execute(self, requests):
        responses = []
        for request in requests:
            mb = int(pb_utils.get_input_tensor_by_name(request, "MB").as_numpy()[0])
            block = np.ones(mb << 20, np.uint8)
            total = np.array([int(block.sum()) >> 20], np.int64)
            pid = np.array([os.getpid()], np.int64)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("GOT_MB", total), pb_utils.Tensor("PID", pid)])
            )
        return responses
