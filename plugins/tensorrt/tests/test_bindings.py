"""The backend's TensorRT calls against TensorRT's real Python API.

No machine of this project can run TensorRT, but its bindings can be imported over
stand-in libraries (``trt_bindings.py``): every attribute this backend and its GPU tests
use on a TensorRT object is read from the source and looked up on the class it is used on,
each call's arguments checked against the bindings' signatures, a property never called
and a method never read as a value. What the backend reads from an engine (data type names,
tensor modes, logger severities) is checked against the same module, and the backend's
own start-up (``TensorRT.probe``, its logger) runs on it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trt_bindings
from tritonpy_backend_tensorrt import _types
from tritonpy_backend_tensorrt._outputs import OutputBuffers, allocator
from tritonpy_backend_tensorrt._runtime import TensorRT, _logger
from tritonpy_hostcuda import HostDeviceMemory
from tritonpy_sdk import cuda_runtime_module

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src" / "tritonpy_backend_tensorrt"

#: Per file, which local names hold which object: a module ("tensorrt", or "cudart" for
#: cuda-python's runtime), or a class of it ("tensorrt.ICudaEngine").
HOLDERS: dict[Path, dict[str, str]] = {
    SOURCE / "_engine.py": {"trt": "tensorrt", "engine": "tensorrt.ICudaEngine"},
    SOURCE / "_runtime.py": {"trt": "tensorrt", "self.trt": "tensorrt", "runtime": "tensorrt.Runtime"},
    SOURCE / "_instance.py": {
        "engine": "tensorrt.ICudaEngine",
        "self.engine": "tensorrt.ICudaEngine",
        "context": "tensorrt.IExecutionContext",
    },
    SOURCE / "_cuda.py": {"self.rt": "cudart", "cuda.rt": "cudart"},
    SOURCE / "_outputs.py": {"trt": "tensorrt"},
    HERE / "test_tensorrt_served.py": {
        "trt": "tensorrt",
        "builder": "tensorrt.Builder",
        "network": "tensorrt.INetworkDefinition",
        "parser": "tensorrt.OnnxParser",
        "config": "tensorrt.IBuilderConfig",
        "profile": "tensorrt.IOptimizationProfile",
        "resize": "tensorrt.IResizeLayer",
        "resized": "tensorrt.ITensor",
        "shape_tensor": "tensorrt.ITensor",
    },
}

#: Engine data types with no Triton data type (the backend refuses a tensor of one, by name).
NARROW_TYPES = {"FP8", "INT4", "FP4", "E8M0"}


@pytest.fixture(scope="module")
def trt(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    module = trt_bindings.load(tmp_path_factory.mktemp("tensorrt-stand-ins"))
    if module is None:
        pytest.skip("neither TensorRT nor its bindings (tensorrt-cu12-bindings) and a C compiler are here")
    return module


@dataclass(frozen=True)
class Use:
    """One use of a TensorRT attribute in the source: ``holder.path`` read or called."""

    where: str
    owner: str  # a key of modules(), or "module.Class"
    path: tuple[str, ...]
    called: bool
    positional: int
    keywords: tuple[str, ...]


def _dotted(node: ast.expr) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return tuple(reversed(parts))


def uses() -> Iterator[Use]:
    """Every attribute read or called on a name of ``HOLDERS`` (the longest dotted path)."""
    for path, holders in HOLDERS.items():
        tree = ast.parse(path.read_text())
        calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue  # only the outermost attribute of a chain
            dotted = _dotted(node)
            if dotted is None:
                continue
            for size in (2, 1):
                holder = ".".join(dotted[:size])
                if holder in holders and len(dotted) > size:
                    call = calls.get(id(node))
                    yield Use(
                        f"{path.name}:{node.lineno}",
                        holders[holder],
                        dotted[size:],
                        call is not None,
                        len(call.args) if call is not None else 0,
                        tuple(k.arg for k in call.keywords if k.arg) if call is not None else (),
                    )
                    break


#: How pybind11 names a method's type (a value read where it should be called).
_METHOD_TYPES = ("instancemethod", "builtin_function_or_method")

_SIGNATURE = re.compile(r"^(?:\d+\. )?\w+\((.*)\)(?: -> .*)?$")


def _parameters(doc: str) -> list[list[tuple[str, bool]]]:
    """Each overload's parameters after ``self``: (name, has a default), from pybind11's docstring."""
    overloads = []
    for line in doc.splitlines():
        match = _SIGNATURE.match(line.strip())
        if match is None or match.group(1) in ("*args, **kwargs",):
            continue
        params, depth, current = [], 0, ""
        for char in match.group(1) + ",":
            if char == "," and depth == 0:
                params.append(current.strip())
                current = ""
                continue
            depth += (char in "[(") - (char in "])")
            current += char
        named = [(p.split(":")[0].split("=")[0].strip(), "=" in p) for p in params if p]
        overloads.append([p for p in named if p[0] != "self"])
    return overloads


def _accepts(function: Any, positional: int, keywords: tuple[str, ...]) -> bool | None:
    """Whether ``function`` (some overload of it) takes the call's arguments (None: it shows
    no signature). pybind11 writes its overloads into the docstring; Cython functions (cuda-python)
    have a real signature."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        overloads = _parameters(getattr(function, "__doc__", None) or "")
    else:
        overloads = [[(name, p.default is not p.empty) for name, p in signature.parameters.items()]]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
            overloads = _parameters(getattr(function, "__doc__", None) or "")  # pybind11's (*args, **kwargs)
    if not overloads:
        return None
    for params in overloads:
        names = [n for n, _ in params]
        required = sum(1 for _, default in params if not default)
        if positional > len(params) or any(k not in names[positional:] for k in keywords):
            continue
        if positional + len(keywords) >= required:
            return True
    return False


def test_the_source_scan_finds_the_calls_that_matter() -> None:
    found = {(u.owner, u.path) for u in uses()}
    for expected in [
        ("tensorrt.IExecutionContext", ("execute_async_v3",)),
        ("tensorrt.IExecutionContext", ("set_tensor_address",)),
        ("tensorrt.IExecutionContext", ("set_input_shape",)),
        ("tensorrt.ICudaEngine", ("get_tensor_profile_shape",)),
        ("tensorrt.ICudaEngine", ("num_io_tensors",)),
        ("tensorrt.Runtime", ("deserialize_cuda_engine",)),
        ("tensorrt", ("TensorIOMode", "INPUT")),
        ("tensorrt.Builder", ("build_serialized_network",)),
        ("cudart", ("cudaMemcpyAsync",)),
        ("cudart", ("cudaStreamCaptureMode", "cudaStreamCaptureModeThreadLocal")),
    ]:
        assert expected in found, f"{expected} not found in the source: the scan misses calls"


def _problems(use: Use, module: ModuleType) -> list[str]:
    """What is wrong with ``use`` against ``module``, the one its owner names."""
    owner = use.owner
    target: Any = module
    if "." in owner:
        target = getattr(module, owner.split(".", 1)[1], None)
        if target is None:
            return [f"{use.where}: {owner} does not exist"]
    parent: Any = None
    for i, attribute in enumerate(use.path):
        dotted = f"{owner}.{'.'.join(use.path[: i + 1])}"
        if not hasattr(target, attribute):
            return [f"{use.where}: {dotted} does not exist"]
        raw = inspect.getattr_static(target, attribute, None)
        if i == len(use.path) - 1 and isinstance(raw, property) and use.called:
            return [f"{use.where}: {dotted} is a property, called as a method"]
        parent, target = target, getattr(target, attribute)
    dotted = f"{owner}.{'.'.join(use.path)}"
    if not use.called:
        if isinstance(parent, type) and type(target).__name__ in _METHOD_TYPES:
            return [f"{use.where}: {dotted} is a method, read as a value"]
        return []
    function = target.__init__ if isinstance(target, type) else target
    # a method called on its class (``trt.ILogger.__init__(self)``) is given self
    unbound = "." not in owner and isinstance(parent, type) and not isinstance(target, type)
    positional = use.positional - unbound
    if _accepts(function, positional, use.keywords) is False:
        shown = (function.__doc__ or "").strip().splitlines()[:1] or [str(inspect.signature(function))]
        return [
            f"{use.where}: {dotted} takes no {positional} positional arguments "
            f"with keywords {list(use.keywords)}: {shown[0]}"
        ]
    return []


def test_every_attribute_the_backend_uses_exists(trt: ModuleType) -> None:
    cudart = cuda_runtime_module()
    if cudart is None:
        pytest.skip("cuda-python is not installed")
    modules = {"tensorrt": trt, "cudart": cudart}
    versions = f"TensorRT {trt.__version__}, {cudart.__name__} {_version('cuda-bindings')}"
    problems = [p for use in uses() for p in _problems(use, modules[use.owner.split(".")[0]])]
    assert not problems, f"against {versions}:\n" + "\n".join(problems)


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def test_every_engine_data_type_is_mapped_or_refused_by_name(trt: ModuleType) -> None:
    members = set(trt.DataType.__members__)
    mapped = set(_types._CONFIG_TYPES)
    assert mapped <= members, f"mapped types TensorRT {trt.__version__} lacks: {mapped - members}"
    unknown = members - mapped - NARROW_TYPES
    assert not unknown, f"TensorRT {trt.__version__} has data types the backend has not considered: {unknown}"
    for name in members:  # read_engine keeps `engine.get_tensor_dtype(name).name`
        assert getattr(trt.DataType, name).name == name


def test_tensor_modes_and_logger_severities(trt: ModuleType) -> None:
    assert trt.TensorIOMode.INPUT != trt.TensorIOMode.OUTPUT
    logger = _logger(trt)
    assert isinstance(logger, trt.ILogger)
    for severity in trt.ILogger.Severity.__members__.values():
        logger.log(severity, f"a {severity.name} message")
    assert logger.errors == ["a INTERNAL_ERROR message", "a ERROR message"]
    # the runtime registers TensorRT's plugins with this logger: the bindings take it (an
    # object they cannot take raises TypeError); over the stand-ins nothing registers
    assert trt.init_libnvinfer_plugins(logger, "") in (True, False)


def test_the_probe_on_a_host_without_a_gpu(trt: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    found = TensorRT.probe()
    assert found.trt is trt
    if found.cuda is not None and found.cuda.device_count() > 0:
        pytest.skip("this host has a GPU: the gpu-marked tests serve real engines here")
    if found.cuda is None:
        assert "needs cuda-python" in found.reason
    else:
        assert found.reason.startswith(f"TensorRT {trt.__version__} is installed but there is no CUDA GPU")


def test_the_output_allocator_overrides_what_tensorrt_calls(trt: ModuleType) -> None:
    buffers = OutputBuffers(HostDeviceMemory(), device=0)
    made = allocator(trt, buffers)
    assert isinstance(made, trt.IOutputAllocator)
    # The methods TensorRT calls, as the bindings document them (the base class shows none).
    documented = dict(re.findall(r"def (\w+)\(self, ([^)]*)\)", trt.IOutputAllocator.__doc__ or ""))
    assert {"reallocate_output_async", "notify_shape"} <= documented.keys(), documented
    for name, params in documented.items():
        ours = inspect.signature(getattr(type(made), name))
        assert [p for p in ours.parameters if p != "self"] == [p.strip() for p in params.split(",")], name
    address = made.reallocate_output_async("IDX", 0, 24, 8, 0)
    made.notify_shape("IDX", trt.Dims([3]))
    assert address % 8 == 0
    assert buffers.take("IDX", "int64", "m_0").shape == (3,)
