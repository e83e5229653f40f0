"""Large tensors through ``--frontend-workers``: one HTTP request of S MiB each way.

    .venv/bin/python bench/frontend_workers_large.py [--mib 200] [--repeat 5]

Serves an ONNX Identity model (FP32 [-1]) with ``tritonpy serve`` at N=1 (one
process) and N=2 (two front-end workers and the core), sends the same binary
request ``repeat`` times to each, alternating the servers, and prints the median
seconds per request and the ratio N=2 / N=1 from the one run. The worker↔core
hop writes such tensors into its shared-memory arena and reads them in place
(``tritonpy.ipc.link``); a tensor that does not fit there travels inside the
hop's message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import tritonclient.http as httpclient
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tritonpy_serverprocess import ServerProcess  # noqa: E402


def _repository(root: Path) -> Path:
    model = root / "ident"
    (model / "1").mkdir(parents=True)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [-1])
    graph = helper.make_graph([helper.make_node("Identity", ["X"], ["Y"])], "ident", [x], [y])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    onnx.save(proto, str(model / "1" / "model.onnx"))
    (model / "config.pbtxt").write_text(
        'backend: "onnxruntime"\nmax_batch_size: 0\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]\n'
    )
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = _repository(Path(tmp) / "models")
        servers = {
            n: ServerProcess([repo], "--frontend-workers", str(n), log=Path(tmp) / f"{n}.log") for n in (1, 2)
        }
        x = np.random.default_rng(0).random(args.mib * (1 << 20) // 4, dtype=np.float32)
        clients = {}
        for n, server in servers.items():
            clients[n] = httpclient.InferenceServerClient(
                server.url, network_timeout=600, connection_timeout=600
            )
        tensor = httpclient.InferInput("X", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        wanted = [httpclient.InferRequestedOutput("Y", binary_data=True)]
        seconds: dict[int, list[float]] = {1: [], 2: []}
        try:
            for client in clients.values():  # a warm-up each
                client.infer("ident", [tensor], outputs=wanted)
            for _ in range(args.repeat):
                for n, client in clients.items():
                    start = time.perf_counter()
                    out = client.infer("ident", [tensor], outputs=wanted).as_numpy("Y")
                    seconds[n].append(time.perf_counter() - start)
                    assert out is not None and out.shape == x.shape and out[-1] == x[-1]
        finally:
            for client in clients.values():
                client.close()
            for server in servers.values():
                server.stop()
    one, two = statistics.median(seconds[1]), statistics.median(seconds[2])
    print(f"{args.mib} MiB each way, median of {args.repeat}:")
    for n in (1, 2):
        runs = " ".join(f"{s:.2f}" for s in seconds[n])
        print(f"  N={n}: {statistics.median(seconds[n]):.2f} s  ({runs})")
    print(f"  N=2 / N=1: {two / one:.2f}")


if __name__ == "__main__":
    main()
