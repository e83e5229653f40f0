"""The core process's CPU per inference on the ``--frontend-workers`` path, in one process.

    .venv/bin/python bench/core_path.py                  # 1 and 8 in flight, 5 rounds of 4000
    .venv/bin/python bench/core_path.py --profile 8      # cProfile of one round at 8 in flight

Drives the core side of ``--frontend-workers N`` without sockets to a worker or
any HTTP/gRPC: the Python ``add_sub`` model (plugins/python/tests/models/add_sub)
in stub mode, served by ``tritonpy.Server`` on a uvloop loop (set as the
server's ``event_loop``, as ``tritonpy serve`` does, so the stub's answers are
read on it), and the real ``WorkerPool._frames`` → ``_infer`` →
``wire.decode_request`` → ``Server.start_infer`` → the stub → ``_one`` →
``wire.encode_answer`` → ``_deliver`` → ``Link.send``. The link's transport is a
stand-in whose ``writelines`` takes the answer frame and queues the next request frame
(``loop.call_soon``, as a link read would deliver it), so a fixed number of
requests is in flight. Request frames are encoded before timing (the worker's
work). Measured: ``resource.getrusage(RUSAGE_SELF)`` user + system of this
process per request (the stub is another process: not counted), after a
warm-up round; reported as best and median of the rounds. Nothing is asserted
but one answer's values. Results and how to read them: bench/core_path.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


# ``--socket``: the worker's end of a real link, in a process of its own. On ``go`` (a
# frame of kind 0xFF: requests in flight, requests in all) it encodes the requests, then
# keeps that many in flight: each frame of answers read sends as many new requests.
REPLAY = r"""
import asyncio, socket, struct, sys
import numpy as np
import uvloop
from tritonpy.ipc.link import Link
from tritonpy.workers import wire
from tritonpy_sdk import DataType, InferenceRequest, RequestedOutput, Tensor

async def main():
    link = None
    queued = []
    checked = [False]

    def make(rid):
        request = InferenceRequest(
            "add_sub", -1,
            {"INPUT0": Tensor("INPUT0", np.arange(4, dtype=np.float32), DataType.FP32),
             "INPUT1": Tensor("INPUT1", np.ones(4, dtype=np.float32), DataType.FP32)},
            [RequestedOutput("OUTPUT0"), RequestedOutput("OUTPUT1")],
        )
        return wire.encode_request(link, rid, wire.SINGLE, "decoupled", request)

    def send(k):
        for _ in range(min(k, len(queued))):
            link.send(*queued.pop())

    def on_frames(frames):
        answers = 0
        for frame in frames:
            if frame[0] == 0xFF:
                inflight, n = struct.unpack_from("=II", frame, 1)
                queued[:] = [make(rid) for rid in range(n, 0, -1)]
                checked[0] = False
                send(inflight)
            elif frame[0] == wire.ANSWER:
                answers += 1
                if not checked[0]:  # the round's first answer: the model's values
                    checked[0] = True
                    _, _, what, response = wire.decode_answer(link, None, frame)
                    if what != wire.RESPONSE or response.error is not None or not np.array_equal(
                        response.outputs["OUTPUT0"].data, np.arange(4) + 1
                    ):
                        print("wrong answer:", response, file=sys.stderr)
                        sys.exit(3)
        if answers:
            send(answers)

    done = asyncio.get_running_loop().create_future()
    link = await Link.open(
        socket.socket(fileno=int(sys.argv[1])), on_frames, lambda exc: done.done() or done.set_result(None)
    )
    await done

uvloop.run(main())
"""


def _cpu() -> tuple[float, float, int]:
    """This process's CPU seconds so far: (user + system, system, voluntary context switches)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_stime, r.ru_nvcsw


class _WorkerEnd:
    """The transport under the core's link to the worker: takes each answer frame
    (the link's header, then the frame) and hands it to ``on_answer``."""

    def __init__(self) -> None:
        self.on_answer: Any = None

    def writelines(self, parts: Any) -> None:
        self.on_answer(parts)


async def run(args: argparse.Namespace) -> None:
    import tritonpy

    loop = asyncio.get_running_loop()
    tmp = Path(tempfile.mkdtemp(prefix="core-path-"))
    try:
        repo = tmp / "models"
        shutil.copytree(ROOT / "plugins" / "python" / "tests" / "models" / "add_sub", repo / "add_sub")
        if args.instances > 1:
            config = repo / "add_sub" / "config.pbtxt"
            text = config.read_text().replace(
                "{ kind: KIND_CPU }", f"{{ kind: KIND_CPU count: {args.instances} }}"
            )
            config.write_text(text)
        server = tritonpy.Server(model_repository=str(repo))
        server.event_loop = loop
        await loop.run_in_executor(None, server.start)
        if args.pin:
            _pin_tree()
        try:
            await _measure(args, loop, server)
        finally:
            await loop.run_in_executor(None, server.stop)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _measure(args: argparse.Namespace, loop: asyncio.AbstractEventLoop, server: Any) -> None:
    from tritonpy.ipc.link import Link
    from tritonpy.workers import pool as pool_mod
    from tritonpy.workers import wire
    from tritonpy_sdk import DataType, InferenceRequest, RequestedOutput, Tensor

    pool = object.__new__(pool_mod.WorkerPool)
    pool._server = server
    pool._loop = loop
    if args.socket:
        await _measure_socket(args, loop, pool, Link, pool_mod, wire)
        return
    end = _WorkerEnd()
    link = Link(lambda frames: None, None, None)  # type: ignore[arg-type]  # no arena: small tensors only
    link.transport = end  # type: ignore[assignment]
    worker = pool_mod._Worker(0, None, loop.create_future())  # type: ignore[arg-type]
    worker.link = link
    worker.release = wire.Releaser(link, loop)

    def frame(rid: int) -> bytes:
        request = InferenceRequest(
            "add_sub",
            -1,
            {
                "INPUT0": Tensor("INPUT0", np.arange(4, dtype=np.float32), DataType.FP32),
                "INPUT1": Tensor("INPUT1", np.ones(4, dtype=np.float32), DataType.FP32),
            },
            [RequestedOutput("OUTPUT0"), RequestedOutput("OUTPUT1")],
        )
        kind, body = wire.encode_request(link, rid, wire.SINGLE, "decoupled", request)  # type: ignore[arg-type]
        return kind + body

    # check one answer end to end
    first = frame(1)
    got: list[Any] = []
    done = loop.create_future()

    def check(parts: Any) -> None:
        got.append(parts)
        done.set_result(None)

    end.on_answer = check
    pool._frames(worker, [first])
    await done
    rid, flags, what, response = wire.decode_answer(link, worker.release, b"".join(got[0][1:]))  # type: ignore[arg-type]
    assert what == wire.RESPONSE and response.error is None, response
    np.testing.assert_array_equal(response.outputs["OUTPUT0"].data, np.arange(4) + 1)
    np.testing.assert_array_equal(response.outputs["OUTPUT1"].data, np.arange(4) - 1)

    def one_round(inflight: int, profile: bool) -> Any:
        """Start ``inflight`` requests; each answer sends the next until all are answered."""
        n = args.requests
        frames = iter([frame(i) for i in range(n)])
        finished = loop.create_future()
        answered = 0

        def on_answer(parts: Any) -> None:
            nonlocal answered
            answered += 1
            f = next(frames, None)
            if f is not None:
                loop.call_soon(pool._frames, worker, [f])
            elif answered == n:
                finished.set_result(None)

        async def timed() -> tuple[float, float]:
            end.on_answer = on_answer
            gc.collect()
            profiler = None
            if profile:
                import cProfile

                profiler = cProfile.Profile(time.process_time)
                profiler.enable()
            t0, s0 = _cpu(), _children_ticks()
            for _ in range(inflight):
                pool._frames(worker, [next(frames)])
            await finished
            t1, s1 = _cpu(), _children_ticks()
            stub_us.setdefault(inflight, []).append((s1 - s0) / _TICKS / n * 1e6)
            if profiler is not None:
                import pstats

                profiler.disable()
                stats = pstats.Stats(profiler).sort_stats(args.sort)
                stats.print_stats(args.top)
                if args.callers:
                    stats.print_callers(args.callers)
            return (t1[0] - t0[0]) / n * 1e6, (t1[1] - t0[1]) / n * 1e6, (t1[2] - t0[2]) / n

        return timed()

    results: dict[int, list[tuple[float, float, float]]] = {}
    stub_us: dict[int, list[float]] = {}
    for inflight in args.inflight:
        results[inflight] = []
        for rnd in range(args.rounds + 1):  # round 0 warms up
            us = await one_round(inflight, args.profile == inflight and rnd == args.rounds)
            if rnd:
                results[inflight].append(us)
    _report(args, results, stub_us)


async def _measure_socket(
    args: argparse.Namespace,
    loop: asyncio.AbstractEventLoop,
    pool: Any,
    link_cls: Any,
    pool_mod: Any,
    wire: Any,
) -> None:
    """The core's side as served: a real link (socket reads and writes, arenas) to a
    process that replays requests (``REPLAY``), its CPU not counted."""
    import socket
    import struct
    import subprocess

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = subprocess.Popen([sys.executable, "-c", REPLAY, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    worker = pool_mod._Worker(0, child, loop.create_future())
    link = await link_cls.open(mine, lambda frames: pool._frames(worker, frames))
    worker.link = link
    worker.release = wire.Releaser(link, loop)
    if args.pin:
        _pin(child.pid, set(sorted(os.sched_getaffinity(0))[1:]) or os.sched_getaffinity(0))
    state: dict[str, Any] = {"left": 0, "finished": None}
    deliver = pool._deliver

    def counted(w: Any, rid: int, flags: int, frame: Any) -> None:
        deliver(w, rid, flags, frame)
        state["left"] -= 1
        if state["left"] == 0:
            state["finished"].set_result(None)

    pool._deliver = counted
    results: dict[int, list[tuple[float, float, float]]] = {}
    stub_us: dict[int, list[float]] = {}
    try:
        for inflight in args.inflight:
            results[inflight] = []
            for rnd in range(args.rounds + 1):  # round 0 warms up
                n = args.requests
                state["left"], state["finished"] = n, loop.create_future()
                gc.collect()
                profiler = None
                if args.profile == inflight and rnd == args.rounds:
                    import cProfile

                    profiler = cProfile.Profile(time.process_time)
                    profiler.enable()
                t0, s0 = _cpu(), _children_ticks(exclude=child.pid)
                link.send(b"\xff" + struct.pack("=II", inflight, n))
                await asyncio.wait_for(state["finished"], 120)
                t1, s1 = _cpu(), _children_ticks(exclude=child.pid)
                if profiler is not None:
                    import pstats

                    profiler.disable()
                    pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
                if rnd:
                    results[inflight].append(
                        ((t1[0] - t0[0]) / n * 1e6, (t1[1] - t0[1]) / n * 1e6, (t1[2] - t0[2]) / n)
                    )
                    stub_us.setdefault(inflight, []).append((s1 - s0) / _TICKS / n * 1e6)
    finally:
        failed = child.poll()  # it exits only when an answer was wrong
        link.close()
        child.kill()
        child.wait()
    if failed is not None:
        raise SystemExit(f"the replaying process failed ({failed})")
    _report(args, results, stub_us, warmed=True)


def _report(
    args: argparse.Namespace,
    results: dict[int, list[tuple[float, float, float]]],
    stub_us: dict[int, list[float]],
    warmed: bool = False,
) -> None:
    print(f"core CPU µs per request (getrusage self), {args.rounds} rounds of {args.requests}:")
    for inflight, rounds in results.items():
        us = [total for total, _, _ in rounds]
        best = min(rounds)
        median = sorted(us)[len(us) // 2]
        every = " ".join(f"{u:.1f}" for u in us)
        head = f"  in flight {inflight}: best {best[0]:.1f} (system {best[1]:.1f}, sleeps {best[2]:.2f})"
        print(f"{head}  median {median:.1f}  all {every}")
    print("stub CPU µs per request (/proc, user + system, 10 ms ticks), the same rounds:")
    for inflight, values in stub_us.items():
        kept = sorted(values if warmed else values[1:])  # round 0 warmed up
        print(f"  in flight {inflight}: best {kept[0]:.1f}  median {kept[len(kept) // 2]:.1f}")


_TICKS = os.sysconf("SC_CLK_TCK")


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` onto ``cpus`` (``taskset -a``)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except OSError:
            pass  # a thread that ended meanwhile


def _pin_tree() -> None:
    """This process alone on the first CPU it may use; its children (the stubs) on the others."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs two CPUs")
    _pin(os.getpid(), {cpus[0]})
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            _pin(int(pid), set(cpus[1:]))


def _children_ticks(exclude: int = 0) -> int:
    """User + system clock ticks of this process's children now (the model's stubs)."""
    total = 0
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            if int(pid) == exclude:
                continue
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inflight", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--instances",
        type=int,
        default=1,
        help="stub instances of add_sub: with more than one (and more in flight) the core seldom waits",
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="cProfile (CPU time) the last round at this many in flight"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="this process alone on one CPU, the stub on the others (the core with a core of its own)",
    )
    parser.add_argument(
        "--socket",
        action="store_true",
        help="a real link to a process that replays the requests (socket I/O and arenas counted)",
    )
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--callers", default="", help="with --profile: who calls the functions matching this")
    args = parser.parse_args()
    import uvloop

    uvloop.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
