"""An ensemble of two steps vs the client calling the two models one after the other.

    python bench/ensemble.py              # prints a markdown table, writes bench/ensemble.md
    python bench/ensemble.py --seconds 2  # shorter windows

The same pipeline, ``first`` (an ONNX layer, 256 wide) then ``second`` (another),
run three ways in one run, one caller thread, over gRPC with tritonclient:
  ensemble  — one request to the ``pipeline`` ensemble (the intermediate tensor stays
              in the server);
  sequence  — the client calls ``first``, then sends its output to ``second``;
  direct    — each model alone (the parts the sequence is made of).
Reported: calls/s and p50 per path, and served ÷ sum of direct: the ensemble's p50
over the sum of the two models' own p50s (1.0 = the ensemble costs nothing on top;
the client's sequence pays two round trips and sends the intermediate tensor twice).
The same for the in-process API (no network). Compare ratios from one run only.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

WIDTH = 256


def repository(root: Path) -> Path:
    from run import make_mlp

    repo = root / "models"
    for name in ("first", "second"):
        make_mlp(repo / name / "1" / "model.onnx", width=WIDTH, layers=1)
        (repo / name / "config.pbtxt").write_text(
            'backend: "onnxruntime"\nmax_batch_size: 8\n'
            f'input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
            f'output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
            "instance_group [ { count: 1, kind: KIND_CPU } ]\n"
        )
    (repo / "pipeline" / "1").mkdir(parents=True)
    (repo / "pipeline" / "config.pbtxt").write_text(
        f"""name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "first" model_version: -1
     input_map {{ key: "INPUT" value: "INPUT" }} output_map {{ key: "OUTPUT" value: "hidden" }} }},
  {{ model_name: "second" model_version: -1
     input_map {{ key: "INPUT" value: "hidden" }} output_map {{ key: "OUTPUT" value: "OUTPUT" }} }} ] }}
"""
    )
    return repo


def timed(call: Callable[[], Any], seconds: float) -> dict[str, float]:
    """Call ``call`` for ``seconds`` (after a short warm-up): calls/s and p50 µs."""
    for _ in range(20):
        call()
    times: list[float] = []
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        call()
        times.append(time.perf_counter() - now)
    total = sum(times)
    return {"per_s": len(times) / total, "p50_us": statistics.median(times) * 1e6}


def grpc_paths(url: str, x: np.ndarray[Any, Any], seconds: float) -> dict[str, dict[str, float]]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)

    def call(model: str, data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        inp = grpcclient.InferInput("INPUT", list(data.shape), "FP32")
        inp.set_data_from_numpy(data)
        out = client.infer(model, [inp]).as_numpy("OUTPUT")
        assert out is not None
        return out

    expected = call("second", call("first", x))
    np.testing.assert_allclose(call("pipeline", x), expected, rtol=1e-5)
    results = {
        "ensemble": timed(lambda: call("pipeline", x), seconds),
        "sequence": timed(lambda: call("second", call("first", x)), seconds),
        "first": timed(lambda: call("first", x), seconds),
        "second": timed(lambda: call("second", expected), seconds),
    }
    client.close()
    return results


def in_process_paths(repo: Path, x: np.ndarray[Any, Any], seconds: float) -> dict[str, dict[str, float]]:
    import tritonpy

    with tritonpy.Server(model_repository=repo) as server:
        first, second, pipeline = (server.model(n) for n in ("first", "second", "pipeline"))
        hidden = first.predict({"INPUT": x})["OUTPUT"]
        return {
            "ensemble": timed(lambda: pipeline.predict({"INPUT": x}), seconds),
            "sequence": timed(
                lambda: second.predict({"INPUT": first.predict({"INPUT": x})["OUTPUT"]}), seconds
            ),
            "first": timed(lambda: first.predict({"INPUT": x}), seconds),
            "second": timed(lambda: second.predict({"INPUT": hidden}), seconds),
        }


def table(name: str, results: dict[str, dict[str, float]]) -> list[str]:
    parts = results["first"]["p50_us"] + results["second"]["p50_us"]
    rows = []
    for path in ("ensemble", "sequence", "first", "second"):
        r = results[path]
        ratio = f"{r['p50_us'] / parts:.2f}" if path in ("ensemble", "sequence") else ""
        rows.append(f"| {name} | {path} | {r['per_s']:.0f} | {r['p50_us']:.0f} | {ratio} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per path")
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".md")))
    args = parser.parse_args()
    from run import Served

    x = np.random.default_rng(0).standard_normal((1, WIDTH)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        repo = repository(Path(tmp))
        served = Served(repo, log=Path(tmp) / "server.log")
        try:
            grpc = grpc_paths(f"127.0.0.1:{served.grpc}", x, args.seconds)
        finally:
            served.stop()
        local = in_process_paths(repo, x, args.seconds)
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {platform.machine()}, {args.seconds:g} s per path, "
        f"one caller thread, batch 1, two ONNX layers {WIDTH} wide.",
        "",
        "| front end | path | calls/s | p50 µs | p50 ÷ sum of direct p50s |",
        "|---|---|---|---|---|",
        *table("gRPC", grpc),
        *table("in-process", local),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
