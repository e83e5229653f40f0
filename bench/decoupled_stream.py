"""CPU per response of a decoupled model's stream, over gRPC and over HTTP ``generate_stream``.

    tritonpy serve --model-repository REPO --http-port 9811 --grpc-port 9812 &
    python bench/decoupled_stream.py --http 127.0.0.1:9811 --grpc 127.0.0.1:9812 --pid PID
    # the same against real Triton serving REPO (../shared/reference/start_triton.sh REPO 9600):
    python bench/decoupled_stream.py --http 127.0.0.1:9600 --grpc 127.0.0.1:9601 --pid TRITON_PID

``REPO``: a folder with a copy of ``plugins/python/tests/models/repeat``, a Python model
in Triton's documented decoupled style (one response per element of ``IN``, sent from a
thread, then the final flag alone). Each request asks for ``--responses`` responses; the
script sends ``--requests`` of them one after the other (after one to warm up) over one
gRPC stream (tritonclient, ``enable_empty_final_response``) and over HTTP
``generate_stream`` (server-sent events), and reports responses per second and the CPU
time (user + system, from /proc) of the server's whole process tree per response.
Nothing is asserted: a benchmark reports, tests check behaviour. Linux only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import time
from typing import Any

import numpy as np

_TICK = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the Python backend's stubs)."""
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        for child in children:
            found += _tree(int(child))
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid``'s process tree."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def measure(name: str, pid: int, one: Any, requests: int) -> None:
    one()  # warm-up
    cpu0, t0 = tree_cpu(pid), time.perf_counter()
    responses = sum(one() for _ in range(requests))
    seconds, cpu = time.perf_counter() - t0, tree_cpu(pid) - cpu0
    print(f"{name}: {responses / seconds:.0f} responses/s, {cpu / responses * 1e6:.1f} µs CPU per response")


def grpc_stream(url: str, model: str, n: int) -> Any:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    inbox: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: inbox.put((result, error)))
    tensor = grpcclient.InferInput("IN", [n], "INT32")
    tensor.set_data_from_numpy(np.arange(n, dtype=np.int32))

    def one() -> int:
        client.async_stream_infer(model, [tensor], enable_empty_final_response=True)
        got = 0
        while True:
            result, error = inbox.get(timeout=60)
            if error is not None:
                raise error
            got += 1
            if result.get_response().parameters["triton_final_response"].bool_param:
                return got - 1  # the empty final response carries no output

    return one


def http_generate_stream(address: str, model: str, n: int) -> Any:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    body = json.dumps({"IN": list(range(n))})

    def one() -> int:
        headers = {"Content-Type": "application/json"}
        conn.request("POST", f"/v2/models/{model}/generate_stream", body, headers)
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"generate_stream answered {response.status}: {data[:200]!r}")
        return data.count(b"data:")

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True, help="the server's process id")
    parser.add_argument("--grpc", help="host:port of its gRPC endpoint")
    parser.add_argument("--http", help="host:port of its HTTP endpoint")
    parser.add_argument("--model", default="repeat")
    parser.add_argument("--responses", type=int, default=2000, help="responses per request")
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    if args.grpc:
        measure("gRPC stream", args.pid, grpc_stream(args.grpc, args.model, args.responses), args.requests)
    if args.http:
        one = http_generate_stream(args.http, args.model, args.responses)
        measure("HTTP generate_stream", args.pid, one, args.requests)


if __name__ == "__main__":
    main()
