"""FIL backend: 500-tree models served by tritonpy ÷ the library's own predict.

    python bench/fil_backend.py              # prints a markdown table, writes bench/fil_backend.md
    python bench/fil_backend.py --quick      # shorter windows (a smoke run)

Two CPU models trained in the run on 32 features (10% missing values): an
XGBoost binary classifier and a LightGBM binary classifier, 500 trees of depth
6 each, served as Triton's FIL backend documents them (``predict_proba``,
``max_batch_size`` 4096, one instance, ``dynamic_batching {}``: the FIL
backend's model_config.md gives it in its typical ``config.pbtxt`` and
recommends it), and the XGBoost model once more as ``xgboost_delay200`` with a
200 µs ``max_queue_delay_microseconds`` (a lone request waits all of it, in
Triton's batcher as here); driven over gRPC by perf_analyzer at concurrency 1
and 16.
Direct, in this process: the library called the naive way, once per request
(XGBoost: ``Booster.predict(DMatrix(x))``; LightGBM: ``Booster.predict(x)``),
at batch 1 and at the average batch the dynamic batcher formed at concurrency
16 (from the model's statistics in the same run). Reported: infer/s, p50, and
served ÷ direct throughput. Then the same models in process
(``tritonpy.Server``, no network) with 1 and 16 threads sending one-row
requests, against the naive call at batch 1. The server and perf_analyzer
share the machine's cores; compare the ratios of one run, not absolute
numbers across machines. The naive call at batch 1 is measured before and
after each model's served cells and the faster kept: on a small shared host
its default thread count (every core) makes it swing several-fold with the
neighbours' load, and a slowed direct call would flatter the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

from run import Served, infer_threads, perf  # noqa: E402  (bench/run.py: the server process and perf_analyzer)

FEATURES = 32
#: The XGBoost model served with a 200 µs queue delay.
DELAYED = "xgboost_delay200"
TREES = 500
CONFIG = """
backend: "fil"
max_batch_size: 4096
input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {features} ] }} ]
output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters {{ key: "model_type" value {{ string_value: "{model_type}" }} }}
parameters {{ key: "is_classifier" value {{ string_value: "true" }} }}
parameters {{ key: "predict_proba" value {{ string_value: "true" }} }}
dynamic_batching {{ max_queue_delay_microseconds: {delay} }}
"""


def data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) * np.nan_to_num(x[:, 2]) > 0).astype(int)
    return x, y


def models(root: Path) -> dict[str, Callable[[np.ndarray], Any]]:
    """Train and write the models into ``root`` (XGBoost twice: without a queue delay and
    with 200 µs); returns name → the naive direct call."""
    import lightgbm as lgb
    import xgboost as xgb

    x, y = data(20000)
    found: dict[str, Callable[[np.ndarray], Any]] = {}
    booster = xgb.train(
        {"objective": "binary:logistic", "max_depth": 6, "eta": 0.05}, xgb.DMatrix(x, y), TREES
    )
    for name, delay in (("xgboost", 0), (DELAYED, 200)):
        (root / name / "1").mkdir(parents=True)
        booster.save_model(str(root / name / "1" / "xgboost.json"))
        config = CONFIG.format(features=FEATURES, model_type="xgboost_json", delay=delay)
        (root / name / "config.pbtxt").write_text(config)
        found[name] = lambda a: booster.predict(xgb.DMatrix(a))
    gbm = lgb.train(
        {"objective": "binary", "num_leaves": 63, "max_depth": 6, "verbose": -1}, lgb.Dataset(x, y), TREES
    )
    (root / "lightgbm" / "1").mkdir(parents=True)
    gbm.save_model(str(root / "lightgbm" / "1" / "model.txt"))
    (root / "lightgbm" / "config.pbtxt").write_text(
        CONFIG.format(features=FEATURES, model_type="lightgbm", delay=0)
    )
    found["lightgbm"] = lambda a: gbm.predict(a)
    return found


def direct(call: Callable[[np.ndarray], Any], batch: int, seconds: float) -> dict[str, float]:
    """The library called in a loop at ``batch``: infer/s as batch ÷ the median call."""
    x = data(batch)[0]
    for _ in range(20):
        call(x)
    times = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        t = time.perf_counter()
        call(x)
        times.append(time.perf_counter() - t)
    times.sort()
    p50 = times[len(times) // 2]
    return {"throughput": batch / p50, "p50_us": p50 * 1e6}


def in_process(repo: Path, name: str, concurrency: int, seconds: float) -> dict[str, float]:
    """``tritonpy.Server`` in this process, no network: the core and the backend alone."""
    import tritonpy

    x = data(1)[0]
    with tritonpy.Server(model_repository=repo) as server:
        model = server.model(name)
        for _ in range(50):
            server.infer(model.create_request({"input__0": x}))
        return infer_threads(server, lambda: model.create_request({"input__0": x}), concurrency, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurement windows")
    parser.add_argument("--out", default=str(ROOT / "bench" / "fil_backend.md"))
    args = parser.parse_args()
    window = 300 if args.quick else 2000
    seconds = 1.5 if args.quick else 4.0
    import lightgbm
    import xgboost
    from get_perf_analyzer import provision

    pa = provision()
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s), xgboost {xgboost.__version__}, "
        f"lightgbm {lightgbm.__version__}, {'quick' if args.quick else 'full'} windows; {TREES} trees of "
        f"depth 6, {FEATURES} features; served: perf_analyzer over gRPC, `dynamic_batching {{}}` "
        f"(`{DELAYED}`: a 200 µs queue delay), one instance; direct: the library's naive predict in "
        "this process.",
        "",
        "| model | concurrency | served infer/s | served p50 µs | avg batch | direct infer/s at batch 1 "
        "| direct infer/s (same batch) | served ÷ direct batch 1 | served ÷ direct same batch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        calls = models(Path(tmp))
        server = Served(Path(tmp), log=Path(tmp) / "server.log")
        try:
            for name, call in calls.items():
                one = direct(call, 1, seconds)
                rows: list[tuple[int, dict[str, float], float, dict[str, float]]] = []
                perf(pa, name, f"127.0.0.1:{server.grpc}", "grpc", 1, max(window // 4, 100))  # warm up
                for concurrency in (1, 16):
                    before = server.stats(name)
                    served = perf(pa, name, f"127.0.0.1:{server.grpc}", "grpc", concurrency, window)
                    after = server.stats(name)
                    inferences = int(after["inference_count"]) - int(before["inference_count"])
                    executions = max(1, int(after["execution_count"]) - int(before["execution_count"]))
                    batch = max(1, round(inferences / executions))
                    same = direct(call, batch, seconds) if batch > 1 else None
                    rows.append((concurrency, served, inferences / executions, same or {}))
                again = direct(call, 1, seconds)
                one = max(one, again, key=lambda d: d["throughput"])
                for concurrency, served, formed, same in rows:
                    same = same or one
                    lines.append(
                        f"| {name} | {concurrency} | {served['throughput']:.0f} | {served['p50_us']:.0f} | "
                        f"{formed:.1f} | {one['throughput']:.0f} | "
                        f"{same['throughput']:.0f} | "
                        f"{served['throughput'] / one['throughput']:.2f} | "
                        f"{served['throughput'] / same['throughput']:.2f} |"
                    )
                    print(lines[-1], flush=True)
        finally:
            server.stop()
        lines += [
            "",
            "In process (`tritonpy.Server`, no network; requests of one row from threads):",
            "",
            "| model | threads | infer/s | p50 µs | in process ÷ direct batch 1 |",
            "|---|---|---|---|---|",
        ]
        for name, call in calls.items():
            one = max(direct(call, 1, seconds), direct(call, 1, seconds), key=lambda d: d["throughput"])
            for concurrency in (1, 16):
                got = in_process(Path(tmp), name, concurrency, seconds)
                lines.append(
                    f"| {name} | {concurrency} | {got['throughput']:.0f} | {got['p50_us']:.0f} | "
                    f"{got['throughput'] / one['throughput']:.2f} |"
                )
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
