#!/usr/bin/env python3
"""Who spends the CPU (and holds the GIL) when a GPU model is served in process.

    python bench/gpu_served_threads.py [--seconds 6] [--count 2] [--delay 500] [--py-spy PATH]

``gpu_bench.py``'s set-up (a TorchScript resnet18, KIND_GPU, dynamic batching, 1 or 64
client threads calling ``predict`` with one image each). For each level it prints the
images/s, and the CPU seconds each kind of thread used per image, read from
``/proc/self/task/*/stat`` over the window: the clients (``predict`` and everything it
runs on the caller's thread), the instances' workers, the batcher, the event loop, and
the threads torch and CUDA start. With ``--py-spy`` it also records the threads that
hold the GIL (``py-spy record --gil``) into ``--out`` as collapsed stacks, and
summarises them by function. ``--batcher quiet,loud`` compares the dynamic batcher as it is
(an arrival wakes its thread only when it changes a decision) with one woken by every arrival,
each in a server of its own.

Needs a GPU; on the device machine after ``../shared/gpu/prepare.sh``:
``PYTHONPATH=/tmp/site python3 bench/gpu_served_threads.py --py-spy /tmp/site/bin/py-spy --out $OUT``.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 32
input [{{ name: "INPUT__0" data_type: TYPE_FP32 dims: [3, {hw}, {hw}] }}]
output [{{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [1000] }}]
instance_group [{{ kind: {kind} count: {count} }}]
dynamic_batching {{ max_queue_delay_microseconds: {delay} }}
"""

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by native id."""
    out: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def kind_of(name: str) -> str:
    if name.startswith("client"):
        return "clients"
    if name.startswith("tritonpy-batcher"):
        return "batcher"
    if name.startswith("tritonpy-"):
        return "instance workers"
    if name == "MainThread":
        return "main"
    return name.split("-")[0] if "-" in name else name


def _function(frame: str) -> str:
    """A collapsed-stack frame without its line number: ``f (file.py:12)`` -> ``f (file.py)``."""
    head, colon, tail = frame.rpartition(":")
    return f"{head})" if colon and tail.endswith(")") and tail[:-1].isdigit() else frame


def collapsed_summary(path: Path, top: int = 25) -> str:
    """Self and inclusive sample shares by function of py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = [_function(f) for f in stack.split(";")]
        by_thread[kind_of(frames[0].rpartition(": ")[2])] += count
        own[frames[-1]] += count
        for frame in set(frames[1:]):
            incl[frame] += count
    lines = [f"  {total} samples holding the GIL"]
    lines += [f"  {name:28s} {n / total:6.1%}" for name, n in by_thread.most_common(12)]
    lines.append("  -- self")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(top)]
    lines.append("  -- inclusive")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in incl.most_common(top)]
    return "\n".join(lines)


def timed_stages(stages: dict[str, list[float]]) -> None:
    """Wrap the torch backend's execute and its steps so each call's wall time is recorded
    under its stage's name (the stream's sync through ``torch.cuda.Stream.synchronize``)."""
    from tritonpy_backend_torch._instance import InstanceState

    def wrap(owner: Any, attribute: str, name: str) -> None:
        inner = getattr(owner, attribute)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                stages[name].append(time.perf_counter() - start)

        setattr(owner, attribute, timed)

    wrap(InstanceState, "execute", "execute")
    wrap(InstanceState, "_arguments", "inputs_up")
    wrap(InstanceState, "_forward", "forward")
    wrap(InstanceState, "_outputs", "outputs_queued")
    wrap(torch.cuda.Stream, "synchronize", "sync")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--count", type=int, default=2, help="instances (gpu_bench.py: 2)")
    ap.add_argument("--delay", type=int, default=500, help="max queue delay us (gpu_bench.py: 500)")
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--levels", default="1,64")
    ap.add_argument("--batcher", default="quiet", help="quiet, loud or both (quiet,loud)")
    ap.add_argument("--stages", action="store_true", help="time the torch backend's execute stage by stage")
    ap.add_argument("--py-spy", default="", help="py-spy binary: also record GIL holders")
    ap.add_argument("--out", default=".", help="folder for py-spy's collapsed stacks")
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    if not gpu:
        print("no CUDA device: KIND_CPU instead (a smoke test of this script, not a measurement)")
    import tritonpy

    try:
        import torchvision

        net = torchvision.models.resnet18(weights=None)
    except ImportError:
        sys.path.insert(0, str(Path(__file__).parent))
        from gpu_execute_profile import ResNet18

        net = ResNet18()
    from tritonpy.scheduler.dynamic import DynamicBatcher

    quiet_init = DynamicBatcher.__init__

    def loud_init(self: DynamicBatcher, *a: Any, **k: Any) -> None:
        quiet_init(self, *a, **k)
        self._quiet = False  # every arrival wakes the batcher, as before

    stages: dict[str, list[float]] = collections.defaultdict(list)
    if args.stages:
        timed_stages(stages)
    repo = Path(tempfile.mkdtemp()) / "repo"
    (repo / "resnet" / "1").mkdir(parents=True)
    torch.jit.script(net.eval()).save(str(repo / "resnet" / "1" / "model.pt"))
    (repo / "resnet" / "config.pbtxt").write_text(
        CONFIG.format(hw=args.hw, count=args.count, delay=args.delay, kind="KIND_GPU" if gpu else "KIND_CPU")
    )
    x1 = np.random.default_rng(0).normal(size=(1, 3, args.hw, args.hw)).astype(np.float32)
    print(
        f"device {torch.cuda.get_device_name(0) if gpu else 'cpu'}; count {args.count} "
        f"delay {args.delay} batcher {args.batcher}"
    )

    def serve(mode: str) -> None:
        DynamicBatcher.__init__ = loud_init if mode == "loud" else quiet_init  # type: ignore[method-assign]
        with tritonpy.Server(model_repository=str(repo)) as server:
            model = server.model("resnet")

            def run(conc: int, seconds: float, label: str, spy: str = "") -> None:
                stop = time.monotonic() + seconds
                done = [0] * conc
                client_cpu = [0.0] * conc

                def client(i: int) -> None:
                    n = 0
                    cpu = time.thread_time()
                    while time.monotonic() < stop:
                        model.predict({"INPUT__0": x1})
                        n += 1
                    done[i] = n
                    client_cpu[i] = time.thread_time() - cpu  # read here: the thread's /proc entry goes

                threads = [
                    threading.Thread(target=client, args=(i,), name=f"client-{i}") for i in range(conc)
                ]
                names0 = {t.native_id: t.name for t in threading.enumerate()}
                stats0 = server.model_statistics("resnet")[0]
                stages.clear()
                cpu0, t0 = thread_cpu(), time.monotonic()
                for t in threads:
                    t.start()
                recorder = None
                if spy:
                    out = Path(args.out) / f"gil_{label}.txt"
                    recorder = subprocess.Popen(
                        [
                            args.py_spy,
                            "record",
                            "--gil",
                            "--threads",
                            "--nonblocking",
                            "-r",
                            "200",
                            "-d",
                            str(int(seconds - 1)),
                            "-f",
                            "raw",
                            "-o",
                            str(out),
                            "-p",
                            str(os.getpid()),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    )
                names = dict(names0)
                names.update({t.native_id: t.name for t in threading.enumerate()})
                for t in threads:
                    t.join()
                elapsed = time.monotonic() - t0
                cpu1 = thread_cpu()
                images = sum(done)
                by_kind: collections.Counter[str] = collections.Counter()
                for tid, cpu in cpu1.items():
                    name = names.get(tid) or f"tid{tid}"
                    by_kind[kind_of(name) if tid in names else "unnamed (torch/CUDA/other)"] += (
                        cpu - cpu0.get(tid, 0.0)
                    )
                by_kind["clients"] = sum(client_cpu)
                total = sum(by_kind.values())
                print(
                    f"\n== concurrency {conc} ({label}): {images / elapsed:7.0f} img/s; process CPU "
                    f"{total / elapsed:4.2f} cores, {total / max(1, images) * 1e6:6.1f} us per image"
                )
                stats1 = server.model_statistics("resnet")[0]
                execs = stats1["execution_count"] - stats0["execution_count"]
                infer_ns = sum(b["compute_infer"]["ns"] for b in stats1["batch_stats"]) - sum(
                    b["compute_infer"]["ns"] for b in stats0["batch_stats"]
                )
                inferences = stats1["inference_count"] - stats0["inference_count"]
                print(
                    f"   avg batch {inferences / max(1, execs):5.1f}, "
                    f"compute_infer {infer_ns / max(1, execs) / 1e6:6.3f} ms per execution"
                )
                if stages:
                    cells = [
                        f"{name} {statistics.fmean(v) * 1e3:6.3f} (p50 {statistics.median(v) * 1e3:6.3f})"
                        for name, v in stages.items()
                        if v
                    ]
                    print("   stages, mean ms per execution: " + ", ".join(cells))
                for kind, cpu in by_kind.most_common():
                    print(
                        f"   {kind:28s} {cpu / elapsed:5.2f} cores  "
                        f"{cpu / max(1, images) * 1e6:7.1f} us/image"
                    )
                if recorder is not None:
                    _, err = recorder.communicate(timeout=30)
                    out = Path(args.out) / f"gil_{label}.txt"
                    if recorder.returncode == 0 and out.exists():
                        print(collapsed_summary(out))
                    else:
                        print(
                            f"   py-spy failed ({recorder.returncode}): {err.decode(errors='replace')[-400:]}"
                        )

            run(64, 3, "warm")
            for conc in (int(c) for c in args.levels.split(",")):
                run(conc, args.seconds, f"c{conc}_{mode}")
                if args.py_spy:
                    run(conc, args.seconds + 2, f"c{conc}_{mode}_spy", spy=args.py_spy)

    for mode in args.batcher.split(","):
        serve(mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
