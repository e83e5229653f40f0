"""A backend for front-end tests, and the repository of models it serves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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


DTYPES = (
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
)


def write_repos(root: Path) -> list[Path]:
    """Two repository roots of testbk models (addsub per dtype, one_input, failing, classes)."""
    repo = root / "repo"
    repo.mkdir()
    write_model(repo, "addsub")
    for dt in DTYPES:
        write_model(repo, f"addsub_{dt.lower()}", dtype=f"TYPE_{dt}")
    write_model(repo, "one_input", dtype="TYPE_FP32", dims="-1", inputs=1)
    write_model(
        repo, "failing", extra='parameters { key: "fail" value: { string_value: "backend blew up" } }'
    )
    second = root / "second_repo"  # a second --model-repository root
    second.mkdir()
    write_model(second, "classes", dtype="TYPE_FP32")
    (second / "classes" / "labels.txt").write_text("a\nb\nc\nd\n")
    cfg = second / "classes" / "config.pbtxt"
    cfg.write_text(
        cfg.read_text().replace(
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }',
            '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }',
        )
    )
    return [repo, second]
