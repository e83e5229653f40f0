"""A rejected large gRPC message is freed when it is answered, not at the next GC.

Aborting a call from inside the ``except`` block chained the error, and
through its traceback the frames holding the message, to grpc's AbortError:
each rejected 100 MB request kept ~200 MB until a garbage collection.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
from tritonpy_serverprocess import ServerProcess

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
MB = 1024 * 1024


def _rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024


def test_rejected_large_messages_are_freed_at_once(tmp_path: Path) -> None:
    server = ServerProcess([EXAMPLES], "--allow-metrics=false", log=tmp_path / "server.log")
    try:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        big = np.zeros((1, 50 * MB // 4), np.int32)  # 50 MB; `simple` wants [-1,16] and 2 inputs
        start = None
        for i in range(8):
            tensor = grpcclient.InferInput("INPUT0", list(big.shape), "INT32")
            tensor.set_data_from_numpy(big)
            with pytest.raises(InferenceServerException) as info:
                client.infer("simple", [tensor])
            assert "expected 2 inputs" in str(info.value)
            if i == 1:  # after the allocator has seen a message or two
                start = _rss_mb(server.proc.pid)
        assert start is not None
        grown = _rss_mb(server.proc.pid) - start
        # Kept until a GC, six more rejections would add ~600 MB; freed, the
        # allocator's reuse keeps the growth far below one message per request.
        assert grown < 150, f"server RSS grew {grown} MB over 6 rejected 50 MB messages"
        small = np.ones((1, 16), np.int32)
        inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(small)
        result = client.infer("simple", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), small * 2)
    finally:
        assert server.stop() == 0
