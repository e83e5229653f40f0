"""CPU per inference by process role with ``--frontend-workers N``, against Triton, in one run.

    .venv/bin/python bench/frontend_workers.py --reference ../shared/reference --rounds 3
    .venv/bin/python bench/frontend_workers.py --workers 1 2 --previous /tmp/wt-prev   # + an older build
    .venv/bin/python bench/frontend_workers.py --workers --checkout base=/tmp/wt-a \
        --checkout patched=/tmp/wt-b --checkout-args "--frontend-workers 2"   # an A/B of two checkouts

Starts ``tritonpy serve`` once per worker count (``--frontend-workers N``; N=1
is today's single process), optionally an older checkout (``--previous``, run
with N=1 from its source tree through ``PYTHONPATH``; ``--checkout NAME=PATH`` for
any checkout, with ``--checkout-args``) and real Triton (the
``shared/reference`` scripts), all serving the same repository (the Python
``add_sub`` model, stub mode) at once. Then, for several rounds, every
protocol and concurrency, each server in turn (the order rotates per round)
is loaded by perf_analyzer while ``cpu_per_inference.snapshot`` reads its
process tree from /proc over a fixed window. The CPU is split by role:

- **core**: the server process itself (all its threads): with N>1 the models'
  schedulers and the link to the workers; with N=1 everything but the stubs;
- **workers**: the sum of the ``tritonpy.workers.worker`` children (HTTP, gRPC);
- **stubs**: every other child (the Python backend's stub processes);
- **tree**: all of them. For Triton "core" is the ``tritonserver`` process.

Each cell reports inferences per second (statistics extension, over the
window), perf_analyzer's p50 and p99 latency (three windows spanning the
measured one), and CPU µs per inference per role; the summary is the median
and (min–max) over rounds. A report, never a verdict: nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cpu_per_inference import ROOT, Sample, _tree, add_sub_repository, inferences, snapshot, table, us

WORKER = "tritonpy.workers.worker"
ROLES = ("core", "workers", "stubs", "tree")
BEGIN, END = "<!-- results: written by bench/frontend_workers.py -->", "<!-- end of results -->"


@dataclass
class Target:
    """A server under test: its name, process id, HTTP (statistics) and gRPC endpoints."""

    name: str
    pid: int
    http: str
    grpc: str
    stop: object = None  # a callable that stops it


@dataclass
class Cell:
    count: int
    window: float
    spent: dict[tuple[int, int, str], Sample]
    pid: int
    latency: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.count / self.window

    def role(self, key: tuple[int, int, str]) -> str:
        pid, _, label = key
        return "core" if pid == self.pid else "workers" if label == WORKER else "stubs"

    def cpu(self, role: str, part: str = "all") -> float:
        """CPU µs per inference of ``role`` (user + system, or one of them)."""
        ticks = 0
        for key, s in self.spent.items():
            if role == "tree" or self.role(key) == role:
                ticks += s.user + s.system if part == "all" else getattr(s, part)
        return us(ticks, self.count)

    def switches(self, role: str) -> float:
        n = sum(s.voluntary for k, s in self.spent.items() if self.role(k) == role)
        return n / max(self.count, 1)


def _set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` on ``cpus`` (threads made later inherit it from theirs)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def pin(pid: int, own: set[int], rest: set[int]) -> None:
    """The server process ``pid`` (the core) on ``own``; its children (workers, stubs) on ``rest``."""
    for p in _tree(pid):
        _set_affinity(p, own if p == pid else rest)


def measure(
    pa: Path, target: Target, protocol: str, model: str, c: int, window: float, pinned: bool = False
) -> Cell:
    """perf_analyzer at concurrency ``c`` for three windows spanning the measured one; /proc
    snapshots of the target's tree ``window`` seconds apart, 3 s after the load starts.
    ``pinned``: the server process alone on CPU 0, its children and perf_analyzer on the others
    (set again before each cell: a stub restarted meanwhile is a new process)."""
    url = target.http if protocol == "http" else target.grpc
    interval = int((window + 4.5) / 3 * 1000)
    others = set(range(1, os.cpu_count() or 2)) or {0}
    if pinned:
        pin(target.pid, {0}, others)
    with tempfile.NamedTemporaryFile(suffix=".csv") as report:
        load = subprocess.Popen(
            [str(pa), "-m", model, "-u", url, "-i", protocol, "--concurrency-range", f"{c}:{c}"]
            + ["-p", str(interval), "-r", "3", "-s", "999", "-f", report.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if pinned:
                _set_affinity(load.pid, others)
            time.sleep(3)
            n0, before, t0 = inferences(target.http, model), snapshot(target.pid), time.monotonic()
            time.sleep(window)
            n1, after, t1 = inferences(target.http, model), snapshot(target.pid), time.monotonic()
            load.wait(3 * interval / 1000 + 30)
        finally:
            if load.poll() is None:
                load.terminate()
                load.wait(30)
        latency: dict[str, float] = {}
        rows = list(csv.DictReader(open(report.name)))
        if rows:
            latency = {k: float(rows[-1][f"{k} latency"]) for k in ("p50", "p99")}
    spent = {
        key: Sample(*(b - a for a, b in zip(vars(before[key]).values(), vars(s).values())))
        for key, s in after.items()
        if key in before
    }
    return Cell(n1 - n0, t1 - t0, spent, target.pid, latency)


@contextmanager
def environment(**changes: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_tritonpy(
    name: str, repo: Path, workers: int | None, extra: list[str], source: Path | None
) -> Target:
    from run import Served

    path = {}
    if source is not None:  # an older checkout: its packages ahead of the venv's editable installs
        parts = [source / "core", source / "sdk" / "src", source / "plugins" / "python" / "src"]
        path = {"PYTHONPATH": os.pathsep.join(str(p) for p in parts)}
    with environment(**path):
        flag = [] if workers is None else ["--frontend-workers", str(workers)]  # older builds lack it
        served = Served(repo, [*flag, *extra])
    return Target(name, served.proc.pid, served.url, f"127.0.0.1:{served.grpc}", served.stop)


def start_triton(reference: Path, repo: Path, portbase: int, work: Path) -> Target:
    """Real Triton from ``reference``'s scripts, with a work folder of its own: the shared
    one's backend folder is copied over (``cp -f``, in place) by every ``start_triton.sh``,
    and a running Triton whose mapped ``libtriton_python.so`` is rewritten dies of SIGSEGV."""
    env = {**os.environ, "REF_WORK": str(work)}
    script = reference / "start_triton.sh"
    out = subprocess.run(
        [str(script), str(repo), str(portbase)], check=True, capture_output=True, text=True, env=env
    )
    pid = int(out.stdout.split()[-1])

    def stop() -> None:
        pidfile = work / f"triton-{portbase}.pid"
        subprocess.run([str(reference / "stop.sh"), str(pidfile)], capture_output=True, env=env)

    return Target("Triton", pid, f"127.0.0.1:{portbase}", f"127.0.0.1:{portbase + 1}", stop)


def spread(values: list[float], digits: int = 0) -> str:
    if not values:
        return "–"
    fmt = f"{{:.{digits}f}}"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def summary(results: dict[tuple[str, str, int], list[Cell]], names: list[str]) -> list[str]:
    lines = [
        "| protocol | c | server | infer/s | p50 µs | p99 µs | core µs | core sys µs | core wakes "
        "| workers µs | stubs µs | tree µs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for protocol, c in dict.fromkeys((p, c) for p, _, c in results):
        for name in names:
            cells = results.get((protocol, name, c), [])
            if not cells:
                continue
            lat = [cell.latency.get("p50") for cell in cells if cell.latency]
            p99 = [cell.latency.get("p99") for cell in cells if cell.latency]
            lines.append(
                f"| {protocol} | {c} | {name} | {spread([x.rate for x in cells])} "
                f"| {spread([x for x in lat if x])} | {spread([x for x in p99 if x])} "
                f"| {spread([x.cpu('core') for x in cells])} "
                f"| {spread([x.cpu('core', 'system') for x in cells])} "
                f"| {spread([x.switches('core') for x in cells], 2)} "
                f"| {spread([x.cpu('workers') for x in cells])} | {spread([x.cpu('stubs') for x in cells])} "
                f"| {spread([x.cpu('tree') for x in cells])} |"
            )
    return lines + [""]


def ratios(results: dict[tuple[str, str, int], list[Cell]], names: list[str]) -> list[str]:
    """Per round (cells of one round are neighbours in time), then median (min–max)."""

    def per_round(p: str, c: int, a: str, b: str, f) -> list[float]:  # type: ignore[no-untyped-def]
        return [f(x, y) for x, y in zip(results.get((p, a, c), []), results.get((p, b, c), []))]

    one, many = names[0], [n for n in names if n.startswith("tritonpy N=") and n != names[0]]
    measures = [
        (lambda x, y: x.cpu("core") / y.cpu("tree"), 2),
        (lambda x, y: x.cpu("tree") - y.cpu("tree"), 0),
        (lambda x, y: x.latency.get("p50", 0) - y.latency.get("p50", 0), 0),
        (lambda x, y: x.rate / max(y.rate, 1), 2),
        (lambda x, y: x.cpu("tree") / y.cpu("tree"), 2),
    ]
    lines = [
        "| protocol | c | comparison | core ÷ N=1 tree | tree − N=1 tree µs | p50 − N=1 p50 µs "
        "| throughput ÷ | tree CPU ÷ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for protocol, c in dict.fromkeys((p, c) for p, _, c in results):
        for other in [*many, *(n for n in names[1:] if not n.startswith("tritonpy N="))]:
            cols = [spread(per_round(protocol, c, other, one, f), d) for f, d in measures]
            lines.append(f"| {protocol} | {c} | {other} vs {one} | " + " | ".join(cols) + " |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2], help="--frontend-workers values")
    parser.add_argument("--previous", type=Path, help="an older checkout, served with N=1 as 'previous'")
    parser.add_argument(
        "--checkout", action="append", default=[], help="NAME=PATH: another checkout to serve"
    )
    parser.add_argument("--checkout-args", default="", help="tritonpy serve flags for every --checkout")
    parser.add_argument("--reference", type=Path, help="shared/reference: start real Triton from it")
    parser.add_argument(
        "--triton-port", type=int, default=9780, help="Triton's HTTP port (gRPC +1, metrics +2)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"])
    parser.add_argument("--window", type=float, default=8.0, help="seconds measured per cell")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server-args", default="", help="more tritonpy serve flags, one string")
    parser.add_argument("--out", type=Path, help="a markdown file: the results replace its marked section")
    parser.add_argument("--threads", action="store_true", help="also print each cell's thread table")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="each server process alone on CPU 0, its children (workers, stubs) and perf_analyzer on "
        "the other CPUs: the core's cost when it has a core of its own",
    )
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]
    from get_perf_analyzer import provision

    pa = provision()
    work = Path(tempfile.mkdtemp(prefix="tritonpy-fw-"))
    repo = add_sub_repository(work)
    model = "add_sub"
    targets: list[Target] = []
    results: dict[tuple[str, str, int], list[Cell]] = {}
    details: list[str] = []
    try:
        for n in args.workers:
            targets.append(start_tritonpy(f"tritonpy N={n}", repo, n, args.server_args.split(), None))
        if args.previous:
            targets.append(
                start_tritonpy("previous N=1", repo, None, args.server_args.split(), args.previous)
            )
        for spec in args.checkout:
            name, path = spec.rsplit("=", 1)
            extra = [*args.server_args.split(), *args.checkout_args.split()]
            targets.append(start_tritonpy(name, repo, None, extra, Path(path)))
        if args.reference:
            targets.append(start_triton(args.reference.resolve(), repo, args.triton_port, work / "triton"))
        names = [t.name for t in targets]
        for r in range(args.rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for protocol in args.protocols:
                for c in args.concurrency:
                    for target in order:
                        try:
                            cell = measure(pa, target, protocol, model, c, args.window, args.pin)
                        except OSError as exc:  # a server gone (a shared machine): report the rest
                            print(f"round {r + 1} {protocol} c={c} {target.name}: failed: {exc}", flush=True)
                            continue
                        results.setdefault((protocol, target.name, c), []).append(cell)
                        print(
                            f"round {r + 1} {protocol} c={c} {target.name}: {cell.rate:.0f}/s "
                            f"p50 {cell.latency.get('p50', 0):.0f} µs, CPU µs/inf "
                            + " ".join(f"{role} {cell.cpu(role):.0f}" for role in ROLES),
                            flush=True,
                        )
                        if args.threads or (
                            r == args.rounds - 1 and target.name != names[0] and "N=" in target.name
                        ):
                            details += table(
                                f"{target.name}, {protocol}, c={c}, round {r + 1}",
                                cell.count,
                                cell.spent,
                                cell.window,
                            )
    finally:
        for target in targets:
            target.stop()  # type: ignore[operator]
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), model `{model}` (Python backend, "
        f"stub mode), {args.window:g} s per cell, {args.rounds} rounds, servers: {', '.join(names)}"
        + (f", tritonpy with `{args.server_args}`" if args.server_args else "")
        + (", pinned: each server process alone on CPU 0, its children and the load on the rest" * args.pin)
        + ". Median (min–max) over rounds; CPU in µs per inference (user + system); "
        "core wakes: voluntary context switches of the core process per inference.",
        "",
        *summary(results, names),
        "Against the first server, round by round (cells of a round run back to back):",
        "",
        *ratios(results, names),
    ]
    text = "\n".join(lines)
    print(text)
    print("\n".join(details))
    if args.out:
        body = f"{BEGIN}\n{text}\n<details><summary>Thread tables, last round</summary>\n\n" + "\n".join(
            details
        )
        body += f"\n</details>\n{END}"
        old = args.out.read_text() if args.out.exists() else ""
        if BEGIN in old and END in old:  # the results replace the marked section, the prose stays
            args.out.write_text(old[: old.index(BEGIN)] + body + old[old.index(END) + len(END) :])
        else:  # a new file, or one without the markers: the results go at its end
            args.out.write_text(old + ("\n" if old else "") + body + "\n")


if __name__ == "__main__":
    main()
