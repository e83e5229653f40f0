"""Requests through Ray Serve ÷ the same requests to `tritonpy serve`, same machine, same run.

    python bench/ray_serve.py [--requests 2000] [--concurrency 1 4] [--replicas 1]

Serves examples/model_repository/simple (ONNX, two INT32[1,16] inputs) both ways:
`tritonpy serve` on its own (one process), and `tritonpy ray serve`'s application
(Ray's HTTP proxy in front of replicas that embed the server) in a local Ray
cluster. The same tritonclient HTTP requests (binary tensors) go to each, from
`concurrency` threads, one client each; prints throughput of each and the ratio.

With ``--floor`` it also deploys, on the same Ray cluster at ``/floor``, a
deployment of the same shape as tritonpy's (``serve.ingress`` of a raw ASGI app)
that reads each request's body and answers a canned Triton response: the cost of
Ray Serve's own path (proxy, router, replica actor call, ASGI messages) on this
machine, which no application behind it can go below.
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


#: A driver that adds the floor deployment to the running cluster (Serve keeps it after the driver exits).
FLOOR = """
import ray
from ray import serve

CANNED = b'{"model_name":"simple","model_version":"1","outputs":[]}'


class Floor:
    # The same shape as tritonpy's replica: serve.ingress() of a class whose
    # __serve_build_asgi_app__ returns a raw ASGI app that reads the whole body.
    def __serve_build_asgi_app__(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            while (await receive()).get("more_body"):
                pass
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(CANNED)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": CANNED})

        return app


class CallFloor:
    # Ray Serve's other HTTP path: __call__ takes a whole Starlette request, returns a Response.
    async def __call__(self, request):
        from starlette.responses import Response

        await request.body()
        return Response(CANNED, media_type="application/json")


ray.init(address="auto", log_to_driver=False)
options = {"num_replicas": 1, "ray_actor_options": {"num_cpus": 0.5}}
serve.run(serve.deployment(**options)(serve.ingress()(Floor)).bind(), name="floor", route_prefix="/floor")
serve.run(serve.deployment(**options)(CallFloor).bind(), name="floor-call", route_prefix="/floor-call")
"""


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
    parser.add_argument("--floor", action="store_true", help="also measure Ray Serve's own floor")
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
        if args.floor:
            subprocess.run([sys.executable, "-c", FLOOR], check=True, capture_output=True, timeout=300)
        print(f"simple (ONNX, INT32[1,16] x2), {args.requests} requests, replicas on Ray: {args.replicas}")
        head = "| concurrency | tritonpy serve (inf/s) | through Ray Serve (inf/s) | Ray ÷ direct |"
        rule = "|---|---|---|---|"
        if args.floor:
            head += " floor, ASGI ingress (inf/s) | through Ray ÷ floor | floor, `__call__` (inf/s) |"
            rule += "---|---|---|"
        print(head)
        print(rule)
        for c in args.concurrency:
            d = run(f"127.0.0.1:{args.direct_port}", args.requests, c)
            r = run(f"127.0.0.1:{args.ray_port}", args.requests, c)
            row = f"| {c} | {d:.0f} | {r:.0f} | {r / d:.3f} |"
            if args.floor:
                f = run(f"127.0.0.1:{args.ray_port}/floor", args.requests, c)
                g = run(f"127.0.0.1:{args.ray_port}/floor-call", args.requests, c)
                row += f" {f:.0f} | {r / f:.2f} | {g:.0f} |"
            print(row, flush=True)
    finally:
        for proc in (direct, on_ray):
            proc.terminate()
        for proc in (direct, on_ray):
            proc.wait(60)
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
