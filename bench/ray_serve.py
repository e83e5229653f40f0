"""Requests through Ray Serve ÷ the same requests to `tritonpy serve`, same machine, same run.

    python bench/ray_serve.py [--requests 2000] [--concurrency 1 4] [--replicas 1]

Serves examples/model_repository/simple (ONNX, two INT32[1,16] inputs) both ways:
`tritonpy serve` on its own (one process), and `tritonpy ray serve`'s application
(Ray's HTTP proxy in front of replicas that embed the server) in a local Ray
cluster. The same tritonclient HTTP requests (binary tensors) go to each, from
`concurrency` threads, one client each; prints throughput of each and the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

ROOT = Path(__file__).parents[1]


def wait_ready(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{url}/v2/models/simple/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} never became ready")


def run(url: str, requests: int, concurrency: int) -> float:
    """Inferences per second: ``requests`` in all, from ``concurrency`` threads."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    per = requests // concurrency

    def worker() -> None:
        client = httpclient.InferenceServerClient(url)
        inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for i in inputs:
            i.set_data_from_numpy(a)
        for _ in range(per):
            client.infer("simple", inputs)
        client.close()

    for _ in range(20):  # warm-up
        httpclient.InferenceServerClient(url).infer("simple", [_input(n, a) for n in ("INPUT0", "INPUT1")])
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * concurrency / (time.perf_counter() - start)


def _input(name: str, a: np.ndarray) -> httpclient.InferInput:
    i = httpclient.InferInput(name, [1, 16], "INT32")
    i.set_data_from_numpy(a)
    return i


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--direct-port", type=int, default=9251)
    parser.add_argument("--ray-port", type=int, default=9252)
    args = parser.parse_args()
    repo = Path(tempfile.mkdtemp())
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    tritonpy = [sys.executable, "-m", "tritonpy"]
    direct = subprocess.Popen(
        [*tritonpy, "serve", "--model-repository", str(repo), "--http-address", "127.0.0.1",
         "--http-port", str(args.direct_port), "--allow-grpc", "false", "--allow-metrics", "false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    on_ray = subprocess.Popen(
        [*tritonpy, "ray", "serve", "--model-repository", str(repo), "--http-host", "127.0.0.1",
         "--http-port", str(args.ray_port), "--replicas", str(args.replicas), "--num-cpus", "0.5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_ready(f"127.0.0.1:{args.direct_port}")
        wait_ready(f"127.0.0.1:{args.ray_port}")
        print(f"simple (ONNX, INT32[1,16] x2), {args.requests} requests, replicas on Ray: {args.replicas}")
        print("| concurrency | tritonpy serve (inf/s) | through Ray Serve (inf/s) | Ray ÷ direct |")
        print("|---|---|---|---|")
        for c in args.concurrency:
            d = run(f"127.0.0.1:{args.direct_port}", args.requests, c)
            r = run(f"127.0.0.1:{args.ray_port}", args.requests, c)
            print(f"| {c} | {d:.0f} | {r:.0f} | {r / d:.3f} |", flush=True)
    finally:
        for proc in (direct, on_ray):
            proc.terminate()
        for proc in (direct, on_ray):
            proc.wait(60)
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
