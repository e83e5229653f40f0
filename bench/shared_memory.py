"""A large tensor through every transport: JSON, binary HTTP, gRPC, and system shared memory.

    python bench/shared_memory.py            # prints a markdown table, writes bench/shared_memory.md
    python bench/shared_memory.py --sizes 4 16 --reps 10

One ``tritonpy serve`` process serving an ONNX ``Identity`` on FP32 [-1]
(max_batch_size 0), and one client (tritonclient) in this process. For each
tensor size (MiB) and path, the median time of one inference: the input goes
to the server and the same number of bytes come back.

  json        — HTTP, input and output as JSON numbers
  binary_http — HTTP, binary tensor data extension both ways
  grpc        — gRPC raw contents both ways
  shm_http    — HTTP, input and output in registered system shared-memory regions
  shm_grpc    — gRPC, the same regions

For shared memory, each inference includes the client writing the input into its
region (what a client producing new data pays); the output is read as a view.
Reported: milliseconds, the tensor's bytes per second (size / time), and the time
as a multiple of one local ``memcpy`` of the same size (``numpy.copyto``): the
floor any transport that copies the tensor once pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CONFIG = """
name: "identity"
backend: "onnxruntime"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

MIB = 1 << 20


def write_repo(repo: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])],
        "identity",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / "identity" / "1").mkdir(parents=True)
    onnx.save(model, repo / "identity" / "1" / "model.onnx")
    (repo / "identity" / "config.pbtxt").write_text(CONFIG)


def median_seconds(call: Callable[[], Any], reps: int) -> float:
    call()  # warm up (first-use allocations, connections)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(url: str, grpc_url: str, size_mib: int, reps: int) -> dict[str, float]:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    n = size_mib * MIB // 4
    data = (np.arange(n) % 100).astype(np.float32)  # short JSON numbers: "12.0"
    nbytes = data.nbytes
    http = httpclient.InferenceServerClient(url, network_timeout=600, connection_timeout=600)
    grpc = grpcclient.InferenceServerClient(grpc_url)
    results: dict[str, float] = {}

    def plain(module: Any, client: Any, binary: bool) -> None:
        x = module.InferInput("X", [n], "FP32")
        if module is httpclient:
            x.set_data_from_numpy(data, binary_data=binary)
            out = module.InferRequestedOutput("Y", binary_data=binary)
        else:
            x.set_data_from_numpy(data)
            out = module.InferRequestedOutput("Y")
        y = client.infer("identity", [x], outputs=[out]).as_numpy("Y")
        assert y.shape == (n,)

    dst = np.empty_like(data)
    results["memcpy"] = median_seconds(lambda: np.copyto(dst, data), reps * 5)
    results["json"] = median_seconds(lambda: plain(httpclient, http, False), max(2, reps // 5))
    results["binary_http"] = median_seconds(lambda: plain(httpclient, http, True), reps)
    results["grpc"] = median_seconds(lambda: plain(grpcclient, grpc, True), reps)

    tag = f"tritonpy-bench-{os.getpid()}-{size_mib}"
    ins = shm.create_shared_memory_region("in", f"/{tag}-in", nbytes)
    outs = shm.create_shared_memory_region("out", f"/{tag}-out", nbytes)
    try:
        http.unregister_system_shared_memory()
        http.register_system_shared_memory("in", f"/{tag}-in", nbytes)
        http.register_system_shared_memory("out", f"/{tag}-out", nbytes)

        def via_shm(module: Any, client: Any) -> None:
            shm.set_shared_memory_region(ins, [data])
            x = module.InferInput("X", [n], "FP32")
            x.set_shared_memory("in", nbytes)
            out = module.InferRequestedOutput("Y")
            out.set_shared_memory("out", nbytes)
            client.infer("identity", [x], outputs=[out])
            y = shm.get_contents_as_numpy(outs, np.float32, [n])
            assert y[-1] == data[-1]

        results["shm_http"] = median_seconds(lambda: via_shm(httpclient, http), reps)
        results["shm_grpc"] = median_seconds(lambda: via_shm(grpcclient, grpc), reps)
        http.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(ins)
        shm.destroy_shared_memory_region(outs)
        http.close()
        grpc.close()
    return results


def table(rows: dict[int, dict[str, float]]) -> str:
    lines = [
        "| size | path | ms / inference | tensor MB/s | × memcpy |",
        "|---:|---|---:|---:|---:|",
    ]
    for size, results in rows.items():
        memcpy = results["memcpy"]
        for path, seconds in results.items():
            rate = size * MIB / seconds / 1e6
            ms, ratio = seconds * 1e3, seconds / memcpy
            lines.append(f"| {size} MiB | {path} | {ms:.2f} | {rate:,.0f} | {ratio:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16], help="tensor sizes in MiB")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/shared_memory.md")
    args = parser.parse_args()
    from tritonpy_serverprocess import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        write_repo(repo)
        server = ServerProcess([repo], "--allow-client-shm=true", log=Path(tmp) / "server.log")
        try:
            rows = {size: measure(server.url, server.grpc_url, size, args.reps) for size in args.sizes}
        finally:
            server.stop()
    text = table(rows)
    print(text)
    if not args.no_write:
        header = (
            "# A large tensor through each transport\n\n"
            "`python bench/shared_memory.py` (see its docstring for what each path does).\n"
            f"One run on this machine ({os.cpu_count()} cores, shared), "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}; an ONNX Identity on FP32, "
            "server and client on the same host.\n\n"
        )
        (ROOT / "bench" / "shared_memory.md").write_text(header + text + "\n")


if __name__ == "__main__":
    main()
