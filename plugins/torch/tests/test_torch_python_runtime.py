"""Triton's Python-based PyTorch runtime (``runtime: "model.py"``): an nn.Module class in the
version folder's model.py, its weights in model.pt, run through torch.compile; checked
against the same module called directly."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import tritonpy_backend_torch as backend
from torch_testmodels import AddSub
from tritonpy_backend_torch._params import Options
from tritonpy_backend_torch._python_runtime import model_class
from tritonpy_sdk import ErrorCode, TritonError
from tritonpy_sdk.testing import BackendHarness

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script` is deprecated:DeprecationWarning"),
    # torch 2.13's inductor still uses it when first imported
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.load` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:`torch\.jit\.trace(_method)?` is deprecated:DeprecationWarning"),
]

#: torch.compile without code generation: fast, and the same call path (dynamo) as the default.
EAGER = '{"backend": "eager"}'

NET = """
import torch
from torch import nn
from torch.nn import Linear  # imported classes do not hide the file's own model


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = Linear(4, 3)

    def forward(self, x, bias):
        y = self.fc(x) + bias
        return y, y.argmax(dim=1, keepdim=True)
"""


def _io(name: str, data_type: str, dims: list[int]) -> dict[str, Any]:
    return {"name": name, "data_type": data_type, "dims": dims}


def _cfg(max_batch: int = 8, compile_params: str | None = EAGER, **extra: Any) -> dict[str, Any]:
    params = {} if compile_params is None else {"TORCH_COMPILE_OPTIONAL_PARAMETERS": compile_params}
    return {
        "name": "net",
        "backend": "pytorch",
        "runtime": "model.py",
        "max_batch_size": max_batch,
        "input": [_io("INPUT0", "TYPE_FP32", [4]), _io("INPUT1", "TYPE_FP32", [3])],
        "output": [_io("OUTPUT0", "TYPE_FP32", [3]), _io("OUTPUT1", "TYPE_INT64", [1])],
        "parameters": {k: {"string_value": v} for k, v in params.items()},
        **extra,
    }


def _harness(root: Path, config: dict[str, Any], kind: str = "KIND_CPU") -> BackendHarness:
    """The model under the backend's own name: Triton's core rules for ``pytorch`` apply."""
    return BackendHarness(backend, root / "net", config=config, backend_name="pytorch", instance_kind=kind)


def _folder(root: Path, source: str = NET, weights: bool = True, name: str = "model") -> torch.nn.Module:
    """The model folder: ``<name>.py`` and (with ``weights``) ``<name>.pt``; returns the
    module as the runtime should build it, for the expected results."""
    version = root / "net" / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / f"{name}.py").write_text(textwrap.dedent(source))
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(source), "net", "exec"), namespace)
    torch.manual_seed(7)
    module = namespace["Net"]()
    if weights:
        torch.save(module.state_dict(), version / f"{name}.pt")
    return module.eval()


def _expected(module: torch.nn.Module, x: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        y, arg = module(torch.from_numpy(x), torch.from_numpy(b))
    return y.numpy(), arg.numpy()


def test_the_class_with_its_weights_is_compiled_and_batched(tmp_path: Path) -> None:
    module = _folder(tmp_path)
    rng = np.random.default_rng(0)
    with _harness(tmp_path, config=_cfg()) as h:
        # Triton's core leaves the file to the runtime: no default_model_filename is filled in.
        assert not h.model.config.get("default_model_filename")
        assert h.model.config["platform"] == "pytorch_libtorch"
        program = h.instance.state.program
        assert isinstance(program.module, torch.nn.Module) and type(program.module).__name__ == "Net"
        assert program.call is not program.module  # the torch.compile wrapper
        feeds = [
            (rng.normal(size=(n, 4)).astype(np.float32), rng.normal(size=(n, 3)).astype(np.float32))
            for n in (1, 3, 2)
        ]
        responses = h.execute([h.request({"INPUT0": x, "INPUT1": b}) for x, b in feeds])  # one batch
        for (x, b), response in zip(feeds, responses):
            y, arg = _expected(module, x, b)
            np.testing.assert_allclose(response.outputs["OUTPUT0"].data, y, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(response.outputs["OUTPUT1"].data, arg)


def test_without_weights_the_module_keeps_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = NET.replace("super().__init__()", "super().__init__()\n        torch.manual_seed(7)")
    module = _folder(tmp_path, source, weights=False)
    x, b = np.ones((2, 4), np.float32), np.zeros((2, 3), np.float32)
    with caplog.at_level(logging.INFO), _harness(tmp_path, config=_cfg()) as h:
        out = h.infer({"INPUT0": x, "INPUT1": b})
    np.testing.assert_allclose(out["OUTPUT0"], _expected(module, x, b)[0], rtol=1e-5, atol=1e-6)
    assert "Model parameter file not found for 'net'" in caplog.text


def test_default_model_filename_names_the_file_and_its_weights(tmp_path: Path) -> None:
    module = _folder(tmp_path, name="classifier")
    x, b = np.full((1, 4), 0.5, np.float32), np.ones((1, 3), np.float32)
    with _harness(tmp_path, config=_cfg(default_model_filename="classifier.py")) as h:
        out = h.infer({"INPUT0": x, "INPUT1": b})
    np.testing.assert_allclose(out["OUTPUT0"], _expected(module, x, b)[0], rtol=1e-5, atol=1e-6)


def test_a_torchscript_file_alone_is_loaded_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    version = tmp_path / "net" / "1"
    version.mkdir(parents=True)
    torch.jit.script(AddSub()).save(str(version / "model.pt"))
    cfg = _cfg(max_batch=4)
    cfg["output"] = [_io("OUTPUT0", "TYPE_FP32", [3]), _io("OUTPUT1", "TYPE_FP32", [3])]
    cfg["input"] = [_io("INPUT0", "TYPE_FP32", [3]), _io("INPUT1", "TYPE_FP32", [3])]
    with caplog.at_level(logging.INFO), _harness(tmp_path, config=cfg) as h:
        a, b = np.array([[5, 7, 9]], np.float32), np.array([[1, 2, 3]], np.float32)
        out = h.infer({"INPUT0": a, "INPUT1": b})  # by config order: a + b, a - b
        assert isinstance(h.instance.state.program.call, torch.jit.ScriptModule)  # not compiled
    assert out["OUTPUT0"].tolist() == [[6, 9, 12]] and out["OUTPUT1"].tolist() == [[4, 5, 6]]
    assert "Loading 'net' as TorchScript" in caplog.text


def test_inputs_and_outputs_follow_the_configs_order(tmp_path: Path) -> None:
    """As Triton's runtime: position, not name (a name like forward()'s argument changes nothing)."""
    source = """
    from torch import nn

    class Net(nn.Module):
        def forward(self, a, b):
            return a - b, a + b
    """
    _folder(tmp_path, source, weights=False)
    cfg = _cfg(max_batch=0)
    cfg["input"] = [_io("b", "TYPE_FP32", [2]), _io("a", "TYPE_FP32", [2])]
    cfg["output"] = [_io("sum__1", "TYPE_FP32", [2]), _io("difference__0", "TYPE_FP32", [2])]
    with _harness(tmp_path, config=cfg) as h:
        out = h.infer({"a": np.array([10, 20], np.float32), "b": np.array([1, 2], np.float32)})
    # forward(a=<input "b">, b=<input "a">): first result b - a goes to the first output.
    assert out["sum__1"].tolist() == [-9, -18] and out["difference__0"].tolist() == [11, 22]


def test_compile_runs_inductor_by_default(tmp_path: Path) -> None:
    """No TORCH_COMPILE_OPTIONAL_PARAMETERS: torch.compile's defaults (inductor), as Triton."""
    module = _folder(tmp_path)
    x, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.ones((2, 3), np.float32)
    with _harness(tmp_path, config=_cfg(compile_params=None)) as h:
        out = h.infer({"INPUT0": x, "INPUT1": b})
    y, arg = _expected(module, x, b)
    np.testing.assert_allclose(out["OUTPUT0"], y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out["OUTPUT1"], arg)


def test_thread_parameters_of_the_runtime_are_read() -> None:
    params = {"NUM_THREADS": "2", "NUM_INTEROP_THREADS": "1"}
    assert Options.parse(params, python_runtime=True).intra_op_threads == 2
    assert Options.parse(params, python_runtime=True).inter_op_threads == 1
    assert Options.parse(params).intra_op_threads == 0  # a libtorch model: not its parameters
    assert Options.parse({**params, "INTRA_OP_THREAD_COUNT": "3"}, python_runtime=True).intra_op_threads == 3


def test_runtime_parameters_are_known_to_runtime_models(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _folder(tmp_path)
    cfg = _cfg()
    cfg["parameters"]["NUM_INTEROP_THREADS"] = {"string_value": "1"}
    cfg["parameters"]["NUM_THREAD"] = {"string_value": "1"}
    with caplog.at_level(logging.DEBUG, "tritonpy.backend"), _harness(tmp_path, config=cfg):
        pass
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "NUM_INTEROP_THREADS" not in warnings and "TORCH_COMPILE" not in warnings
    assert "unknown parameter 'NUM_THREAD' is ignored by the PyTorch backend" in warnings
    assert "auto-complete" not in warnings  # Triton's runtime completes nothing and says nothing
    assert "'torch.compile' optional parameter(s) for 'net': {'backend': 'eager'}" in caplog.text


def test_imported_module_classes_do_not_hide_the_files_model() -> None:
    import types

    module = types.ModuleType("m")
    exec(compile(textwrap.dedent(NET), "m", "exec"), module.__dict__)
    assert model_class(torch, module).__name__ == "Net"  # Triton's dir() order would give Linear
    only_imported = types.ModuleType("n")
    exec("from torch.nn import Identity", only_imported.__dict__)
    assert model_class(torch, only_imported) is torch.nn.Identity


def _load_error(root: Path, cfg: dict[str, Any]) -> TritonError:
    with pytest.raises(TritonError) as err:
        _harness(root, config=cfg).start()
    return err.value


NO_MODULE = "import torch\nVALUE = 1\n"
NO_PARAMETERS = """
from torch import nn

class Net(nn.Module):
    def forward(self, x, bias):
        return x, bias
"""
RAISES_IN_INIT = NET.replace(
    "super().__init__()", "super().__init__()\n        raise ValueError('no GPU here')"
)
THREE_ARGUMENTS = NET.replace("def forward(self, x, bias)", "def forward(self, x, bias, scale)")
KEYWORD_ONLY = NET.replace("def forward(self, x, bias)", "def forward(self, x, bias, *, scale)")


@pytest.mark.parametrize(
    ("source", "params", "code", "message"),
    [
        (NO_MODULE, EAGER, ErrorCode.INTERNAL, r"Cannot find a subclass of torch\.nn\.Module"),
        (
            "import torch\ndef broken(:\n",
            EAGER,
            ErrorCode.INTERNAL,
            r"failed to load model 'net': model\.py raised SyntaxError: .*",
        ),
        (
            RAISES_IN_INIT,
            EAGER,
            ErrorCode.INTERNAL,
            r"failed to load model 'net': Net\(\) raised ValueError: no GPU here",
        ),
        (
            THREE_ARGUMENTS,
            EAGER,
            ErrorCode.INVALID_ARG,
            r"unable to load model 'net', configuration expects 2 inputs, model provides 3",
        ),
        (
            KEYWORD_ONLY,
            EAGER,
            ErrorCode.INVALID_ARG,
            r"unable to load model 'net': forward\(\) has keyword-only arguments without defaults "
            r"\(scale\), which the configuration's inputs cannot fill",
        ),
        (
            NET,
            "{not json",
            ErrorCode.INVALID_ARG,
            r"model 'net': TORCH_COMPILE_OPTIONAL_PARAMETERS is not valid JSON .*",
        ),
        (
            NET,
            '["eager"]',
            ErrorCode.INVALID_ARG,
            r"model 'net': TORCH_COMPILE_OPTIONAL_PARAMETERS must be a JSON object of torch\.compile's "
            r"keyword arguments, got '\[\"eager\"\]'",
        ),
        (
            NET,
            '{"model": "x"}',
            ErrorCode.INVALID_ARG,
            r"'model' is not an optional parameter for 'torch\.compile'",
        ),
        (
            NET,
            '{"backend": "eager", "fastest": true}',
            ErrorCode.INVALID_ARG,
            r"model 'net': torch\.compile failed with TORCH_COMPILE_OPTIONAL_PARAMETERS .*fastest.*",
        ),
    ],
)
def test_models_that_cannot_load_say_why(
    tmp_path: Path, source: str, params: str, code: ErrorCode, message: str
) -> None:
    _write(tmp_path, source)
    error = _load_error(tmp_path, _cfg(compile_params=params))
    assert error.code is code and re.fullmatch(message, error.message), error


def _write(root: Path, source: str) -> None:
    version = root / "net" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(source)


def test_missing_files_and_weights_that_do_not_fit(tmp_path: Path) -> None:
    (tmp_path / "net" / "1").mkdir(parents=True)
    error = _load_error(tmp_path, _cfg())
    assert error.code is ErrorCode.UNAVAILABLE
    assert re.fullmatch(r"No model found in .*/net/1/\['model\.py', 'model\.pt'\]", error.message)
    _folder(tmp_path, weights=False)
    torch.save({"fc.weight": torch.zeros(2, 2)}, tmp_path / "net" / "1" / "model.pt")
    error = _load_error(tmp_path, _cfg())
    assert error.code is ErrorCode.INTERNAL
    assert error.message.startswith(
        "failed to load model 'net': the weights in model.pt do not load into Net: "
    )


def test_a_forward_that_raises_fails_its_requests_and_the_next_one_runs(tmp_path: Path) -> None:
    source = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x, bias):
            if bool((x < 0).any()):
                raise ValueError("negative input")
            return x[:, :3] + bias, x[:, :1].long()
    """
    _folder(tmp_path, source, weights=False)
    with _harness(tmp_path, config=_cfg()) as h:
        with pytest.raises(TritonError) as err:
            h.infer({"INPUT0": -np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 3), np.float32)})
        assert err.value.code is ErrorCode.INTERNAL
        assert err.value.message.startswith("PyTorch execute failure: ")
        assert "negative input" in err.value.message
        out = h.infer({"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 3), np.float32)})
        assert out["OUTPUT0"].tolist() == [[2, 2, 2]]


def test_kind_model_runs_where_the_first_parameter_is(tmp_path: Path) -> None:
    module = _folder(tmp_path)
    with _harness(tmp_path, _cfg(), "KIND_MODEL") as h:
        assert str(h.instance.state.program.device) == "cpu"
        x, b = np.ones((1, 4), np.float32), np.ones((1, 3), np.float32)
        np.testing.assert_allclose(
            h.infer({"INPUT0": x, "INPUT1": b})["OUTPUT0"], _expected(module, x, b)[0], rtol=1e-5, atol=1e-6
        )
    scripted = tmp_path / "scripted"
    (scripted / "net" / "1").mkdir(parents=True)
    traced = torch.jit.trace(module, (torch.ones(1, 4), torch.ones(1, 3)))  # no source to script
    traced.save(str(scripted / "net" / "1" / "model.pt"))
    with _harness(scripted, _cfg(), "KIND_MODEL") as h:  # a TorchScript file: where it was saved
        assert str(h.instance.state.program.device) == "cpu"
        np.testing.assert_allclose(
            h.infer({"INPUT0": x, "INPUT1": b})["OUTPUT0"], _expected(module, x, b)[0], rtol=1e-5, atol=1e-6
        )
    _write(tmp_path / "empty", NO_PARAMETERS)
    with pytest.raises(TritonError, match="^Cannot determine model device$"):
        _harness(tmp_path / "empty", _cfg(), "KIND_MODEL").start()


@pytest.mark.gpu
@pytest.mark.parametrize("compile_params", [EAGER, None])
def test_kind_gpu_builds_the_module_on_its_gpu(tmp_path: Path, compile_params: str | None) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    module = _folder(tmp_path)
    config = _cfg(compile_params=compile_params)
    with _harness(tmp_path, config, "KIND_GPU") as h:
        program = h.instance.state.program
        assert program.device == torch.device("cuda", 0)
        assert next(program.module.parameters()).device == torch.device("cuda", 0)
        feeds = [(np.full((n, 4), n, np.float32), np.ones((n, 3), np.float32)) for n in (1, 3)]
        responses = h.execute([h.request({"INPUT0": x, "INPUT1": b}) for x, b in feeds])
        for (x, b), response in zip(feeds, responses):
            y, arg = _expected(module, x, b)
            np.testing.assert_allclose(response.outputs["OUTPUT0"].data, y, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(response.outputs["OUTPUT1"].data, arg)
