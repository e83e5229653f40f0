"""PT2 models under platform torch_aoti: torch.export programs (auto-completed, beyond Triton)
and AOTInductor packages (as Triton's PyTorch backend serves them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy_backend_torch as backend
from torch import Tensor, nn
from torch_testmodels import MLP, Accumulator
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_sdk.testing import BackendHarness


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = MLP(6, 8, 3)

    def forward(self, features: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.mlp(features) + bias
        return logits, logits.argmax(dim=1)


def _export(folder: Path, dynamic: bool = True) -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    model = TwoHeads().eval()
    args = (torch.randn(2, 6), torch.randn(2, 3))
    shapes = None
    if dynamic:
        batch = torch.export.Dim("batch", min=1, max=64)
        shapes = {"features": {0: batch}, "bias": {0: batch}}
    ep = torch.export.export(model, args, dynamic_shapes=shapes)
    (folder / "1").mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, str(folder / "1" / "model.pt2"))
    return ep


def _cfg(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "platform": "torch_aoti", "default_model_filename": "model.pt2", **extra}


def test_export_program_auto_completes_the_config(tmp_path: Path) -> None:
    _export(tmp_path / "m")
    with BackendHarness(
        backend, tmp_path / "m", config=_cfg("m"), backend_config={"default-max-batch-size": "8"}
    ) as h:
        cfg = h.model.config
        assert cfg["max_batch_size"] == 8
        assert [(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]] == [
            ("features", "TYPE_FP32", [6]),
            ("bias", "TYPE_FP32", [3]),
        ]
        assert [(o["name"], o["data_type"], o["dims"]) for o in cfg["output"]] == [
            ("OUTPUT__0", "TYPE_FP32", [3]),
            ("OUTPUT__1", "TYPE_INT64", [1]),  # a batched scalar per row: [1], as Triton writes it
        ]


def test_fixed_shapes_do_not_batch(tmp_path: Path) -> None:
    _export(tmp_path / "m", dynamic=False)
    with BackendHarness(backend, tmp_path / "m", config=_cfg("m")) as h:
        assert h.model.config.get("max_batch_size", 0) == 0
        assert h.model.config["input"][0]["dims"] == [2, 6]


def test_export_program_batches_and_matches_the_program(tmp_path: Path) -> None:
    ep = _export(tmp_path / "m")
    rng = np.random.default_rng(1)
    with BackendHarness(backend, tmp_path / "m", config=_cfg("m")) as h:
        feeds = [
            (rng.normal(size=(n, 6)).astype(np.float32), rng.normal(size=(n, 3)).astype(np.float32))
            for n in (1, 3)
        ]
        responses = h.execute([h.request({"features": f, "bias": b}) for f, b in feeds])
        for (f, b), response in zip(feeds, responses):
            logits, best = ep.module()(torch.from_numpy(f), torch.from_numpy(b))
            np.testing.assert_allclose(
                response.outputs["OUTPUT__0"].data, logits.detach().numpy(), rtol=1e-5, atol=1e-6
            )
            np.testing.assert_array_equal(response.outputs["OUTPUT__1"].data, best.numpy())


def test_names_by_call_structure_and_ordinal(tmp_path: Path) -> None:
    _export(tmp_path / "m")
    io = {
        "max_batch_size": 4,
        "input": [
            {"name": "ARGS[1]", "data_type": "TYPE_FP32", "dims": [3]},
            {"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [6]},
        ],
        "output": [{"name": "RESULT[1]", "data_type": "TYPE_INT64", "dims": [1]}],
    }
    with BackendHarness(backend, tmp_path / "m", config=_cfg("m", **io), auto_complete=False) as h:
        bias = np.array([[0, 0, 100]], np.float32)
        assert h.infer({"INPUT__0": np.zeros((1, 6), np.float32), "ARGS[1]": bias})["RESULT[1]"].tolist() == [
            2
        ]


def test_pt2_errors(tmp_path: Path) -> None:
    _export(tmp_path / "m")
    wrong = _cfg("m", input=[{"name": "features", "data_type": "TYPE_INT32", "dims": [6]}])
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "m", config=wrong).start()
    assert err.value.message == (
        "unable to load model 'm', configuration expects datatype TYPE_INT32 for input 'features', "
        "model provides TYPE_FP32"
    )
    unknown = _cfg(
        "m",
        max_batch_size=4,
        input=[
            {"name": "features", "data_type": "TYPE_FP32", "dims": [6]},
            {"name": "nope", "data_type": "TYPE_FP32", "dims": [3]},
        ],
        output=[{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [3]}],
    )
    with pytest.raises(TritonError, match="unexpected inference input 'nope', allowed inputs are: ARGS"):
        BackendHarness(backend, tmp_path / "m", config=unknown, auto_complete=False).start()
    (tmp_path / "bad" / "1").mkdir(parents=True)
    (tmp_path / "bad" / "1" / "model.pt2").write_bytes(b"neither kind of archive")
    with pytest.raises(TritonError) as err:
        BackendHarness(backend, tmp_path / "bad", config=_cfg("bad")).start()
    assert err.value.code is ErrorCode.INTERNAL
    assert "is neither an AOTInductor package" in err.value.message


def _inductor_warnings(test: Any) -> Any:
    """The inductor compiler's own deprecation notices, raised while it compiles a package."""
    for rule in (
        r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning",
        r"ignore:`torch\.jit\.script_method` is deprecated:DeprecationWarning",
    ):
        test = pytest.mark.filterwarnings(rule)(test)
    return test


@pytest.fixture(scope="module")
def aoti_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    if not hasattr(torch._inductor, "aoti_compile_and_package"):
        pytest.skip("AOTInductor packages need torch >= 2.6")
    folder = tmp_path_factory.mktemp("aoti") / "m"
    ep = _export(folder)
    torch._inductor.aoti_compile_and_package(ep, package_path=str(folder / "1" / "model.pt2"))
    return folder, ep


@pytest.mark.slow
@_inductor_warnings
def test_aoti_package_served_as_triton_does(aoti_package: tuple[Path, Any]) -> None:
    folder, ep = aoti_package
    cfg = _cfg(
        "m",
        max_batch_size=8,
        input=[
            {"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [6]},
            {"name": "INPUT__1", "data_type": "TYPE_FP32", "dims": [3]},
        ],
        output=[
            {"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [3]},
            {"name": "RESULT[1]", "data_type": "TYPE_INT64", "dims": [1]},
        ],
    )
    with BackendHarness(backend, folder, config=cfg) as h:  # no auto-complete from a package: as Triton
        f, b = (
            np.random.default_rng(2).normal(size=(2, 4, 6)).astype(np.float32)[0],
            np.zeros((4, 3), np.float32),
        )
        out = h.infer({"INPUT__0": f, "INPUT__1": b})
    logits, best = ep.module()(torch.from_numpy(f), torch.from_numpy(b))
    np.testing.assert_allclose(out["OUTPUT__0"], logits.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["RESULT[1]"], best.numpy())


@pytest.mark.slow
@_inductor_warnings
def test_aoti_package_for_another_device_is_refused(aoti_package: tuple[Path, Any]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: KIND_GPU would be tried for real")
    folder, _ = aoti_package
    cfg = _cfg(
        "m",
        max_batch_size=8,
        input=[{"name": f"INPUT__{i}", "data_type": "TYPE_FP32", "dims": [d]} for i, d in enumerate((6, 3))],
        output=[{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [3]}],
    )
    with pytest.raises(TritonError, match="sees no CUDA device"):
        BackendHarness(backend, folder, config=cfg, instance_kind="KIND_GPU").start()


def test_an_exported_sequence_model_gets_controls_and_state_by_ordinal(tmp_path: Path) -> None:
    """Auto-complete leaves the core's tensors out; they bind by their ``__<index>``."""
    batch = torch.export.Dim("batch", min=1, max=8)
    # Five distinct example tensors (export traces aliased arguments as one).
    args = (torch.ones(2, 1), torch.ones(2, 1, dtype=torch.int32), torch.ones(2, 1, dtype=torch.bool))
    args += (torch.ones(2, 1), torch.ones(2, 1))
    shapes = tuple({0: batch} for _ in args)
    ep = torch.export.export(Accumulator().eval(), args, dynamic_shapes=shapes)
    (tmp_path / "acc" / "1").mkdir(parents=True)
    torch.export.save(ep, str(tmp_path / "acc" / "1" / "model.pt2"))
    controls = [
        ("START__1", "CONTROL_SEQUENCE_START", {"int32_false_true": [0, 1]}),
        ("END__2", "CONTROL_SEQUENCE_END", {"bool_false_true": [False, True]}),
        ("READY__3", "CONTROL_SEQUENCE_READY", {"fp32_false_true": [0, 1]}),
    ]
    sequence = {
        "control_input": [{"name": n, "control": [{"kind": k, **v}]} for n, k, v in controls],
        "state": [
            {"input_name": "STATE__4", "output_name": "STATE__2", "data_type": "TYPE_FP32", "dims": [1]}
        ],
    }
    with BackendHarness(backend, tmp_path / "acc", config=_cfg("acc", sequence_batching=sequence)) as h:
        cfg = h.model.config
        assert [i["name"] for i in cfg["input"]] == ["x"]
        assert [o["name"] for o in cfg["output"]] == ["OUTPUT__0", "OUTPUT__1"]
        request = h.request(
            {
                "x": np.array([[2], [5]], np.float32),
                "START__1": np.array([[1], [0]], np.int32),
                "END__2": np.array([[False], [True]]),
                "READY__3": np.array([[1], [1]], np.float32),
                "STATE__4": np.array([[0], [10]], np.float32),
            }
        )
        (response,) = h.execute([request])
    assert response.error is None
    got = {name: t.data.tolist() for name, t in response.outputs.items()}
    assert got == {"OUTPUT__0": [[2], [15]], "OUTPUT__1": [[101], [110]], "STATE__2": [[2], [15]]}
