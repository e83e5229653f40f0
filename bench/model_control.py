"""Model control: how long a reload takes, and what it does to the traffic it happens under.

    python bench/model_control.py                 # writes bench/model_control.md
    python bench/model_control.py --reloads 20 --window 15

One server (``tritonpy serve --model-control-mode explicit``) in a subprocess, and
two tiny models, Y = X + 1 on FP32 [1, 4] (max_batch_size 8): ``onnx_add`` (ONNX,
onnxruntime) and ``python_add`` (Python backend, a stub process). For each model:

  cold load    — ``load_model`` after an ``unload_model`` (and after the model went
                 unready): the time until it serves again;
  reload       — ``load_model`` of a loaded model, ``--reloads`` times back to back,
                 no traffic: the new version builds while the old one serves, then
                 swaps. Each load carries a config override alternating the instance
                 count 2/1, so each one is a real reload (a load of an unchanged model
                 is a no-op). p50/p90/max;
  traffic      — 4 client threads (tritonclient.http, one client each) send
                 inferences back to back for ``--window`` seconds, twice: alone
                 (baseline), then while another thread reloads the model back to back.
                 Requests completed, failed (a wrong answer counts as failed), p50/p99/max
                 latency, and p99 during reloads ÷ p99 baseline.

The server promises zero failed requests during reloads; every failure's message is
printed and written to the result file.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("onnx_add", "python_add")
CLIENTS = 4

PYTHON_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1)]))
        return responses
"""


def config(name: str, backend: str, instances: int) -> dict[str, Any]:
    """The model's config as Triton's JSON (what a load's ``config`` override takes)."""
    return {
        "name": name,
        "backend": backend,
        "max_batch_size": 8,
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}],
        "instance_group": [{"count": instances, "kind": "KIND_CPU"}],
    }


def pbtxt(cfg: dict[str, Any]) -> str:
    return (
        f'name: "{cfg["name"]}"\nbackend: "{cfg["backend"]}"\nmax_batch_size: {cfg["max_batch_size"]}\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        "instance_group [ { count: 1, kind: KIND_CPU } ]\n"
    )


def make_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "one"], ["Y"])],
        "add_one",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [-1, 4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


def repository(root: Path) -> dict[str, dict[str, Any]]:
    """Write both models under ``root``; returns each model's config (JSON form)."""
    configs = {
        "onnx_add": config("onnx_add", "onnxruntime", 1),
        "python_add": config("python_add", "python", 1),
    }
    make_onnx(root / "onnx_add" / "1" / "model.onnx")
    (root / "python_add" / "1").mkdir(parents=True)
    (root / "python_add" / "1" / "model.py").write_text(PYTHON_MODEL)
    for name, cfg in configs.items():
        (root / name / "config.pbtxt").write_text(pbtxt(cfg))
    return configs


def client(url: str) -> Any:
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(url, network_timeout=120.0, connection_timeout=120.0)


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(np.ceil(q * len(ordered))) - 1))]


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    reloads: list[float] = field(default_factory=list)
    reload_errors: list[str] = field(default_factory=list)

    def p(self, q: float) -> float:
        return quantile(self.latencies, q) * 1e3


class Reloader:
    """Reloads one model with a config override alternating its instance count 2/1.

    tritonclient.http runs on gevent: a client serves only the thread that made it,
    so each thread that reloads gets its own."""

    def __init__(self, url: str, cfg: dict[str, Any]) -> None:
        self.url = url
        self.cfg = cfg
        self.count = 0
        self._local = threading.local()

    def reload(self) -> float:
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = client(self.url)
        self.count += 1
        count = 2 - self.count % 2
        override = json.dumps({**self.cfg, "instance_group": [{"count": count, "kind": "KIND_CPU"}]})
        t = time.perf_counter()
        c.load_model(self.cfg["name"], config=override)
        return time.perf_counter() - t

    def close(self) -> None:
        """Close the calling thread's client."""
        c = getattr(self._local, "client", None)
        if c is not None:
            self._local.client = None
            c.close()


def wait_ready(c: Any, name: str, ready: bool, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while c.is_model_ready(name) != ready:
        if time.monotonic() > deadline:
            raise RuntimeError(f"model {name} did not become {'ready' if ready else 'unready'}")
        time.sleep(0.01)


def cold_load(url: str, name: str) -> float:
    c = client(url)
    try:
        c.unload_model(name)
        wait_ready(c, name, False)
        t = time.perf_counter()
        c.load_model(name)
        elapsed = time.perf_counter() - t
        if not c.is_model_ready(name):
            raise RuntimeError(f"model {name} is not ready after its load returned")
        return elapsed
    finally:
        c.close()


def traffic(url: str, reloader: Reloader | None, name: str, seconds: float) -> Phase:
    """``CLIENTS`` threads infer back to back for ``seconds``; ``reloader`` reloads meanwhile."""
    import tritonclient.http as httpclient

    phase = Phase()
    lock = threading.Lock()
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    expected = x + 1
    start = threading.Barrier(CLIENTS + (1 if reloader else 0) + 1)
    stop = [0.0]

    def infer_loop() -> None:
        c = client(url)
        inp = httpclient.InferInput("X", [1, 4], "FP32")
        inp.set_data_from_numpy(x)
        out = [httpclient.InferRequestedOutput("Y")]
        mine: list[float] = []
        errors: list[str] = []
        try:
            c.infer(name, [inp], outputs=out)  # warm: a connection per client
            start.wait()
            while time.monotonic() < stop[0]:
                t = time.perf_counter()
                try:
                    y = c.infer(name, [inp], outputs=out).as_numpy("Y")
                    if y is None or not np.array_equal(y, expected):
                        errors.append(f"wrong answer: {y!r}")
                except Exception as exc:  # every failure is what we measure
                    errors.append(f"{type(exc).__name__}: {exc}")
                mine.append(time.perf_counter() - t)
        finally:
            c.close()
            with lock:
                phase.latencies.extend(mine)
                phase.errors.extend(errors)

    def reload_loop() -> None:
        assert reloader is not None
        start.wait()
        try:
            while time.monotonic() < stop[0]:
                try:
                    phase.reloads.append(reloader.reload())
                except Exception as exc:
                    phase.reload_errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            reloader.close()

    threads = [threading.Thread(target=infer_loop) for _ in range(CLIENTS)]
    if reloader is not None:
        threads.append(threading.Thread(target=reload_loop))
    for th in threads:
        th.start()
    stop[0] = time.monotonic() + seconds + 0.5  # set before the barrier releases anyone
    start.wait(timeout=120)
    stop[0] = time.monotonic() + seconds
    for th in threads:
        th.join()
    return phase


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return (
        f"{os.cpu_count()} CPU(s) ({cpu}), {system}, Python {platform.python_version()}; "
        f"load average at start {load} (other work on the machine skews every number)"
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reloads", type=int, default=10, help="reloads timed per model, without traffic")
    parser.add_argument("--window", type=float, default=8.0, help="seconds per traffic phase")
    parser.add_argument("--out", default=str(ROOT / "bench" / "model_control.md"))
    parser.add_argument("--server-log", metavar="PATH", help="keep the server's log there")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from run import Served

    command = "python bench/model_control.py" + "".join(
        f" --{k} {v:g}" if isinstance(v, float) else f" --{k} {v}"
        for k, v in (("reloads", args.reloads), ("window", args.window))
        if v != parser.get_default(k)
    )
    host = machine()
    reload_rows, traffic_rows, failures = [], [], []
    tmp = Path(tempfile.mkdtemp(prefix="bench-model-control-"))
    server: Served | None = None
    try:
        configs = repository(tmp / "models")
        loads = [arg for name in MODELS for arg in ("--load-model", name)]
        server = Served(tmp / "models", ["--model-control-mode", "explicit", *loads], tmp / "server.log")
        control = client(server.url)
        for name in MODELS:
            wait_ready(control, name, True, 120)
        for name in MODELS:
            print(f"{name}: cold load, {args.reloads} reloads, traffic...", file=sys.stderr, flush=True)
            cold = cold_load(server.url, name)
            reloader = Reloader(server.url, configs[name])
            reloader.reload()  # the first override load: not timed
            times = [reloader.reload() for _ in range(args.reloads)]
            reload_rows.append(
                f"| `{name}` | {ms(cold)} | {ms(quantile(times, 0.5))} | {ms(quantile(times, 0.9))} | "
                f"{ms(max(times))} | {len(times)} |"
            )
            time.sleep(1.0)  # let the retired versions finish unloading
            base = traffic(server.url, None, name, args.window)
            during = traffic(server.url, reloader, name, args.window)
            reloader.close()
            for label, phase in (("baseline", base), ("during reloads", during)):
                reloads = (
                    f"{len(phase.reloads)} (p50 {ms(quantile(phase.reloads, 0.5))} ms, "
                    f"max {ms(max(phase.reloads, default=0.0))} ms, {len(phase.reload_errors)} failed)"
                    if phase is during
                    else "—"
                )
                traffic_rows.append(
                    f"| `{name}` | {label} | {len(phase.latencies)} | {len(phase.errors)} | "
                    f"{phase.p(0.5):.2f} | {phase.p(0.99):.2f} | {phase.p(1.0):.2f} | {reloads} |"
                )
                counts = collections.Counter(phase.errors + [f"reload: {e}" for e in phase.reload_errors])
                failures += [f"- `{name}`, {label}, {n}×: {msg}" for msg, n in counts.most_common()]
            ratio = during.p(0.99) / base.p(0.99) if base.latencies else float("nan")
            traffic_rows.append(f"| `{name}` | p99 during ÷ baseline | | | | {ratio:.2f} | | |")
        control.close()
    finally:
        if server is not None:
            server.stop()
        log_lines = (tmp / "server.log").read_text(errors="replace").splitlines() if server else []
        if args.server_log and server is not None:
            shutil.copy(tmp / "server.log", args.server_log)
        shutil.rmtree(tmp, ignore_errors=True)
    # glog-style lines: "E1124 07:31:26.271777 8982 tritonpy] ..." is an error, "W..." a warning.
    errors_logged = [line for line in log_lines if re.match(r"[EF]\d{4} ", line) or "Traceback" in line]
    warnings_logged = [line for line in log_lines if re.match(r"W\d{4} ", line)]

    lines = [
        "# Model control: reload latency and traffic during reloads",
        "",
        f"`{command}` — run {time.strftime('%Y-%m-%d %H:%M')} on {host}.",
        "",
        "Two tiny models, Y = X + 1 on FP32 [1, 4]: `onnx_add` (onnxruntime) and `python_add`",
        "(Python backend, stub process). One `tritonpy serve --model-control-mode explicit`",
        "subprocess; loads and inferences over HTTP (tritonclient.http).",
        "",
        "### Load latency (wall time of `load_model`, which returns once the new version serves)",
        "",
        "Cold: `load_model` after `unload_model`. Reload: `load_model` of the loaded model with a",
        "config override alternating the instance count 2/1 (a real reload each time), no traffic.",
        "",
        "| model | cold load ms | reload p50 ms | reload p90 ms | reload max ms | reloads |",
        "|---|---|---|---|---|---|",
        *reload_rows,
        "",
        f"### Traffic: {CLIENTS} client threads for {args.window:g} s, alone and during back-to-back reloads",
        "",
        "| model | phase | requests | failed | p50 ms | p99 ms | max ms | reloads in the window |",
        "|---|---|---|---|---|---|---|---|",
        *traffic_rows,
        "",
        "Failed requests and reloads: " + ("none." if not failures else ""),
        *failures,
        "",
        f"Server log: {len(log_lines)} lines, {len(errors_logged)} errors, {len(warnings_logged)} warnings"
        + (" (the first 20):" if errors_logged or warnings_logged else "."),
        "",
        *[f"    {line}" for line in (errors_logged + warnings_logged)[:20]],
    ]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
