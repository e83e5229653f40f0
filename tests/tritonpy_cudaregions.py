"""CUDA shared-memory output regions for the backends' ``gpu`` tests: a region made by
tritonclient and registered with a served server, and the backends' log line saying an
output was handed out on the GPU rather than copied through the host."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from tritonpy_serverprocess import ServerProcess


class Region:
    """A CUDA shared-memory region on GPU 0 made by tritonclient and registered with the
    server through ``client``, filled with -1.0 so that a value never written shows."""

    def __init__(self, client: Any, name: str, nbytes: int) -> None:
        import tritonclient.utils.cuda_shared_memory as cudashm

        self.cudashm = cudashm
        self.client = client
        self.name = name
        self.nbytes = nbytes
        self.handle = cudashm.create_shared_memory_region(name, nbytes, 0)
        cudashm.set_shared_memory_region(self.handle, [np.full(nbytes // 4, -1.0, np.float32)])
        client.register_cuda_shared_memory(name, cudashm.get_raw_handle(self.handle), 0, nbytes)

    def contents(self, shape: list[int]) -> np.ndarray[Any, Any]:
        return np.asarray(self.cudashm.get_contents_as_numpy(self.handle, np.float32, shape))

    def close(self) -> None:
        self.client.unregister_cuda_shared_memory(self.name)
        self.cudashm.destroy_shared_memory_region(self.handle)


def stays_on_gpu_line(model: str, output: str, gpu: int = 0) -> str:
    """What a backend logs the first time ``model`` hands ``output`` out on the GPU."""
    return f"model '{model}': output '{output}' stays on GPU {gpu}"


def said_on_gpu(server: ServerProcess, model: str, output: str, timeout: float = 5.0) -> bool:
    """Whether the server's log says ``model``'s ``output`` stayed on GPU 0 (polled: a file)."""
    line = stays_on_gpu_line(model, output)
    deadline = time.monotonic() + timeout
    while True:
        if line in server.log.read_text(errors="replace"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
