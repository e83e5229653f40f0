"""PyTorch backend: TorchScript and torch.compile models served by tritonpy ÷ the same called directly.

    python bench/torch_backend.py              # prints a markdown table, writes bench/torch_backend.md
    python bench/torch_backend.py --quick      # shorter windows (a smoke run)

Two CPU models, scripted in the run: an MLP (3 dense layers, 256 wide, ReLU)
and a small CNN (two 3×3 convolutions over 3×32×32 images, a linear head),
each also served by the Python-based runtime (``runtime: "model.py"``: the
class in ``model.py``, ``torch.compile`` with its defaults) as ``<name>_compiled``.
Each is served with dynamic batching (max_batch_size 32) and driven over gRPC
by perf_analyzer at concurrency 1 and 16. Direct: the scripted module called in
a loop in this process under ``torch.inference_mode`` at batch 1 and at the
average batch the dynamic batcher formed at concurrency 16 (from the model's
statistics in the same run). Reported: infer/s, p50, and served ÷ direct
throughput (the direct call is the limit; its infer/s is the batch ÷ the
median call). The server and perf_analyzer share
the machine's cores, as a client and server on one host do; compare the ratios
of one run, not absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

from run import Served, perf  # noqa: E402  (bench/run.py: the server process and perf_analyzer)

CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 32
input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: {dims} }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: {out} }} ]
dynamic_batching {{ max_queue_delay_microseconds: 200 }}
"""


#: The two models' source: scripted into model.pt, and written as model.py for the Python-based runtime.
SOURCE = """
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv1(x))
        y = torch.relu(self.conv2(y))
        return self.head(y.mean(dim=(2, 3)))
"""


def models(root: Path, compiled: bool) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """Write the models into ``root``; returns name → (the module as called directly, input shape).

    ``mlp`` / ``cnn``: TorchScript (``model.pt``). With ``compiled``, also ``mlp_compiled`` /
    ``cnn_compiled``: the same class in ``model.py`` with its weights in ``model.pt``, served by
    the Python-based runtime (``runtime: "model.py"``, ``torch.compile`` with its defaults);
    directly, ``torch.compile`` of the same module."""
    import torch

    # Imported from a file: torch.jit.script reads the classes' source.
    (root / "bench_torch_models.py").write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("bench_torch_models", root / "bench_torch_models.py")
    assert spec is not None and spec.loader is not None
    namespace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(namespace)
    found = {}
    for name, cls, shape, out in (("mlp", "MLP", (256,), (16,)), ("cnn", "CNN", (3, 32, 32), (10,))):
        torch.manual_seed(0)
        module = getattr(namespace, cls)().eval()
        with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; it is what Triton serves
            warnings.simplefilter("ignore", DeprecationWarning)
            scripted = torch.jit.script(module)
        (root / name / "1").mkdir(parents=True)
        scripted.save(str(root / name / "1" / "model.pt"))
        (root / name / "config.pbtxt").write_text(CONFIG.format(dims=list(shape), out=list(out)))
        found[name] = (scripted, shape)
        if compiled:
            folder = root / f"{name}_compiled"
            (folder / "1").mkdir(parents=True)
            other = "CNN" if cls == "MLP" else "MLP"  # one module class per file
            (folder / "1" / "model.py").write_text(f"{SOURCE}\n\ndel {other}\n")
            torch.save(module.state_dict(), folder / "1" / "model.pt")
            config = CONFIG.replace('platform: "pytorch_libtorch"', 'backend: "pytorch"\nruntime: "model.py"')
            (folder / "config.pbtxt").write_text(config.format(dims=list(shape), out=list(out)))
            found[f"{name}_compiled"] = (torch.compile(module), shape)
    return found


def direct(module: Any, shape: tuple[int, ...], batch: int, seconds: float) -> dict[str, float]:
    """The scripted module called in a loop at ``batch``: infer/s as batch ÷ the median call."""
    import torch

    x = torch.from_numpy(np.random.default_rng(0).standard_normal((batch, *shape)).astype(np.float32))
    times = []
    with torch.inference_mode():
        for _ in range(20):  # the profiling executor optimises after its first runs
            module(x)
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            t = time.perf_counter()
            module(x)
            times.append(time.perf_counter() - t)
    times.sort()
    p50 = times[len(times) // 2]
    # The median call, not the mean: the loop shares the cores with whatever else runs.
    return {"throughput": batch / p50, "p50_us": p50 * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurement windows")
    parser.add_argument(
        "--no-compiled", action="store_true", help="leave out the Python-based runtime (torch.compile) models"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "torch_backend.md"))
    args = parser.parse_args()
    window = 300 if args.quick else 2000
    seconds = 1.5 if args.quick else 4.0
    import torch
    from get_perf_analyzer import provision

    pa = provision()
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), torch {torch.__version__}, "
        f"{'quick' if args.quick else 'full'} windows; served: perf_analyzer over gRPC, "
        "dynamic batching (max_batch_size 32, 200 µs queue delay); direct: the scripted module "
        "(`_compiled`: `torch.compile` of the module, as the Python-based runtime serves it) "
        "in this process.",
        "",
        "| model | concurrency | served infer/s | served p50 µs | avg batch | direct infer/s "
        "(same batch) | direct p50 µs | served ÷ direct |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        scripted = models(Path(tmp), compiled=not args.no_compiled)
        server = Served(Path(tmp), log=Path(tmp) / "server.log")
        try:
            for name, (module, shape) in scripted.items():
                for concurrency in (1, 16):  # warm up: torch.compile compiles per new batch shape
                    perf(pa, name, f"127.0.0.1:{server.grpc}", "grpc", concurrency, max(window // 4, 100))
                for concurrency in (1, 16):
                    before = server.stats(name)
                    served = perf(pa, name, f"127.0.0.1:{server.grpc}", "grpc", concurrency, window)
                    after = server.stats(name)
                    inferences = int(after["inference_count"]) - int(before["inference_count"])
                    executions = max(1, int(after["execution_count"]) - int(before["execution_count"]))
                    batch = max(1, round(inferences / executions))
                    limit = direct(module, shape, batch, seconds)
                    ratio = served["throughput"] / limit["throughput"]
                    lines.append(
                        f"| {name} | {concurrency} | {served['throughput']:.0f} | {served['p50_us']:.0f} | "
                        f"{inferences / executions:.1f} | {limit['throughput']:.0f} | "
                        f"{limit['p50_us']:.0f} | {ratio:.2f} |"
                    )
                    print(lines[-1], flush=True)
        finally:
            server.stop()
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
