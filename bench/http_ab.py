"""Two running servers, A/B in alternating windows: CPU of each process tree per inference.

    tritonpy serve --model-repository REPO --http-port 9811 ... &   # A (e.g. the code before)
    tritonpy serve --model-repository REPO --http-port 9821 ... &   # B (the code after)
    python bench/http_ab.py --a 127.0.0.1:9811 --a-pid PID_A --b 127.0.0.1:9821 --b-pid PID_B \\
        --concurrency 1 --rounds 6 --window 5
    python bench/http_ab.py ... --protocol grpc --a-grpc 127.0.0.1:9812 --b-grpc 127.0.0.1:9822
    python bench/http_ab.py ... --protocol grpc --streaming ...   # gRPC ModelStreamInfer

perf_analyzer loads one server at a time over HTTP (or gRPC, ``--protocol grpc``);
each window measures the CPU time (user + system, from /proc) of that server's
whole process tree (server and stubs), and of the server process alone, and the
inferences its statistics extension counted. The order of A and B flips every
round, so load from others on a shared machine falls on both alike: steadier
than two runs one after the other. Prints each window and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HZ = os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="HTTP host:port of server A")
    parser.add_argument("--a-pid", type=int, required=True)
    parser.add_argument("--b", required=True, help="HTTP host:port of server B")
    parser.add_argument("--b-pid", type=int, required=True)
    parser.add_argument("--model", default="add_sub")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--window", type=float, default=5.0, help="seconds measured per window")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http", help="perf_analyzer's")
    parser.add_argument("--a-grpc", help="gRPC host:port of server A (with --protocol grpc)")
    parser.add_argument("--b-grpc", help="gRPC host:port of server B (with --protocol grpc)")
    parser.add_argument("--streaming", action="store_true", help="perf_analyzer's --streaming (gRPC)")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]
    from cpu_per_inference import inferences, snapshot
    from get_perf_analyzer import provision

    pa = provision()
    if args.protocol == "grpc" and not (args.a_grpc and args.b_grpc):
        parser.error("--protocol grpc needs --a-grpc and --b-grpc")
    if args.streaming and args.protocol != "grpc":
        parser.error("--streaming needs --protocol grpc")
    servers = {"A": (args.a, args.a_pid), "B": (args.b, args.b_pid)}
    targets = {"A": args.a_grpc or args.a, "B": args.b_grpc or args.b}
    cells: dict[str, list[tuple[float, float, float]]] = {"A": [], "B": []}

    def ticks(pid: int) -> tuple[int, int]:
        """CPU ticks of the whole tree, and of the server process alone."""
        tree = own = 0
        for (p, _, _), sample in snapshot(pid).items():
            tree += sample.user + sample.system
            if p == pid:
                own += sample.user + sample.system
        return tree, own

    for round_ in range(args.rounds):
        for name in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            url, pid = servers[name]
            load = subprocess.Popen(
                [str(pa), "-m", args.model, "-u", targets[name], "-i", args.protocol]
                + ["--concurrency-range", f"{args.concurrency}:{args.concurrency}"]
                + ["-p", str(int(args.window * 1000 + 6000)), "-r", "1"]
                + (["--streaming"] if args.streaming else []),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                time.sleep(2.5)  # warm
                n0, t0, s0 = inferences(url, args.model), ticks(pid), time.monotonic()
                time.sleep(args.window)
                n1, t1, s1 = inferences(url, args.model), ticks(pid), time.monotonic()
            finally:
                load.kill()
                load.wait()
            done = max(1, n1 - n0)
            cells[name].append(
                (
                    (t1[0] - t0[0]) / HZ / done * 1e6,
                    (t1[1] - t0[1]) / HZ / done * 1e6,
                    done / (s1 - s0),
                )
            )
            time.sleep(0.5)
    for name, rows in cells.items():
        cpu = [r[0] for r in rows]
        own = [r[1] for r in rows]
        rate = [r[2] for r in rows]
        mode = " streaming" if args.streaming else ""
        print(
            f"{name} ({servers[name][0]}), {args.protocol}{mode} c={args.concurrency}: CPU µs per inference "
            f"{' '.join(f'{c:.0f}' for c in cpu)}, median {statistics.median(cpu):.0f}; "
            f"server process {' '.join(f'{c:.0f}' for c in own)}, median {statistics.median(own):.0f}; "
            f"infer/s {' '.join(f'{r:.0f}' for r in rate)}, median {statistics.median(rate):.0f}"
        )


if __name__ == "__main__":
    main()
