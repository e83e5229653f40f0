#!/usr/bin/env python3
"""Where a GPU execution of the PyTorch backend spends its time, next to the direct call.

    python bench/gpu_execute_profile.py                   # ~1.5 min on an H200
    python bench/gpu_execute_profile.py --seconds 1 --skip-profiler --skip-served

On the device machine (after ``../shared/gpu/prepare.sh`` here, which builds the wheels that
``.gpu/run.sh`` installs into /tmp/site):

    bash .gpu/run.sh plugins/torch/tests -m gpu; \\
      PYTHONPATH=/tmp/site timeout 300 python3 bench/gpu_execute_profile.py 2>&1 | tee $OUT/profile.txt

Without a GPU it says so and exits 0. The backend, SDK and core are imported from this
checkout (``--installed``: from the installed packages instead); the server finds the
backend through the installed entry points, which name the same modules.

0. **GIL probe** (no GPU needed, runs first): gathering 32 images (19 MiB) into one buffer with
   ``np.concatenate`` (numpy gives the GIL up around each request's copy) and with the backend's
   ``tritonpy_sdk.copy_rows`` (memmove under the GIL), alone and beside 16 and 64 Python threads shaped like
   in-process clients (60 µs of Python, then a 0.3 ms wait, over and over).

One TorchScript resnet18 (torchvision's when it is installed, else the same network defined
here; random weights), images 3×224×224 float32, saved once and loaded separately by each part:

1. **direct**: ``../shared/gpu/gpu_bench.py``'s call, ``m(torch.from_numpy(xb).to(dev)).cpu().numpy()``
   under ``torch.inference_mode()`` on the default stream, at batch 1 and 32; also the same call
   from a pinned copy of ``xb`` with non-blocking copies and one stream sync (the floor for a
   served path that must gather anyway);
2. **execute**: the backend's ``execute`` without a server (``tritonpy_sdk.testing.BackendHarness``,
   KIND_GPU), on 1 request and on 32 requests of one image each (the
   batch the dynamic batcher forms); its stages timed one by one with the backend's own methods
   (gather + copies up queued, forward launched, copies down queued, the one sync) on the host
   clock, and with CUDA events on the instance's stream; and beside 16 busy Python threads;
3. **profiler**: ``torch.profiler`` (CPU and CUDA) over a few direct calls and executions at
   batch 32: the top operators by self CPU time and by device time;
4. **mixed batch sizes**: the first and the second execution at each of a few new batch sizes
   (TorchScript's profiling executor specialises on shapes);
5. **served**: ``tritonpy.Server`` in process, one KIND_GPU instance, dynamic batching (100 µs),
   1 and 64 client threads of one image each (as gpu_bench.py): images/s, p50, the batches
   formed, and the model statistics' compute_infer per execution at batch 1 and 32, to set
   against part 2 (the same ``execute``, alone on a thread); at 64 also with the interpreter's
   switch interval at 0.5 ms instead of 5 ms (does the worker thread wait for the GIL?); per
   level the process's CPU and how late a probe thread gets the GIL back after a 0.5 ms sleep,
   and the interpreter's garbage collections (their pauses stop every thread). The statistics
   are means, as in the issue; part 2 gives medians and the mean.

Host times are medians of many iterations in ms; "gpu" columns are CUDA event spans on the
stream that did the work (a span includes the time the GPU waited for the host to enqueue).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
TREE = [ROOT / "core", ROOT / "sdk" / "src", ROOT / "plugins" / "torch" / "src"]

CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 32
input [{{ name: "INPUT__0" data_type: TYPE_FP32 dims: [3, {hw}, {hw}] }}]
output [{{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [1000] }}]
instance_group [{{ kind: KIND_GPU count: 1 }}]
dynamic_batching {{ max_queue_delay_microseconds: 100 }}
"""


class Block(nn.Module):
    """resnet18's basic block (torchvision's BasicBlock, as far as inference goes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.down(x)
        return self.relu(out)


class ResNet18(nn.Module):
    """torchvision's resnet18 layout, for hosts without torchvision."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def resnet18() -> tuple[nn.Module, str]:
    """torchvision's resnet18 (random weights), or the same network defined here."""
    try:
        import torchvision

        return torchvision.models.resnet18(weights=None), "torchvision resnet18"
    except ImportError:
        return ResNet18(), "resnet18 defined in this script (no torchvision)"


def cuda_device(torch: Any) -> Any:
    """The GPU every part runs on."""
    return torch.device("cuda", 0)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3 if samples else float("nan")


def loop(seconds: float, body: Callable[[], Any], warm: int = 5) -> list[float]:
    for _ in range(warm):
        body()
    times: list[float] = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        t = time.perf_counter()
        body()
        times.append(time.perf_counter() - t)
    return times


class Stages:
    """Per-iteration host times (s) and CUDA event spans (ms) of named stages; medians."""

    def __init__(self, names: list[str], gpu: list[str]) -> None:
        self.names, self.gpu = names, gpu
        self.host: dict[str, list[float]] = {n: [] for n in names}
        self.device: dict[str, list[float]] = {n: [] for n in gpu}
        self.walls: list[float] = []

    def add(self, marks: list[float], events: list[Any]) -> None:
        for i, name in enumerate(self.names):
            self.host[name].append(marks[i + 1] - marks[i])
        self.walls.append(marks[-1] - marks[0])
        for i, name in enumerate(self.gpu):
            self.device[name].append(events[i].elapsed_time(events[i + 1]))

    def row(self, label: str) -> str:
        host = "  ".join(f"{n} {median_ms(v):6.3f}" for n, v in self.host.items())
        gpu = "  ".join(f"{n} {statistics.median(v):6.3f}" for n, v in self.device.items() if v)
        return f"{label:26s} wall {median_ms(self.walls):7.3f} | host: {host} | gpu: {gpu}"


def gil_probe(copy_rows: Callable[[Any, Any], None], hw: int) -> None:
    """The gather of 32 images, with and without giving the GIL up per request, among busy threads."""
    x1 = np.random.default_rng(0).normal(size=(1, 3, hw, hw)).astype(np.float32)
    arrays = [x1] * 32
    out = np.empty((32, 3, hw, hw), np.float32)
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            while time.perf_counter() - t < 60e-6:
                pass
            time.sleep(0.0003)

    def timed(body: Callable[[], Any]) -> float:
        return median_ms(loop(0.5, body, warm=2))

    print(f"== 0. GIL probe: gather of 32 images ({out.nbytes >> 20} MiB), median ms")
    for clients in (0, 16, 64):
        stop.clear()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        try:
            numpy_ms = timed(lambda: np.concatenate(arrays, axis=0, out=out))
            held_ms = timed(lambda: copy_rows(out, arrays))
        finally:
            stop.set()
            for t in threads:
                t.join()
        print(
            f"  {clients:2d} busy threads: np.concatenate {numpy_ms:8.3f}   "
            f"copy_rows (GIL held) {held_ms:8.3f}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="per measured loop (default 2)")
    ap.add_argument("--hw", type=int, default=224, help="image side (default 224)")
    ap.add_argument("--skip-profiler", action="store_true")
    ap.add_argument("--skip-served", action="store_true")
    ap.add_argument("--skip-gil-probe", action="store_true")
    ap.add_argument("--installed", action="store_true", help="import tritonpy from the installed packages")
    args = ap.parse_args()
    if not args.installed:
        sys.path[:0] = [str(p) for p in TREE]
    import tritonpy_sdk

    if not args.skip_gil_probe:
        gil_probe(tritonpy_sdk.copy_rows, args.hw)
    if not torch.cuda.is_available():
        print(f"no CUDA device for torch {torch.__version__}: nothing to profile (this script needs a GPU)")
        return 0
    import tritonpy
    import tritonpy_backend_torch as backend
    from tritonpy.memory import PinnedPool
    from tritonpy_backend_torch._params import apply_execution_switches
    from tritonpy_sdk import outputs_to_compute, scatter_responses
    from tritonpy_sdk.testing import BackendHarness

    dev = cuda_device(torch)
    seconds, hw = args.seconds, args.hw
    net, which = resnet18()
    repo = Path(tempfile.mkdtemp()) / "repo"
    (repo / "resnet" / "1").mkdir(parents=True)
    path = repo / "resnet" / "1" / "model.pt"
    torch.jit.script(net.eval()).save(str(path))
    (repo / "resnet" / "config.pbtxt").write_text(CONFIG.format(hw=hw))
    x1 = np.random.default_rng(0).normal(size=(1, 3, hw, hw)).astype(np.float32)
    pool = PinnedPool.create()
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; model: {which}")
    print(
        f"cpus {os.cpu_count()}, torch threads {torch.get_num_threads()}, switch interval "
        f"{sys.getswitchinterval() * 1e3:.1f} ms; pinned pool: {'yes' if pool is not None else 'NO'}"
    )
    print(f"backend from {backend.__file__}")
    cudnn = torch.backends.cudnn
    print(f"cudnn.benchmark {cudnn.benchmark}, cudnn.allow_tf32 {cudnn.allow_tf32}")
    results: dict[str, float] = {}

    def event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    # -- 1. direct ------------------------------------------------------------------------------
    print("\n== 1. direct (gpu_bench.py's call, default stream; host ms medians, gpu event ms)")
    direct_module = torch.jit.load(str(path), map_location=dev).eval()
    for batch in (1, 32):
        xb = np.repeat(x1, batch, axis=0)

        def call(xb: np.ndarray[Any, Any] = xb) -> Any:
            return direct_module(torch.from_numpy(xb).to(dev)).cpu().numpy()

        with torch.inference_mode():
            walls = loop(seconds, call)
            results[f"direct_b{batch}"] = median_ms(walls)
            stages = Stages(["h2d", "fwd_launch", "d2h+wait", "numpy"], ["h2d", "forward", "d2h"])
            stop = time.perf_counter() + seconds / 2
            while time.perf_counter() < stop:
                ev = [event() for _ in range(4)]
                m = [time.perf_counter()]
                ev[0].record()
                xd = torch.from_numpy(xb).to(dev)
                ev[1].record()
                m.append(time.perf_counter())
                y = direct_module(xd)
                ev[2].record()
                m.append(time.perf_counter())
                yc = y.cpu()
                ev[3].record()
                m.append(time.perf_counter())
                yc.numpy()
                m.append(time.perf_counter())
                torch.cuda.synchronize()
                stages.add(m, ev)
            mid = results[f"direct_b{batch}"]
            print(
                f"direct b{batch:<2d} call median {mid:7.3f} ms, mean {statistics.fmean(walls) * 1e3:7.3f} "
                f"({batch / mid * 1e3:7.0f} img/s)"
            )
            print(stages.row(f"  direct b{batch} stages"))
            # The floor for a served path: input already pinned, non-blocking copies, one sync.
            pinned_in = torch.from_numpy(xb).pin_memory()
            stream = torch.cuda.Stream(dev)
            with torch.cuda.stream(stream):

                def floor(pinned_in: Any = pinned_in, stream: Any = stream) -> Any:
                    out = direct_module(pinned_in.to(dev, non_blocking=True)).to("cpu", non_blocking=True)
                    stream.synchronize()
                    return out.numpy()

                results[f"floor_b{batch}"] = median_ms(loop(seconds, floor))
            print(
                f"  floor b{batch:<2d} (pinned in, async copies, 1 stream sync) median "
                f"{results[f'floor_b{batch}']:7.3f} ms"
            )
    del direct_module
    torch.cuda.synchronize()

    # -- 2. the backend's execute, alone ---------------------------------------------------------
    print("\n== 2. the backend's execute without a server (KIND_GPU)")
    h = BackendHarness(backend, repo / "resnet", instance_kind="KIND_GPU").start()
    state = h.instance.state
    print(f"instance stream {state.stream}, device {state.program.device}, options {state.options}")

    def stage_run(requests: list[Any], stages: Stages) -> None:
        """execute(), stage by stage, with the backend's own methods (as InstanceState.execute)."""
        ev = [event() for _ in range(4)]
        m = [time.perf_counter()]
        wanted = outputs_to_compute(requests, state.output_names)
        apply_execution_switches(torch, state.options)
        with torch.inference_mode(state.options.inference_mode), torch.no_grad():
            with torch.cuda.stream(state.stream):
                m.append(time.perf_counter())
                ev[0].record()
                staged: list[Any] = []
                arguments = state._arguments(requests, None, staged)
                ev[1].record()
                m.append(time.perf_counter())
                out = state._forward(arguments)
                ev[2].record()
                m.append(time.perf_counter())
                host = state._outputs(out, wanted)
                ev[3].record()
                m.append(time.perf_counter())
                state.stream.synchronize()
                m.append(time.perf_counter())
                arrays = {n: state._to_array(state.outputs[n], v) for n, v in host.items()}
                staged.clear()
        scatter_responses(requests, arrays, state.output_types)
        m.append(time.perf_counter())
        stages.add(m, ev)

    names = ["enter", "gather+h2d_q", "fwd_launch", "d2h_q", "sync_wait", "scatter"]
    for batch in (1, 32):
        requests = [h.request({"INPUT__0": x1}) for _ in range(batch)]
        walls = loop(seconds, lambda requests=requests: h.execute(requests))
        results[f"execute_b{batch}"] = median_ms(walls)
        stages = Stages(names, ["h2d", "forward", "d2h"])
        stop = time.perf_counter() + seconds / 2
        while time.perf_counter() < stop:
            stage_run(requests, stages)
        mid, mean = results[f"execute_b{batch}"], statistics.fmean(walls) * 1e3
        print(
            f"execute b{batch:<2d} median {mid:7.3f} ms, mean {mean:7.3f} ({batch / mid * 1e3:7.0f} img/s); "
            f"direct median ÷ execute median {results[f'direct_b{batch}'] / mid:.2f}"
        )
        print(stages.row(f"  execute b{batch} stages"))
    requests32 = [h.request({"INPUT__0": x1}) for _ in range(32)]
    busy_stop = threading.Event()

    def busy() -> None:  # shaped like an in-process client: some Python, then a wait
        while not busy_stop.is_set():
            t = time.perf_counter()
            while time.perf_counter() - t < 60e-6:
                pass
            time.sleep(0.0003)

    busy_threads = [threading.Thread(target=busy) for _ in range(16)]
    for t in busy_threads:
        t.start()
    try:
        ms = median_ms(loop(seconds, lambda: h.execute(requests32)))
    finally:
        busy_stop.set()
        for t in busy_threads:
            t.join()
    print(f"  execute b32 beside 16 busy Python threads median {ms:7.3f} ms")
    if pool is not None:
        buffer = pool.allocate((32, 3, hw, hw), np.float32)
        arrays32 = [x1] * 32
        gather = median_ms(loop(seconds / 2, lambda: np.concatenate(arrays32, axis=0, out=buffer)))
        pageable = np.empty((32, 3, hw, hw), np.float32)
        gather_p = median_ms(loop(seconds / 2, lambda: np.concatenate(arrays32, axis=0, out=pageable)))
        print(
            f"  the gather alone (np.concatenate of 32 images, {buffer.nbytes >> 20} MiB): "
            f"into pinned {gather:.3f} ms, into pageable {gather_p:.3f} ms"
        )
        del buffer

    # -- 3. profiler -----------------------------------------------------------------------------
    if not args.skip_profiler:
        print("\n== 3. torch.profiler, batch 32 (10 calls each)")
        from torch.profiler import ProfilerActivity, profile

        direct_module = torch.jit.load(str(path), map_location=dev).eval()
        xb32 = np.repeat(x1, 32, axis=0)
        with torch.inference_mode():
            for _ in range(5):
                direct_module(torch.from_numpy(xb32).to(dev)).cpu()
        runs: list[tuple[str, Callable[[], Any]]] = [
            ("direct", lambda: direct_module(torch.from_numpy(xb32).to(dev)).cpu().numpy()),
            ("execute", lambda: h.execute(requests32)),
        ]
        for label, body in runs:
            try:
                with torch.inference_mode():
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        for _ in range(10):
                            body()
                        torch.cuda.synchronize()
                table = prof.key_averages()
                print(f"-- {label}: by self CPU time")
                print(table.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))
                for key in ("self_device_time_total", "self_cuda_time_total"):
                    try:
                        text = table.table(sort_by=key, row_limit=12, max_name_column_width=40)
                    except (AttributeError, KeyError, ValueError):
                        continue
                    print(f"-- {label}: by {key}")
                    print(text)
                    break
            except Exception as exc:  # CUPTI missing or refused: the rest still runs
                print(f"-- {label}: profiler unavailable: {type(exc).__name__}: {exc}")
        del direct_module

    # -- 4. mixed batch sizes ----------------------------------------------------------------------
    print("\n== 4. new batch sizes (first and second execution, ms)")
    cells = []
    for batch in (2, 3, 5, 8, 13, 21, 31):
        requests = [h.request({"INPUT__0": x1}) for _ in range(batch)]
        first = time.perf_counter()
        h.execute(requests)
        second = time.perf_counter()
        h.execute(requests)
        cells.append(f"b{batch}: {(second - first) * 1e3:.2f} / {(time.perf_counter() - second) * 1e3:.2f}")
    print("  " + "  ".join(cells))
    h.close()

    # -- 5. served in process ------------------------------------------------------------------------
    if not args.skip_served:
        print("\n== 5. served in process (one KIND_GPU instance, dynamic batching 100 us)")

        def snapshot(server: Any) -> dict[str, Any]:
            st = server.model_statistics("resnet")[0]
            batches = {b["batch_size"]: dict(b["compute_infer"]) for b in st.get("batch_stats", [])}
            return {"stats": st, "batches": batches}

        pauses: list[float] = []
        started: list[float] = []

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            """The interpreter's collections: every thread waits for them (the GIL is held)."""
            if phase == "start":
                started.append(time.perf_counter())
            elif started:
                pauses.append(time.perf_counter() - started.pop())

        gc.callbacks.append(on_gc)

        def level(server: Any, model: Any, conc: int, label: str) -> None:
            before = snapshot(server)
            pauses.clear()
            lat: list[float] = []
            lock = threading.Lock()
            stop = time.monotonic() + seconds * 2

            def client() -> None:
                mine = []
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    model.predict({"INPUT__0": x1})
                    mine.append(time.perf_counter() - t)
                with lock:
                    lat.extend(mine)

            wake: list[float] = []

            def probe() -> None:
                """How late a thread gets the GIL back after a 0.5 ms sleep (OS wake-up included)."""
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    time.sleep(0.0005)
                    wake.append(time.perf_counter() - t - 0.0005)

            threads = [threading.Thread(target=client) for _ in range(conc)]
            threads.append(threading.Thread(target=probe))
            t0, cpu0 = time.monotonic(), time.process_time()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
            after = snapshot(server)
            s0, s1 = before["stats"], after["stats"]
            execs = s1["execution_count"] - s0["execution_count"]
            infs = s1["inference_count"] - s0["inference_count"]
            inf0, inf1 = s0["inference_stats"], s1["inference_stats"]

            def per_request(key: str) -> float:
                n = inf1[key]["count"] - inf0[key]["count"]
                return (inf1[key]["ns"] - inf0[key]["ns"]) / max(1, n) / 1e3

            per_batch = []
            for size, d1 in sorted(after["batches"].items()):
                d0 = before["batches"].get(size, {"count": 0, "ns": 0})
                n = d1["count"] - d0["count"]
                if n:
                    per_batch.append((size, n, (d1["ns"] - d0["ns"]) / n / 1e6))
            rate = len(lat) / elapsed
            print(
                f"{label:34s} {rate:7.0f} img/s  p50 {median_ms(lat):6.2f} ms  avg batch "
                f"{infs / max(1, execs):4.1f}  per request (us): queue {per_request('queue'):7.1f} "
                f"input {per_request('compute_input'):6.1f} output {per_request('compute_output'):6.1f}"
            )
            common = sorted(per_batch, key=lambda c: -c[1])[:4]
            shown = ", ".join(f"b{s} x{n}: {ms:.3f}" for s, n, ms in sorted(common))
            print(f"{'':34s} compute_infer ms per execution (most frequent batch sizes): {shown}")
            wake.sort()
            late = (wake[len(wake) // 2] * 1e6, wake[int(len(wake) * 0.9)] * 1e6) if wake else (0.0, 0.0)
            print(
                f"{'':34s} process CPU {cpu / elapsed:4.1f} cores, {cpu / max(1, len(lat)) * 1e6:6.1f} us "
                f"per image; GIL probe late by p50 {late[0]:6.0f} us, p90 {late[1]:6.0f} us; "
                f"gc: {len(pauses)} collections, {sum(pauses) * 1e3:.1f} ms, "
                f"longest {max(pauses, default=0) * 1e3:.2f} ms"
            )

        with tritonpy.Server(model_repository=str(repo)) as server:
            model = server.model("resnet")
            for _ in range(5):
                model.predict({"INPUT__0": x1})
            warm_stop = time.monotonic() + 2

            def warm() -> None:
                while time.monotonic() < warm_stop:
                    model.predict({"INPUT__0": x1})

            warmers = [threading.Thread(target=warm) for _ in range(64)]
            for t in warmers:
                t.start()
            for t in warmers:
                t.join()
            level(server, model, 1, "concurrency 1")
            level(server, model, 64, "concurrency 64")
            interval = sys.getswitchinterval()
            sys.setswitchinterval(0.0005)
            try:
                level(server, model, 64, "concurrency 64, switch interval 0.5ms")
            finally:
                sys.setswitchinterval(interval)
        gc.callbacks.remove(on_gc)
        print(
            f"  compare: execute alone b1 {results['execute_b1']:.3f} ms, "
            f"b32 {results['execute_b32']:.3f} ms; direct b1 {results['direct_b1']:.3f} ms, "
            f"b32 {results['direct_b32']:.3f} ms"
        )
    if pool is not None:
        pool.close()
    print("\ndone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
