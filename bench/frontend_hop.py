"""The worker↔core hop of ``--frontend-workers``: what carrying one request across costs.

A *worker* process (a protocol front end: it has decoded a request and will
encode the answer) sends an inference request to a *core* process (which would
schedule and execute it); the core decodes it, "executes" it as an identity
model (its outputs are its inputs: no model cost at all, only the hop) and
sends the response back. Both sides run on uvloop event loops, as the server
does. Over a fixed number of requests each process reads its own CPU time
(``getrusage``: user + system, every thread) and the worker times each round
trip, at 1 request in flight and at 8 (eight concurrent callers).

Requests are ``add_sub``'s (model name, version, id, one parameter, two INT32
[16] inputs, two requested outputs; the answer two INT32 [16] outputs), or
one 1 MiB INT32 tensor each way (``1mb``).

Options (the transport and the message encoding):

- ``pickle``: each message a dict with numpy arrays, ``pickle``d (protocol 5),
  one frame each on a Unix stream socket read by an asyncio protocol
  (``tritonpy.ipc.link``: a 4-byte length, as ``multiprocessing.Connection``
  frames; a blocking ``Connection`` cannot sit on an event loop, and two
  1 MiB sends at once deadlock it).
- ``socket``: the same link, messages in a compact ``struct`` encoding, tensor
  bytes inline.
- ``socket+shm``: as ``socket``, but tensors of 4 KiB and more go into the
  sender's shared-memory arena (the link's ``memfd``) and only their offsets
  travel; the reader's release of a block rides on its next message.
- ``ring+shm``: a shared-memory ring per direction with an eventfd wake only
  when the reader sleeps (``bench/hop_ring.py``), the compact encoding, an
  arena for large tensors.
- ``ring``: the ring with every tensor inline (1 MiB frames travel in pieces).
- ``socket/grpc``: the worker forwards the gRPC ``ModelInferRequest`` bytes as
  its client sent them (behind an 8-byte id of its own); the core parses them
  into numpy views, builds and serializes the ``ModelInferResponse``, and the
  worker has nothing left to encode: option (e) of the issue, protocol bytes
  parsed in the core.
- ``socket/echo``, ``ring/echo``: the transports' floor. The core answers
  every request with a canned response (the request's id patched in) without
  decoding or encoding anything; small messages only.

With ``--parse`` it also times, in one process, what decoding and encoding the
protocols' own messages would cost the core (a gRPC ``ModelInferRequest``
parsed and its response built and serialized; an HTTP JSON body) next to the
compact encoding's decode and encode: the price of sending raw protocol bytes
to the core instead. With ``--write`` the tables replace those between the
markers of ``bench/frontend_hop.md``.

    .venv/bin/python bench/frontend_hop.py [--requests 3000] [--repeat 5] [--parse] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import pickle
import platform
import resource
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = ("pickle", "socket", "socket+shm", "ring+shm", "ring", "socket/grpc", "socket/echo", "ring/echo")
SIZES = ("small", "1mb")
#: Tensors this large or larger go into the shared-memory arena (as in the Python backend's link).
SHM_THRESHOLD = 4096
ARENA_BYTES = 64 << 20
RING_BYTES = 4 << 20
MARK = "__mark__"
MARK_BYTES = MARK.encode()
BEGIN, END = "<!-- results: written by bench/frontend_hop.py --write -->", "<!-- end of results -->"

# -- the compact encoding ----------------------------------------------------------------------

DTYPES: tuple[str, ...] = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32")
DTYPES += ("INT64", "FP16", "FP32", "FP64")
NUMPY = {name: np.dtype(name.lower().replace("fp", "float")) for name in DTYPES}
CODE = {name: i for i, name in enumerate(DTYPES)}
REQ = struct.Struct("=QhBBBH")  # id, version, params, inputs, outputs, releases
RESP = struct.Struct("=QBHH")  # id, outputs, releases, error length
TENSOR = struct.Struct("=BBBQQ")  # datatype, rank, where (0 inline, 1 arena), bytes, offset
U8 = struct.Struct("=B")
U16 = struct.Struct("=H")
MODEL_AT = REQ.size + 1  # where a request's model name starts
ID = struct.Struct("=Q")

Tensor = tuple[str, str, np.ndarray[Any, Any]]


@dataclass
class Request:
    id: int
    model: str
    version: int
    params: dict[str, Any]
    inputs: list[Tensor]
    outputs: list[str]
    releases: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)  # the arena blocks its inputs are in


@dataclass
class Response:
    id: int
    outputs: list[Tensor]
    error: str = ""
    releases: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)


def _name(parts: list[Any], name: str) -> None:
    raw = name.encode()
    parts.append(U8.pack(len(raw)))
    parts.append(raw)


def _tensors(parts: list[Any], tensors: list[Tensor], arena: Any) -> None:
    for name, datatype, array in tensors:
        _name(parts, name)
        nbytes = array.nbytes
        offset = arena.alloc(nbytes) if arena is not None and nbytes >= SHM_THRESHOLD else None
        shape = array.shape
        if offset is None:
            parts.append(TENSOR.pack(CODE[datatype], len(shape), 0, nbytes, 0))
            parts.append(struct.pack(f"={len(shape)}q", *shape))
            parts.append(np.ascontiguousarray(array).data.cast("B"))
        else:
            target = np.frombuffer(arena.map, dtype=array.dtype, count=array.size, offset=offset)
            np.copyto(target, array.reshape(-1))
            parts.append(TENSOR.pack(CODE[datatype], len(shape), 1, nbytes, offset))
            parts.append(struct.pack(f"={len(shape)}q", *shape))


def _read_tensors(
    view: memoryview, pos: int, count: int, theirs: Any, blocks: list[int]
) -> tuple[list[Tensor], int]:
    out: list[Tensor] = []
    for _ in range(count):
        n = view[pos]
        name = bytes(view[pos + 1 : pos + 1 + n]).decode()
        pos += 1 + n
        code, rank, where, nbytes, offset = TENSOR.unpack_from(view, pos)
        pos += TENSOR.size
        shape = struct.unpack_from(f"={rank}q", view, pos)
        pos += 8 * rank
        datatype = DTYPES[code]
        dtype = NUMPY[datatype]
        if where:
            array = np.frombuffer(theirs.map, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset)
            blocks.append(offset)
        else:
            array = np.frombuffer(view, dtype=dtype, count=nbytes // dtype.itemsize, offset=pos)
            pos += nbytes
        out.append((name, datatype, array.reshape(shape)))
    return out, pos


def encode_request(req: Request, arena: Any) -> list[Any]:
    parts: list[Any] = [
        REQ.pack(req.id, req.version, len(req.params), len(req.inputs), len(req.outputs), len(req.releases))
    ]
    _name(parts, req.model)
    for key, value in req.params.items():
        _name(parts, key)
        if isinstance(value, bool):
            parts.append(b"b" + U8.pack(value))
        elif isinstance(value, int):
            parts.append(b"i" + struct.pack("=q", value))
        elif isinstance(value, float):
            parts.append(b"f" + struct.pack("=d", value))
        else:
            raw = str(value).encode()
            parts.append(b"s" + U16.pack(len(raw)))
            parts.append(raw)
    for name in req.outputs:
        _name(parts, name)
    if req.releases:
        parts.append(struct.pack(f"={len(req.releases)}Q", *req.releases))
    _tensors(parts, req.inputs, arena)
    return parts


def decode_request(data: bytes, theirs: Any) -> Request:
    view = memoryview(data)
    rid, version, nparams, ninputs, noutputs, nrel = REQ.unpack_from(view, 0)
    pos = REQ.size
    n = view[pos]
    model = bytes(view[pos + 1 : pos + 1 + n]).decode()
    pos += 1 + n
    params: dict[str, Any] = {}
    for _ in range(nparams):
        n = view[pos]
        key = bytes(view[pos + 1 : pos + 1 + n]).decode()
        pos += 1 + n
        kind = view[pos]
        pos += 1
        if kind == 105:  # i
            params[key] = struct.unpack_from("=q", view, pos)[0]
            pos += 8
        elif kind == 98:  # b
            params[key] = bool(view[pos])
            pos += 1
        elif kind == 102:  # f
            params[key] = struct.unpack_from("=d", view, pos)[0]
            pos += 8
        else:
            (n,) = U16.unpack_from(view, pos)
            params[key] = bytes(view[pos + 2 : pos + 2 + n]).decode()
            pos += 2 + n
    outputs = []
    for _ in range(noutputs):
        n = view[pos]
        outputs.append(bytes(view[pos + 1 : pos + 1 + n]).decode())
        pos += 1 + n
    releases = list(struct.unpack_from(f"={nrel}Q", view, pos)) if nrel else []
    pos += 8 * nrel
    blocks: list[int] = []
    inputs, pos = _read_tensors(view, pos, ninputs, theirs, blocks)
    return Request(rid, model, version, params, inputs, outputs, releases, blocks)


def encode_response(resp: Response, arena: Any) -> list[Any]:
    error = resp.error.encode()
    parts: list[Any] = [RESP.pack(resp.id, len(resp.outputs), len(resp.releases), len(error)), error]
    if resp.releases:
        parts.append(struct.pack(f"={len(resp.releases)}Q", *resp.releases))
    _tensors(parts, resp.outputs, arena)
    return parts


def decode_response(data: bytes, theirs: Any) -> Response:
    view = memoryview(data)
    rid, noutputs, nrel, nerr = RESP.unpack_from(view, 0)
    pos = RESP.size
    error = bytes(view[pos : pos + nerr]).decode() if nerr else ""
    pos += nerr
    releases = list(struct.unpack_from(f"={nrel}Q", view, pos)) if nrel else []
    pos += 8 * nrel
    blocks: list[int] = []
    outputs, pos = _read_tensors(view, pos, noutputs, theirs, blocks)
    return Response(rid, outputs, error, releases, blocks)


# -- the model: identity -----------------------------------------------------------------------


def execute(req: Request) -> Response:
    if req.model == MARK:
        return Response(req.id, [], error=repr(_cpu()))
    wanted = req.outputs
    outputs = [
        (wanted[i] if i < len(wanted) else f"OUTPUT{i}", dt, array)
        for i, (_, dt, array) in enumerate(req.inputs)
    ]
    return Response(req.id, outputs)


def grpc_request_bytes(req: Request) -> bytes:
    """``req`` as a gRPC client would send it: a serialized ``ModelInferRequest``."""
    from tritonpy.grpc import grpc_service_pb2 as pb

    msg = pb.ModelInferRequest(model_name=req.model, model_version=str(req.version), id=str(req.id))
    for key, value in req.params.items():
        msg.parameters[key].int64_param = value
    for name, dt, array in req.inputs:
        msg.inputs.add(name=name, datatype=dt, shape=list(array.shape))
        msg.raw_input_contents.append(array.tobytes())
    for name in req.outputs:
        msg.outputs.add(name=name)
    data: bytes = msg.SerializeToString()
    return data


def grpc_answer(data: bytes) -> bytes:
    """The core's side of ``socket/grpc``: parse the client's message, run, encode the answer."""
    from tritonpy.grpc import grpc_service_pb2 as pb

    msg = pb.ModelInferRequest.FromString(data)
    inputs: list[Tensor] = [
        (t.name, t.datatype, np.frombuffer(raw, dtype=NUMPY[t.datatype]).reshape(tuple(t.shape)))
        for t, raw in zip(msg.inputs, msg.raw_input_contents)
    ]
    params = {
        key: getattr(value, value.WhichOneof("parameter_choice")) for key, value in msg.parameters.items()
    }
    req = Request(
        0, msg.model_name, int(msg.model_version or 0), params, inputs, [o.name for o in msg.outputs]
    )
    resp = execute(req)
    out = pb.ModelInferResponse(model_name=msg.model_name, model_version=msg.model_version, id=msg.id)
    for name, dt, array in resp.outputs:
        out.outputs.add(name=name, datatype=dt, shape=list(array.shape))
        out.raw_output_contents.append(array.tobytes())
    answer: bytes = out.SerializeToString()
    return answer


def make_request(size: str) -> Request:
    params: dict[str, Any] = {"timeout": 0}
    if size == "small":
        inputs: list[Tensor] = [
            ("INPUT0", "INT32", np.arange(16, dtype=np.int32)),
            ("INPUT1", "INT32", np.ones(16, dtype=np.int32)),
        ]
        outputs = ["OUTPUT0", "OUTPUT1"]
    else:
        inputs = [("INPUT0", "INT32", np.arange(1 << 18, dtype=np.int32))]
        outputs = ["OUTPUT0"]
    return Request(0, "add_sub", 1, params, inputs, outputs)


def _cpu() -> tuple[float, float, int, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime, r.ru_stime, r.ru_nvcsw, r.ru_nivcsw)


# -- transports ------------------------------------------------------------------------------
# Each option gives each side a ``send(message parts)`` and calls ``on_message(bytes)`` for
# each message received. The sides differ only in which codec and arena they use.


@dataclass
class Setup:
    option: str
    sockets: tuple[socket.socket, socket.socket] | None = None
    arenas: tuple[Any, Any] | None = None  # (the worker's, the core's)
    ring_sock: tuple[socket.socket, socket.socket] | None = None


def prepare(option: str, tmp: str) -> Setup:
    setup = Setup(option)
    if option.startswith("ring"):
        setup.ring_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        setup.sockets = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if option == "ring+shm":
        # The socket options' links make their own arenas; the ring's are made here, before the fork.
        from tritonpy.ipc.link import Arena

        setup.arenas = (Arena.create(ARENA_BYTES), Arena.create(ARENA_BYTES))
    return setup


class Side:
    """One end of the hop: sending encoded messages, receiving decoded ones."""

    def __init__(self, setup: Setup, core: bool, on_message: Callable[[Any], None]) -> None:
        self.option = setup.option
        self.pickled = setup.option == "pickle"
        self.mine = self.theirs = None
        if setup.arenas is not None:
            self.mine, self.theirs = setup.arenas[1], setup.arenas[0]
            if not core:
                self.mine, self.theirs = self.theirs, self.mine
        self.core = core
        self.on_message = on_message
        self.setup = setup
        self.endpoint: Any = None
        self.link: Any = None
        self.echo: bytes | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        if self.setup.ring_sock is not None:
            from hop_ring import Endpoint

            a, b = self.setup.ring_sock
            if self.core:
                b.close()
                self.endpoint = Endpoint.create(a, RING_BYTES)
            else:
                a.close()
                self.endpoint = Endpoint.accept(b)
            self.endpoint.start(loop, self._frames)
        else:
            from tritonpy.ipc.link import Link

            assert self.setup.sockets is not None
            mine, other = self.setup.sockets if self.core else self.setup.sockets[::-1]
            other.close()
            self.link = await Link.open(mine, self._frames, arena_bytes=ARENA_BYTES)
            if self.option.endswith("+shm"):
                self.mine, self.theirs = self.link.mine, self.link.peer

    def _frames(self, frames: list[bytes]) -> None:
        for frame in frames:
            self._message(frame)

    def _message(self, data: bytes) -> None:
        if self.option == "socket/grpc":
            kind, data = data[:1], data[1:]
            if kind == b"g" and self.core:
                self.send_raw(b"g" + data[:8] + grpc_answer(data[8:]))
                return
            if kind == b"g":
                # The answer is the gRPC message itself: nothing to decode or encode here.
                self.on_message(Response(ID.unpack_from(data)[0], []))
                return
        if self.echo is not None and data[MODEL_AT : MODEL_AT + len(MARK)] != MARK_BYTES:
            # The transport's floor: a canned answer (the request's id patched in), nothing decoded.
            self.send_raw(data[:8] + self.echo)
            return
        if self.core and self.option.endswith("/echo") and self.echo is None and not self.pickled:
            req = decode_request(data, self.theirs)
            if req.model != MARK:
                self.echo = b"".join(bytes(p) for p in encode_response(execute(req), None))[8:]
            self.on_message(req)
            return
        if self.pickled:
            self.on_message(pickle.loads(data))
        elif self.core:
            self.on_message(decode_request(data, self.theirs))
        else:
            self.on_message(decode_response(data, self.theirs))

    def send(self, message: Any) -> None:
        if self.pickled:
            parts: list[Any] = [pickle.dumps(message, protocol=5)]
        elif self.core:
            parts = encode_response(message, self.mine)
        else:
            parts = encode_request(message, self.mine)
        if self.option == "socket/grpc":
            parts.insert(0, b"c")  # the compact encoding, for the benchmark's marks
        if self.endpoint is not None:
            self.endpoint.write(parts[0] if len(parts) == 1 else b"".join(parts))
        else:
            self.link.send(*parts)

    def send_raw(self, data: bytes) -> None:
        if self.endpoint is not None:
            self.endpoint.write(data)
        else:
            self.link.send(data)

    def free(self, blocks: list[int]) -> None:
        """The peer is done with these blocks of my arena."""
        if self.mine is not None:
            for offset in blocks:
                self.mine.free(offset)


# -- the two processes -------------------------------------------------------------------------


def run_core(setup: Setup) -> None:
    import uvloop

    async def main() -> None:
        stop = asyncio.get_running_loop().create_future()
        side: Side

        def on_request(req: Any) -> None:
            if side.pickled:
                if req["model"] == MARK:
                    side.send({"id": req["id"], "outputs": [], "error": repr(_cpu())})
                    if req["params"].get("stop"):
                        stop.set_result(None)
                    return
                outs = [(req["outputs"][i], dt, a) for i, (_, dt, a) in enumerate(req["inputs"])]
                side.send({"id": req["id"], "outputs": outs, "error": ""})
                return
            side.free(req.releases)
            resp = execute(req)
            # Its inputs' blocks are free once the answer is encoded (the outputs, views of
            # the inputs, are copied then); the worker acts on this only after that.
            resp.releases = req.blocks
            side.send(resp)
            if req.model == MARK and req.params.get("stop"):
                stop.set_result(None)

        side = Side(setup, True, on_request)
        await side.open()
        await stop
        await asyncio.sleep(0.05)

    uvloop.run(main())


def run_worker(setup: Setup, size: str, requests: int, inflight: int, results: Any) -> None:
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiting: dict[int, asyncio.Future[Any]] = {}
        template = make_request(size)
        release_next: list[int] = []
        side: Side

        def on_response(resp: Any) -> None:
            if side.pickled:
                waiting.pop(resp["id"]).set_result(resp)
                return
            side.free(resp.releases)
            waiting.pop(resp.id).set_result(resp)

        side = Side(setup, False, on_response)
        await side.open()
        next_id = 0
        grpc_bytes = grpc_request_bytes(template) if setup.option == "socket/grpc" else b""

        async def call(model: str = "add_sub", params: dict[str, Any] | None = None) -> Any:
            nonlocal next_id
            next_id += 1
            rid = next_id
            fut = loop.create_future()
            waiting[rid] = fut
            if side.pickled:
                side.send(
                    {
                        "id": rid,
                        "model": model,
                        "version": 1,
                        "params": params or template.params,
                        "inputs": template.inputs,
                        "outputs": template.outputs,
                    }
                )
                resp = await fut
                for _, _, array in resp["outputs"]:
                    bytes(array.data)  # what the front end encodes into its answer
                return resp
            if grpc_bytes and model != MARK:
                side.send_raw(b"g" + ID.pack(rid) + grpc_bytes)
                return await fut
            req = Request(rid, model, 1, params or template.params, template.inputs, template.outputs)
            if release_next:
                req.releases = release_next[:]
                release_next.clear()
            side.send(req)
            resp = await fut
            for _, _, array in resp.outputs:
                bytes(array.data)  # what the front end encodes into its answer
            release_next.extend(resp.blocks)
            return resp

        def core_cpu(resp: Any) -> tuple[float, float, int, int]:
            error = resp["error"] if side.pickled else resp.error
            value: tuple[float, float, int, int] = eval(error)  # our own repr of a tuple
            return value

        latencies: list[float] = []

        async def caller(count: int, record: bool) -> None:
            for _ in range(count):
                start = time.perf_counter()
                await call()
                if record:
                    latencies.append(time.perf_counter() - start)

        warm = max(requests // 10, 50)
        await asyncio.gather(*(caller(warm // inflight, False) for _ in range(inflight)))
        core0 = core_cpu(await call(MARK))
        mine0 = _cpu()
        await asyncio.gather(*(caller(requests // inflight, True) for _ in range(inflight)))
        mine1 = _cpu()
        core1 = core_cpu(await call(MARK, {"stop": True}))
        n = len(latencies)
        results.send(
            {
                "n": n,
                "core_user": (core1[0] - core0[0]) / n,
                "core_sys": (core1[1] - core0[1]) / n,
                "core_vcsw": (core1[2] - core0[2]) / n,
                "worker_user": (mine1[0] - mine0[0]) / n,
                "worker_sys": (mine1[1] - mine0[1]) / n,
                "worker_vcsw": (mine1[2] - mine0[2]) / n,
                "p50": statistics.median(latencies),
                "mean": statistics.fmean(latencies),
                "p99": sorted(latencies)[int(0.99 * (n - 1))],
            }
        )
        await asyncio.sleep(0.05)

    uvloop.run(main())


def run_cell(option: str, size: str, requests: int, inflight: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        setup = prepare(option, tmp)
        receive, send = ctx.Pipe(duplex=False)
        core = ctx.Process(target=run_core, args=(setup,), daemon=True)
        worker = ctx.Process(target=run_worker, args=(setup, size, requests, inflight, send), daemon=True)
        core.start()
        worker.start()
        for pair in (setup.sockets, setup.ring_sock):
            if pair is not None:
                for s in pair:
                    s.close()
        if not receive.poll(120):
            core.kill()
            worker.kill()
            raise RuntimeError(f"{option} {size} x{inflight}: no result in 120 s")
        result: dict[str, float] = receive.recv()
        worker.join(10)
        core.join(10)
        for arena in setup.arenas or ():
            arena.close()
        return result


# -- the cost of parsing protocol messages in the core -----------------------------------------


def parse_costs(rounds: int = 20000) -> list[tuple[str, float]]:
    """CPU µs per call of decoding/encoding one add_sub request/response in each encoding."""
    import json

    from tritonpy.grpc import grpc_service_pb2 as pb

    template = make_request("small")
    grpc_req = pb.ModelInferRequest(model_name="add_sub", model_version="1", id="7")
    grpc_req.parameters["timeout"].int64_param = 0
    for name, dt, array in template.inputs:
        tensor = grpc_req.inputs.add(name=name, datatype=dt, shape=list(array.shape))
        del tensor
        grpc_req.raw_input_contents.append(array.tobytes())
    for name in template.outputs:
        grpc_req.outputs.add(name=name)
    grpc_bytes = grpc_req.SerializeToString()
    http_body = json.dumps(
        {
            "id": "7",
            "parameters": {"timeout": 0},
            "inputs": [
                {"name": n, "datatype": dt, "shape": list(a.shape), "data": a.tolist()}
                for n, dt, a in template.inputs
            ],
            "outputs": [{"name": n} for n in template.outputs],
        }
    ).encode()
    template.id = 7
    compact = b"".join(bytes(p) for p in encode_request(template, None))
    resp = execute(template)

    def grpc_decode() -> None:
        msg = pb.ModelInferRequest.FromString(grpc_bytes)
        for tensor, raw in zip(msg.inputs, msg.raw_input_contents):
            np.frombuffer(raw, dtype=NUMPY[tensor.datatype]).reshape(tuple(tensor.shape))
        {k: v.int64_param for k, v in msg.parameters.items()}
        [o.name for o in msg.outputs]

    def grpc_encode() -> None:
        out = pb.ModelInferResponse(model_name="add_sub", model_version="1", id="7")
        for name, dt, array in resp.outputs:
            out.outputs.add(name=name, datatype=dt, shape=list(array.shape))
            out.raw_output_contents.append(array.tobytes())
        out.SerializeToString()

    def http_decode() -> None:
        body = json.loads(http_body)
        for tensor in body["inputs"]:
            np.array(tensor["data"], dtype=NUMPY[tensor["datatype"]]).reshape(tensor["shape"])

    def http_encode() -> None:
        json.dumps(
            {
                "id": "7",
                "model_name": "add_sub",
                "model_version": "1",
                "outputs": [
                    {"name": n, "datatype": dt, "shape": list(a.shape), "data": a.tolist()}
                    for n, dt, a in resp.outputs
                ],
            }
        ).encode()

    def compact_decode() -> None:
        decode_request(compact, None)

    def compact_encode() -> None:
        b"".join(encode_response(resp, None))

    def pickle_decode() -> None:
        pickle.loads(pickled)

    def pickle_encode() -> None:
        pickle.dumps({"id": 7, "outputs": resp.outputs, "error": ""}, protocol=5)

    pickled = pickle.dumps(
        {
            "id": 7,
            "model": "add_sub",
            "version": 1,
            "params": template.params,
            "inputs": template.inputs,
            "outputs": template.outputs,
        },
        protocol=5,
    )
    out = []
    for label, fn in (
        ("gRPC ModelInferRequest: parse + tensors", grpc_decode),
        ("gRPC ModelInferResponse: build + serialize", grpc_encode),
        ("HTTP JSON body: parse + tensors", http_decode),
        ("HTTP JSON answer: build + dump", http_encode),
        ("pickle request: loads", pickle_decode),
        ("pickle response: dumps", pickle_encode),
        ("compact request: decode", compact_decode),
        ("compact response: encode", compact_encode),
    ):
        for _ in range(rounds // 10):
            fn()
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for _ in range(rounds):
                fn()
            best = min(best, (time.process_time() - start) / rounds)
        out.append((label, best * 1e6))
    return out


# -- the report ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per cell (1 MiB: a tenth)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--options", nargs="+", default=list(OPTIONS), choices=OPTIONS)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=SIZES)
    parser.add_argument("--inflight", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--parse", action="store_true", help="also time protocol parsing in one process")
    parser.add_argument("--write", action="store_true", help="write bench/frontend_hop.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "core"))

    cells = [
        (size, inflight, option)
        for size in args.sizes
        for inflight in args.inflight
        for option in args.options
        if not (option.endswith("/echo") and size != "small")  # the floor is of small messages
    ]
    # Rounds of every cell rather than one cell's runs in a row: load from elsewhere on the
    # machine then spreads over all options instead of skewing one.
    runs: dict[tuple[str, int, str], list[dict[str, float]]] = {cell: [] for cell in cells}
    for round_ in range(args.repeat):
        for size, inflight, option in cells:
            n = args.requests if size == "small" else max(args.requests // 10, 100)
            runs[size, inflight, option].append(run_cell(option, size, n, inflight))
        print(f"round {round_ + 1} of {args.repeat} done", file=sys.stderr, flush=True)
    rows = []
    for cell in cells:
        size, inflight, option = cell
        got = runs[cell]
        med = {k: statistics.median(r[k] for r in got) for k in got[0]}
        core = [(r["core_user"] + r["core_sys"]) * 1e6 for r in got]
        worker = [(r["worker_user"] + r["worker_sys"]) * 1e6 for r in got]
        row = (
            f"| {option} | {size} | {inflight}"
            f" | {statistics.median(core):.0f} ({min(core):.0f}–{max(core):.0f})"
            f" | {med['core_sys'] * 1e6:.0f} | {med['core_vcsw']:.2f}"
            f" | {statistics.median(worker):.0f} ({min(worker):.0f}–{max(worker):.0f})"
            f" | {med['worker_sys'] * 1e6:.0f} | {med['p50'] * 1e6:.0f} | {med['p99'] * 1e6:.0f} |"
        )
        print(row, flush=True)
        rows.append(row)
    head = [
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPU(s),"
        f" {platform.python_implementation()} {platform.python_version()}, uvloop on both sides;"
        f" {args.requests} requests per cell"
        f" ({max(args.requests // 10, 100)} for 1 MiB), median of {args.repeat} runs (min–max).",
        "",
        "| option | size | in flight | core CPU µs/req | core sys µs | core wakes/req"
        " | worker CPU µs/req | worker sys µs | p50 latency µs | p99 latency µs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines = head + rows
    if args.parse:
        costs = parse_costs()
        lines += [
            "",
            "Decoding and encoding one add_sub message in one process (CPU µs per call, best of 3):",
        ]
        lines += [""]
        lines += ["| message | µs |", "|---|---|"]
        lines += [f"| {label} | {us:.1f} |" for label, us in costs]
        for label, us in costs:
            print(f"{label}: {us:.1f} µs")
    if args.write:
        # The numbers go between the markers of bench/frontend_hop.md; the prose around them stays.
        path = ROOT / "bench" / "frontend_hop.md"
        text = path.read_text() if path.exists() else f"{BEGIN}\n{END}\n"
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        path.write_text(before + BEGIN + "\n" + "\n".join(lines) + "\n" + END + after)


if __name__ == "__main__":
    main()
