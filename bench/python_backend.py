"""Python backend overhead: a model.py served in a stub process vs in-process vs called directly.

    python bench/python_backend.py            # prints a markdown table, writes bench/python_backend.md
    python bench/python_backend.py --write-repo DIR     # only write the model repository
    python bench/python_backend.py --peer HOST:PORT     # also measure a peer serving that repository
    python bench/python_backend.py --cpu-only           # only add_sub's CPU per call, direct vs in_process

Three ways to run the same Triton-style model, in one run:
  direct      — ``TritonPythonModel.execute`` called in this process with pb_utils objects
                (the model's own speed: the limit);
  in_process  — served by tritonpy with ``EXECUTION_MODE: in_process`` (no IPC);
  stub        — served by tritonpy in a stub process (the default): shared memory + a socket.
For a 4-element add/sub and a 4 MiB identity (which crosses through shared memory).
Reported: calls/s and p50 per path, the stub's added p50 over in-process, and ratios;
then ``add_sub``'s CPU time of the calling thread (``time.thread_time``) per call, direct
and in_process ``predict`` in alternating rounds: steadier than calls/s on a shared machine.

Then the same ``add_sub`` over gRPC with perf_analyzer at concurrency 1 and 4:
tritonpy's stub, and with ``--peer`` the same repository served by another
server (e.g. Triton: ``tritonserver --model-repository DIR`` after
``--write-repo DIR``; its gRPC address goes to ``--peer``), as a ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
"""


FORWARD = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="add_sub_inproc",
                inputs=request.inputs(),
                requested_output_names=["OUTPUT0", "OUTPUT1"],
            )
            answer = call.exec()
            responses.append(pb_utils.InferenceResponse(answer.output_tensors(), answer.error()))
        return responses
"""


def _model(repo: Path, name: str, source: str, config: str, in_process: bool) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(source)
    mode = ""
    if in_process:
        mode = 'parameters { key: "EXECUTION_MODE" value: { string_value: "in_process" } }\n'
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{config}{mode}')


def repository(root: Path) -> Path:
    repo = root / "models"
    add_sub = ROOT / "plugins" / "python" / "tests" / "models" / "add_sub"
    add_sub_config = (add_sub / "config.pbtxt").read_text().split("\n", 1)[1]
    add_sub_config = add_sub_config.replace('backend: "python"\n', "")
    identity_config = (
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
    for in_process in (False, True):
        suffix = "_inproc" if in_process else ""
        _model(repo, "add_sub" + suffix, (add_sub / "1" / "model.py").read_text(), add_sub_config, in_process)
        _model(repo, "identity" + suffix, IDENTITY, identity_config, in_process)
    # add_sub_inproc again, behind one BLS call from a stub: what a BLS hop costs.
    _model(repo, "bls_add_sub", FORWARD, add_sub_config, False)
    return repo


def _time(call: Any, seconds: float) -> dict[str, float]:
    for _ in range(20):
        call()
    times = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return {"per_s": len(times) / sum(times), "p50_us": statistics.median(times) * 1e6}


def direct(model_file: Path, inputs: dict[str, np.ndarray], outputs: list[str]) -> Any:
    import json

    import triton_python_backend_utils as pb_utils
    from triton_python_backend_utils._host import ModelHost

    host = ModelHost(model_file)
    config = json.dumps({"output": [{"name": n, "data_type": "TYPE_FP32"} for n in outputs]})
    host.initialize({"model_config": config, "model_instance_name": "direct"})

    def call() -> None:
        request = pb_utils.InferenceRequest(
            model_name="direct", inputs=[pb_utils.Tensor(n, a) for n, a in inputs.items()]
        )
        host.execute([request])

    return call


def cpu_per_call(server: Any, repo: Path, rounds: int, calls: int) -> str:
    """``add_sub``: µs of this thread's CPU per call, direct and in_process ``predict``
    in alternating rounds; medians and bests, and direct ÷ predict of each."""
    inputs = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.arange(4, dtype=np.float32)}
    handle = server.model("add_sub_inproc")
    paths = {
        "direct": direct(repo / "add_sub" / "1" / "model.py", inputs, ["OUTPUT0", "OUTPUT1"]),
        "predict": lambda: handle.predict(inputs),
    }
    spent: dict[str, list[float]] = {name: [] for name in paths}
    for call in paths.values():
        for _ in range(2000):
            call()
    for _ in range(rounds):
        for name, call in paths.items():
            t = time.thread_time()
            for _ in range(calls):
                call()
            spent[name].append((time.thread_time() - t) / calls * 1e6)
    d, p = spent["direct"], spent["predict"]
    dm, pm = statistics.median(d), statistics.median(p)
    return (
        f"CPU per call (`time.thread_time`, {rounds} alternating rounds of {calls} calls): direct "
        f"{dm:.1f} µs (best {min(d):.1f}), in_process `predict` {pm:.1f} µs (best {min(p):.1f}); "
        f"direct ÷ predict {dm / pm:.2f} (medians), {min(d) / min(p):.2f} (bests)."
    )


def served(repo: Path, peer: str | None, peer_name: str, requests: int) -> list[str]:
    """``add_sub`` over gRPC with perf_analyzer: tritonpy's stub, and the peer when given."""
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]
    from get_perf_analyzer import provision
    from run import Served, perf

    pa = provision()
    lines = [
        "",
        "`add_sub` over gRPC, perf_analyzer:",
        "",
        "| server | concurrency | infer/s | p50 µs | p99 µs | tritonpy ÷ peer (infer/s) |",
        "|---|---|---|---|---|---|",
    ]
    server = Served(repo)
    try:
        ours = {c: perf(pa, "add_sub", f"127.0.0.1:{server.grpc}", "grpc", c, requests) for c in (1, 4)}
    finally:
        server.stop()
    theirs = {c: perf(pa, "add_sub", peer, "grpc", c, requests) for c in (1, 4)} if peer else {}

    def line(name: str, c: int, r: dict[str, float], ratio: str = "") -> str:
        return f"| {name} | {c} | {r['throughput']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {ratio} |"

    for c, r in ours.items():
        ratio = f"{r['throughput'] / theirs[c]['throughput']:.2f}" if c in theirs else ""
        lines.append(line("tritonpy (stub)", c, r, ratio))
    lines += [line(peer_name, c, r) for c, r in theirs.items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "python_backend.md"))
    parser.add_argument("--write-repo", metavar="DIR", help="write the model repository to DIR and stop")
    parser.add_argument("--peer", metavar="HOST:PORT", help="gRPC address of a peer serving --write-repo")
    parser.add_argument("--peer-name", default="peer", help="what the peer is, for the table")
    parser.add_argument("--requests", type=int, default=2000, help="requests per perf_analyzer window")
    parser.add_argument("--cpu-only", action="store_true", help="only add_sub's CPU per call; writes nothing")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds of the CPU per call")
    parser.add_argument("--calls", type=int, default=20000, help="calls per round of the CPU per call")
    args = parser.parse_args()
    if args.write_repo:
        print(repository(Path(args.write_repo)))
        return
    import tritonpy

    if args.cpu_only:
        tmp = Path(tempfile.mkdtemp())
        try:
            repo = repository(tmp)
            only = {"model_control_mode": "explicit", "load_model": ["add_sub_inproc"]}
            with tritonpy.Server(model_repository=repo, **only) as server:
                print(cpu_per_call(server, repo, args.rounds, args.calls))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return

    cases = {
        "add_sub": (
            {"INPUT0": np.ones(4, np.float32), "INPUT1": np.arange(4, dtype=np.float32)},
            ["OUTPUT0", "OUTPUT1"],
        ),
        "identity": ({"X": np.ones(1 << 20, np.float32)}, ["Y"]),
    }
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')}, {args.seconds:g} s per path, one caller thread.",
        "",
        "| model | path | calls/s | p50 µs | ÷ direct | stub − in-process p50 |",
        "|---|---|---|---|---|---|",
    ]
    tmp = Path(tempfile.mkdtemp())
    try:
        repo = repository(tmp)
        with tritonpy.Server(model_repository=repo) as server:
            for name, (inputs, outputs) in cases.items():
                results = {
                    "direct": _time(direct(repo / name / "1" / "model.py", inputs, outputs), args.seconds)
                }
                for path, model in (("in_process", name + "_inproc"), ("stub", name)):
                    handle = server.model(model)
                    results[path] = _time(lambda h=handle, x=inputs: h.predict(x), args.seconds)
                added = results["stub"]["p50_us"] - results["in_process"]["p50_us"]
                for path, r in results.items():
                    ratio = r["per_s"] / results["direct"]["per_s"]
                    extra = f"{added:.0f} µs" if path == "stub" else ""
                    row = (
                        f"| {name} | {path} | {r['per_s']:.0f} | {r['p50_us']:.0f} | {ratio:.2f} | {extra} |"
                    )
                    lines.append(row)
            lines += ["", cpu_per_call(server, repo, args.rounds, args.calls)]
            forward, inputs = server.model("bls_add_sub"), cases["add_sub"][0]
            bls = _time(lambda: forward.predict(inputs), args.seconds)
            lines += [
                "",
                f"A stub model that forwards to `add_sub_inproc` through one BLS call: p50 "
                f"{bls['p50_us']:.0f} µs, {bls['per_s']:.0f} calls/s.",
            ]
        lines += served(repo, args.peer, args.peer_name, args.requests)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
