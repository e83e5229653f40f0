"""tritonpy benchmarks: one command, a markdown table, ratios measured in one run.

    python bench/run.py                 # all scenarios, writes bench/results.md
    python bench/run.py --quick         # shorter windows (a smoke run)

Scenarios
  (a) tiny add/sub model (`simple`): HTTP and gRPC (perf_analyzer) and
      in-process (threads calling Server.infer) at concurrency 1, 4, 16;
  (b) an ONNX MLP (3 dense layers, 1024 wide) served with dynamic batching on
      and off, perf_analyzer gRPC at concurrency 1, 8, 32;
  (c) the same MLP run directly with onnxruntime at batch 1 and at the average
      batch the server formed: the limit;
  (d) the batched MLP in-process (threads calling Server.infer) at concurrency
      8 and 32: the batch formed and served ÷ direct at that batch.
Reported: throughput, p50/p99 latency, served ÷ direct and batching on ÷ off.
Timings vary with the machine: compare ratios from one run, never absolute
numbers across machines.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_mlp(path: Path, width: int = 1024, layers: int = 3) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "INPUT"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = np.zeros(width, np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"B{i}")]
        out = "OUTPUT" if i == layers - 1 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"B{i}"], [f"a{i}"]),
        ]
        nodes.append(helper.make_node("Relu" if i < layers - 1 else "Identity", [f"a{i}"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["batch", width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


def repository(root: Path) -> Path:
    repo = root / "models"
    shutil.copytree(ROOT / "examples" / "model_repository" / "simple", repo / "simple")
    for name, batching in (
        ("mlp_batched", "dynamic_batching { max_queue_delay_microseconds: 500 }"),
        ("mlp_unbatched", ""),
    ):
        make_mlp(repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(
            f'backend: "onnxruntime"\nmax_batch_size: 32\n'
            'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1024 ] } ]\n'
            'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1024 ] } ]\n'
            f"instance_group [ {{ count: 1, kind: KIND_CPU }} ]\n{batching}\n"
        )
    return repo


class Served:
    """``tritonpy serve`` on free loopback ports until it is ready; ``args`` go to the
    command line, its output to ``log`` (else nowhere)."""

    def __init__(self, repo: Path, args: Sequence[str] = (), log: Path | None = None) -> None:
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.log = log
        command = [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--model-repository",
            str(repo),
            *args,
            "--http-address",
            "127.0.0.1",
            "--http-port",
            str(self.http),
            "--grpc-address",
            "127.0.0.1",
            "--grpc-port",
            str(self.grpc),
            "--metrics-port",
            str(self.metrics),
        ]
        out = open(log, "wb") if log is not None else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        finally:
            if log is not None:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not become ready:\n{self.log_tail()}")

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.http}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log is not None else ""

    def stats(self, model: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/models/{model}/stats") as r:
            return json.load(r)["model_stats"][0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def perf(pa: Path, model: str, url: str, protocol: str, concurrency: int, requests: int) -> dict[str, float]:
    """One perf_analyzer level; three windows of ``requests`` requests, the last reported."""
    with tempfile.NamedTemporaryFile(suffix=".csv") as out:
        run = subprocess.run(
            [
                str(pa),
                "-m",
                model,
                "-u",
                url,
                "-i",
                protocol,
                "--concurrency-range",
                f"{concurrency}:{concurrency}",
                "--measurement-mode",
                "count_windows",
                "--measurement-request-count",
                str(max(requests, 20 * concurrency)),
                "--stability-percentage",
                "999",
                "--max-trials",
                "3",
                "-f",
                out.name,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if run.returncode != 0:
            raise RuntimeError(
                f"perf_analyzer failed for {model} at concurrency {concurrency}:\n{run.stdout[-2000:]}"
            )
        row = next(csv.DictReader(open(out.name)))
    return {
        "throughput": float(row["Inferences/Second"]),
        "p50_us": float(row["p50 latency"]),
        "p99_us": float(row["p99 latency"]),
    }


def infer_threads(
    server: Any, make_request: Callable[[], Any], concurrency: int, seconds: float
) -> dict[str, float]:
    """``concurrency`` threads calling ``server.infer(make_request())`` for ``seconds``:
    throughput, p50/p99 latency of the calls and how many there were."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def loop() -> None:
        mine = []
        while time.monotonic() < stop:
            t = time.perf_counter()
            server.infer(make_request())
            mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=loop) for _ in range(concurrency)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    latencies.sort()
    return {
        "throughput": len(latencies) / elapsed,
        "p50_us": latencies[len(latencies) // 2] * 1e6,
        "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
        "count": len(latencies),
    }


def in_process(repo: Path, concurrency: int, seconds: float) -> dict[str, float]:
    import tritonpy

    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    with tritonpy.Server(model_repository=repo) as server:
        model = server.model("simple")
        return infer_threads(
            server, lambda: model.create_request({"INPUT0": a, "INPUT1": a}), concurrency, seconds
        )


def in_process_batched(repo: Path, concurrency: int, seconds: float) -> tuple[dict[str, float], float]:
    """The batched MLP under ``concurrency`` in-process callers, and the average batch formed."""
    import tritonpy

    x = np.random.default_rng(0).standard_normal((1, 1024)).astype(np.float32)
    with tritonpy.Server(model_repository=repo) as server:
        model = server.model("mlp_batched")
        r = infer_threads(server, lambda: model.create_request({"INPUT": x}), concurrency, seconds)
        stats = server.model_statistics("mlp_batched")[0]
    executions = int(stats["execution_count"])
    return r, int(stats["inference_count"]) / executions if executions else 0.0


def direct(model: Path, batch: int, seconds: float) -> dict[str, float]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((batch, 1024)).astype(np.float32)
    for _ in range(5):
        session.run(None, {"INPUT": x})
    times = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        t = time.perf_counter()
        session.run(None, {"INPUT": x})
        times.append(time.perf_counter() - t)
    times.sort()
    return {
        "throughput": batch * len(times) / sum(times),
        "p50_us": times[len(times) // 2] * 1e6,
        "p99_us": times[int(len(times) * 0.99)] * 1e6,
    }


def row(name: str, r: dict[str, float], extra: str = "") -> str:
    return f"| {name} | {r['throughput']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {extra} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurement windows")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.md"))
    args = parser.parse_args()
    window = 300 if args.quick else 2000  # requests per perf_analyzer window
    seconds = 1.5 if args.quick else 5.0
    from get_perf_analyzer import provision

    pa = provision()
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), "
        f"{'quick' if args.quick else 'full'} windows.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        repo = repository(Path(tmp))
        server = Served(repo)
        try:
            lines += [
                "### (a) `simple` (INT32 add/sub, 16 elements)",
                "",
                "| path | infer/s | p50 µs | p99 µs | |",
                "|---|---|---|---|---|",
            ]
            for c in (1, 4, 16):
                lines.append(
                    row(
                        f"HTTP, concurrency {c}",
                        perf(pa, "simple", f"127.0.0.1:{server.http}", "http", c, window),
                    )
                )
                lines.append(
                    row(
                        f"gRPC, concurrency {c}",
                        perf(pa, "simple", f"127.0.0.1:{server.grpc}", "grpc", c, window),
                    )
                )
            server.stop()
            for c in (1, 4, 16):
                lines.append(row(f"in-process, concurrency {c}", in_process(repo, c, seconds)))
            server = Served(repo)
            lines += [
                "",
                "### (b) MLP 3×1024 FP32 over gRPC, dynamic batching on and off",
                "",
                "| model, concurrency | infer/s | p50 µs | p99 µs | average batch formed |",
                "|---|---|---|---|---|",
            ]
            served: dict[tuple[str, int], dict[str, float]] = {}
            batches: dict[int, float] = {}
            for c in (1, 8, 32):
                for model in ("mlp_unbatched", "mlp_batched"):
                    before = server.stats(model)
                    r = perf(pa, model, f"127.0.0.1:{server.grpc}", "grpc", c, window)
                    after = server.stats(model)
                    n = after["inference_count"] - before["inference_count"]
                    e = after["execution_count"] - before["execution_count"]
                    avg = n / e if e else 0.0
                    if model == "mlp_batched":
                        batches[c] = avg
                    served[(model, c)] = r
                    lines.append(row(f"{model}, {c}", r, f"{avg:.1f}"))
        finally:
            server.stop()
        mlp = repo / "mlp_batched" / "1" / "model.onnx"
        lines += [
            "",
            "### (c) the same MLP run directly with onnxruntime (the limit)",
            "",
            "| batch | infer/s | p50 µs (per call) | p99 µs | |",
            "|---|---|---|---|---|",
        ]
        limits: dict[int, dict[str, float]] = {}
        for b in sorted({1, *(max(1, round(v)) for v in batches.values())}):
            limits[b] = direct(mlp, b, seconds)
            lines.append(row(str(b), limits[b]))
        lines += [
            "",
            "### Ratios",
            "",
            "| concurrency | batching on ÷ off | served (batched) ÷ direct at the batch formed |",
            "|---|---|---|",
        ]
        for c in (1, 8, 32):
            on, off = served[("mlp_batched", c)], served[("mlp_unbatched", c)]
            limit = limits[max(1, round(batches[c]))]
            lines.append(
                f"| {c} | {on['throughput'] / off['throughput']:.2f} | "
                f"{on['throughput'] / limit['throughput']:.2f} |"
            )
        lines += [
            "",
            "### (d) the batched MLP in-process (threads calling `Server.infer`)",
            "",
            "| concurrency | infer/s | p50 µs | p99 µs | average batch formed "
            "| direct at that batch, infer/s | served ÷ direct |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in (8, 32):
            r, avg = in_process_batched(repo, c, seconds)
            limit = direct(mlp, max(1, round(avg)), seconds)
            lines.append(
                f"| {c} | {r['throughput']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {avg:.1f} "
                f"| {limit['throughput']:.0f} | {r['throughput'] / limit['throughput']:.2f} |"
            )
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
