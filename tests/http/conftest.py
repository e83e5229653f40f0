"""One real HTTP server per module: Server + uvicorn on a free loopback port, in a thread,
with a test backend registered in-process."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
import tritonpy
import uvicorn
from tritonpy.http import create_app
from tritonpy_sdk import (
    BackendInfo,
    DataType,
    InferenceRequest,
    InferenceResponse,
    ModelInstance,
    Tensor,
    TritonError,
    hookimpl,
)


class TestBackend:
    """addsub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (BOOL: or, xor; BYTES: echo);
    echoes the request parameter 'echo' into the response parameters; raises for the
    model parameter 'fail'."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(default_model_filename="model.txt", default_instance_kind="KIND_CPU")

    @hookimpl
    def execute(
        self, instance: ModelInstance, requests: Sequence[InferenceRequest]
    ) -> list[InferenceResponse]:
        if instance.model.parameters.get("fail"):
            raise TritonError.internal(instance.model.parameters["fail"])
        out = []
        for r in requests:
            a = r.inputs["INPUT0"]
            if a.datatype is DataType.BYTES:
                outputs = {
                    "OUTPUT0": Tensor("OUTPUT0", a.data, a.datatype),
                    "OUTPUT1": Tensor("OUTPUT1", a.data, a.datatype),
                }
            else:
                b = r.inputs.get("INPUT1", a).data
                if a.datatype is DataType.BOOL:  # numpy has no bool subtraction
                    total, diff = a.data | b, a.data ^ b
                else:
                    total, diff = a.data + b, a.data - b
                outputs = {
                    "OUTPUT0": Tensor("OUTPUT0", total.astype(a.data.dtype), a.datatype),
                    "OUTPUT1": Tensor("OUTPUT1", diff.astype(a.data.dtype), a.datatype),
                }
            params = {"echo": r.parameters["echo"]} if "echo" in r.parameters else {}
            out.append(InferenceResponse(outputs, parameters=params))
        return out


def write_model(
    repo: Path, name: str, dtype: str = "TYPE_INT32", dims: str = "4", extra: str = "", inputs: int = 2
) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.txt").write_text("")
    ins = ", ".join(f'{{ name: "INPUT{i}" data_type: {dtype} dims: [ {dims} ] }}' for i in range(inputs))
    outs = ", ".join(f'{{ name: "OUTPUT{i}" data_type: {dtype} dims: [ {dims} ] }}' for i in range(2))
    (repo / name / "config.pbtxt").write_text(
        f'backend: "testbk"\nmax_batch_size: 8\ninput [ {ins} ]\noutput [ {outs} ]\n{extra}'
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, server: tritonpy.Server) -> None:
        self.server = server
        self.port = free_port()
        self.url = f"127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(server), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._uvicorn.serve()), daemon=True)

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{self.url}/v2/health/live", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        raise RuntimeError("HTTP server did not come up")

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, "addsub")
    for dt in (
        "BOOL",
        "UINT8",
        "UINT16",
        "UINT32",
        "UINT64",
        "INT8",
        "INT16",
        "INT64",
        "FP16",
        "FP32",
        "FP64",
        "BF16",
        "STRING",
    ):
        write_model(repo, f"addsub_{dt.lower()}", dtype=f"TYPE_{dt}")
    write_model(repo, "one_input", dtype="TYPE_FP32", dims="-1", inputs=1)
    write_model(
        repo, "failing", extra='parameters { key: "fail" value: { string_value: "backend blew up" } }'
    )
    second = tmp_path_factory.mktemp("second_repo")  # a second --model-repository root
    write_model(second, "classes", dtype="TYPE_FP32")
    (second / "classes" / "labels.txt").write_text("a\nb\nc\nd\n")
    cfg = second / "classes" / "config.pbtxt"
    cfg.write_text(
        cfg.read_text().replace(
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }',
        )
    )
    server = tritonpy.Server(model_repository=[repo, second], http_max_input_size=1 << 20)
    server.backends.register("testbk", TestBackend())
    server.start()
    live = LiveServer(server)
    live.start()
    yield live
    live.stop()
    server.stop()
