"""A lone request's way through the dynamic batcher, in process: throughput, latency
and CPU per inference of a cheap batched model, where the batcher's thread hand-offs
are most of the cost.

    .venv/bin/python bench/batcher_handoff.py                       # this checkout
    .venv/bin/python bench/batcher_handoff.py --ab OTHER_CHECKOUT   # A/B, alternating

The model: Python ``add_sub`` (``EXECUTION_MODE: in_process``, ``max_batch_size:
8``, FP32 [4] inputs) with dynamic batching, one or two KIND_CPU instances, a
queue delay of 0 or 100 µs; 1 and 4 threads call ``Server.infer`` in a loop for
``--seconds``. CPU per inference is this process's user + system time
(``getrusage``) over the window, steadier than throughput on a shared machine.
With ``--ab DIR`` each round runs this checkout and then ``DIR``'s ``core`` (put
first on ``PYTHONPATH``) in fresh processes, and the table has both. Nothing is
asserted. Results: bench/batcher_handoff.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from run import infer_threads  # noqa: E402  (bench/run.py: threads calling Server.infer)

MODEL = ROOT / "plugins" / "python" / "tests" / "models" / "add_sub" / "1" / "model.py"
CASES = [(1, 0), (1, 100), (2, 100)]  # (instances, queue delay µs)
CONCURRENCY = [1, 4]
KEYS = ("per_s", "p50_us", "cpu_us")


def _repository(root: Path) -> Path:
    for count, delay in CASES:
        name = f"add_sub_i{count}_d{delay}"
        (root / name / "1").mkdir(parents=True)
        shutil.copy(MODEL, root / name / "1" / "model.py")
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },\n'
            '        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },\n'
            '         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            f"instance_group [ {{ kind: KIND_CPU count: {count} }} ]\n"
            f"dynamic_batching {{ max_queue_delay_microseconds: {delay} }}\n"
            'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
        )
    return root


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _measure(server: Any, name: str, concurrency: int, seconds: float) -> dict[str, float]:
    model = server.model(name)
    x = np.ones((1, 4), np.float32)

    def make() -> Any:
        return model.create_request({"INPUT0": x, "INPUT1": x})

    for _ in range(200):  # warm: the backend, the batch sizes, the threads
        server.infer(make())
    cpu = _cpu()
    result = infer_threads(server, make, concurrency, seconds)
    cpu = _cpu() - cpu
    return {"per_s": result["throughput"], "p50_us": result["p50_us"], "cpu_us": cpu / result["count"] * 1e6}


def run_once(seconds: float) -> dict[str, dict[str, float]]:
    """Every case and concurrency in this process: {"i1_d0 c1": {...}, ...}."""
    import tritonpy

    tmp = Path(tempfile.mkdtemp())
    try:
        with tritonpy.Server(model_repository=_repository(tmp)) as server:
            return {
                f"i{count}_d{delay} c{c}": _measure(server, f"add_sub_i{count}_d{delay}", c, seconds)
                for count, delay in CASES
                for c in CONCURRENCY
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _child(core: Path | None, seconds: float) -> dict[str, dict[str, float]]:
    env = dict(os.environ)
    if core is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(core), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--seconds", str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, dict[str, float]] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per case and concurrency")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ab", metavar="CHECKOUT", help="another checkout to compare, alternating")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(args.seconds)))
        return
    trees: dict[str, Path | None] = {"this": None}
    if args.ab:
        trees["other"] = Path(args.ab).resolve() / "core"
    runs: dict[str, list[dict[str, dict[str, float]]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree, core in trees.items():
            runs[tree].append(_child(core, args.seconds))
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, {args.rounds} rounds of "
        f"{args.seconds:g} s per cell; medians over rounds"
    )
    print()
    print("| cell | tree | infer/s | p50 µs | CPU µs / inference |")
    print("|---|---|---|---|---|")
    for cell in runs["this"][0]:
        for tree in trees:
            med = {k: statistics.median(r[cell][k] for r in runs[tree]) for k in KEYS}
            print(f"| {cell} | {tree} | {med['per_s']:.0f} | {med['p50_us']:.0f} | {med['cpu_us']:.1f} |")


if __name__ == "__main__":
    main()
