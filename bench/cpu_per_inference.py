"""CPU per inference of the server process tree, thread by thread, under perf_analyzer.

    python bench/cpu_per_inference.py                         # add_sub (Python backend)
    python bench/cpu_per_inference.py --protocols grpc --server-args "--grpc-implementation grpcio"
    python bench/cpu_per_inference.py --peer-http 127.0.0.1:8000 --peer-grpc 127.0.0.1:8001 \\
        --peer-pid "$(cat triton.pid)"                        # the same cells against a peer

For each protocol and concurrency, perf_analyzer loads the server while this
script reads, over a fixed window, the CPU time (user and system) and the
context switches of every thread of the server and of its children (the
Python backend's stubs) from /proc, and the inferences counted by the
statistics extension. CPU seconds per inference are steadier than throughput
on a small shared machine, and the thread table shows where they go: the
event loop, the instance worker, the stub reader, the stub itself. With a peer
(real Triton serving the same repository), its tree is measured in the same
run and the ratios are printed. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    """One thread's counters: clock ticks of user and system time, context switches."""

    user: int
    system: int
    voluntary: int
    involuntary: int


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += _children(p)
    return pids


def _program(argv: list[str]) -> str:
    """What a child process runs: its script, or its module for ``python -m``."""
    args = argv[1:]
    if args[:1] == ["-m"] and len(args) > 1:
        return args[1]
    return Path(args[0]).name if args and args[0] else Path(argv[0]).name


def snapshot(pid: int) -> dict[tuple[int, int, str], Sample]:
    """Every thread of ``pid``'s process tree: (pid, tid, process name) → counters."""
    out: dict[tuple[int, int, str], Sample] = {}
    for p in _tree(pid):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        label = "server" if p == pid else _program(argv)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                status = (task / "status").read_text().splitlines()
            except OSError:
                continue
            switches = {k: int(v) for k, v in (line.split(":") for line in status if "ctxt_switches" in line)}
            out[(p, int(task.name), label)] = Sample(
                int(fields[11]),
                int(fields[12]),
                switches.get("voluntary_ctxt_switches", 0),
                switches.get("nonvoluntary_ctxt_switches", 0),
            )
    return out


def inferences(http: str, model: str) -> int:
    with urllib.request.urlopen(f"http://{http}/v2/models/{model}/stats", timeout=10) as r:
        return sum(int(s["inference_count"]) for s in json.load(r)["model_stats"])


def measure(
    pa: Path, pid: int, http: str, url: str, protocol: str, model: str, concurrency: int, window: float
) -> tuple[int, dict[tuple[int, int, str], Sample]]:
    """Load ``url`` with perf_analyzer; over ``window`` seconds (after a warm-up),
    the inferences done and each thread's counters spent."""
    load = subprocess.Popen(
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
            "-p",
            str(int((window + 6) * 1000)),
            "-r",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        n0, before = inferences(http, model), snapshot(pid)
        time.sleep(window)
        n1, after = inferences(http, model), snapshot(pid)
    finally:
        load.terminate()
        load.wait(30)
    spent = {
        key: Sample(*(b - a for a, b in zip(vars(before[key]).values(), vars(s).values())))
        for key, s in after.items()
        if key in before
    }
    return n1 - n0, spent


def us(ticks: int, count: int) -> float:
    return ticks / HZ / max(count, 1) * 1e6


def table(name: str, count: int, spent: dict[tuple[int, int, str], Sample], window: float) -> list[str]:
    lines = [
        f"{name}: {count / window:.0f} infer/s, "
        f"{us(sum(s.user + s.system for s in spent.values()), count):.0f} µs CPU per inference",
        "",
        "| process | thread | user µs | system µs | voluntary switches | involuntary switches |",
        "|---|---|---|---|---|---|",
    ]
    for (pid, tid, label), s in sorted(spent.items()):
        if s.user + s.system == 0 and s.voluntary < count // 10:
            continue  # idle threads
        thread = "main" if tid == pid else f"{tid - pid:+d}"
        lines.append(
            f"| {label} | {thread} | {us(s.user, count):.0f} | {us(s.system, count):.0f} "
            f"| {s.voluntary / max(count, 1):.2f} | {s.involuntary / max(count, 1):.2f} |"
        )
    return lines + [""]


def add_sub_repository(root: Path) -> Path:
    repo = root / "repo"
    shutil.copytree(ROOT / "plugins" / "python" / "tests" / "models" / "add_sub", repo / "add_sub")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", help="a model repository (default: the Python add_sub model)")
    parser.add_argument("--model", default="add_sub")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"])
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per cell")
    parser.add_argument("--peer-http", help="host:port of a peer serving the same repository")
    parser.add_argument("--peer-grpc", help="host:port of the peer's gRPC endpoint")
    parser.add_argument("--peer-pid", type=int, help="the peer's process id")
    parser.add_argument("--out", default=str(ROOT / "bench" / "cpu_per_inference.md"))
    parser.add_argument(
        "--server-args",
        default="",
        help="more tritonpy serve flags, one string (e.g. '--grpc-implementation grpcio')",
    )
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]
    from get_perf_analyzer import provision
    from run import Served

    pa = provision()
    work = Path(tempfile.mkdtemp(prefix="tritonpy-cpi-"))
    repo = Path(args.repository) if args.repository else add_sub_repository(work)
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), model `{args.model}`, "
        f"{args.window:g} s per cell" + (f", served with `{args.server_args}`." if args.server_args else "."),
        "",
    ]
    ratios: list[str] = []
    try:
        server = Served(repo, args.server_args.split())
        try:
            for protocol in args.protocols:
                for c in args.concurrency:
                    port = server.http if protocol == "http" else server.grpc
                    http = f"127.0.0.1:{server.http}"
                    ours = measure(
                        pa, server.proc.pid, http, f"127.0.0.1:{port}", protocol, args.model, c, args.window
                    )
                    lines += table(f"tritonpy, {protocol}, concurrency {c}", *ours, args.window)
                    if args.peer_pid and args.peer_http:
                        url = args.peer_http if protocol == "http" else args.peer_grpc
                        theirs = measure(
                            pa, args.peer_pid, args.peer_http, str(url), protocol, args.model, c, args.window
                        )
                        lines += table(f"peer, {protocol}, concurrency {c}", *theirs, args.window)
                        cpu = [
                            us(sum(s.user + s.system for s in r[1].values()), r[0]) for r in (ours, theirs)
                        ]
                        speed = ours[0] / max(theirs[0], 1)
                        ratios.append(f"| {protocol} | {c} | {speed:.2f} | {cpu[0] / cpu[1]:.2f} |")
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if ratios:
        lines += [
            "| protocol | concurrency | throughput ÷ peer | CPU per inference ÷ peer |",
            "|---|---|---|---|",
            *ratios,
            "",
        ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
