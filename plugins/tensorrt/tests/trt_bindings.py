"""TensorRT's real Python bindings on a host without TensorRT's libraries.

``tensorrt-cu12-bindings`` on PyPI is the real ``tensorrt`` extension module (1 MB); the
libraries it links against (libnvinfer, its plugins, the ONNX parser: ~2 GB) come from
NVIDIA's own index, which this project's machines cannot reach. ``load`` imports the
bindings with a stand-in for each of those libraries: a shared object with the library's
name whose functions return null. Nothing can run on it (a ``tensorrt.Runtime`` cannot be
made: its factory returns null and the bindings raise), but every class, method, property,
enum and signature of TensorRT's API is there to be inspected, as a TensorRT install has it.
A host with TensorRT installed gets its real ``tensorrt`` module instead.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

_MISSING_LIBRARY = re.compile(r"(lib[\w.+-]+\.so[.\d]*): cannot open shared object file")
_UNDEFINED = re.compile(r"undefined symbol: (\w+)")


def load(workdir: Path) -> ModuleType | None:
    """The ``tensorrt`` module (a real install), else the bindings over stand-in libraries
    built in ``workdir``; None when neither can be had (no bindings, or no C compiler)."""
    if importlib.util.find_spec("tensorrt") is not None:
        try:
            return importlib.import_module("tensorrt")
        except ImportError:
            pass
    if importlib.util.find_spec("tensorrt_bindings") is None or shutil.which("cc") is None:
        return None
    symbols: set[str] = set()
    libraries: set[str] = set()
    for _ in range(64):  # each try finds one more missing library or symbol
        text = _import_error(workdir)
        if not text:
            for library in sorted(libraries):
                ctypes.CDLL(str(workdir / library), mode=ctypes.RTLD_GLOBAL)
            return importlib.import_module("tensorrt_bindings")
        library, symbol = _MISSING_LIBRARY.search(text), _UNDEFINED.search(text)
        if library is not None and library.group(1) not in libraries:
            libraries.add(library.group(1))
        elif symbol is not None and symbol.group(1) not in symbols:
            symbols.add(symbol.group(1))
        else:
            raise ImportError(f"the TensorRT bindings cannot be loaded over stand-ins: {text}")
        _build(workdir, libraries, symbols)
    raise ImportError("the TensorRT bindings need more stand-in symbols than expected")


def _import_error(workdir: Path) -> str:
    """What importing the bindings in a fresh interpreter, over the stand-ins built so far in
    ``workdir``, fails with ("" when it does not)."""
    path = os.pathsep.join([str(workdir), os.environ.get("LD_LIBRARY_PATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", "import tensorrt_bindings"],
        env={**os.environ, "LD_LIBRARY_PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _build(workdir: Path, libraries: set[str], symbols: set[str]) -> None:
    """Each of ``libraries`` as a shared object of that name (its soname too) in ``workdir``,
    defining every one of ``symbols`` as a function returning null."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "stand_in.c"
    source.write_text("".join(f"void *{name}(void) {{ return 0; }}\n" for name in sorted(symbols)))
    for library in sorted(libraries):
        subprocess.run(
            ["cc", "-shared", "-fPIC", f"-Wl,-soname,{library}", "-o", str(workdir / library), str(source)],
            check=True,
            capture_output=True,
        )
