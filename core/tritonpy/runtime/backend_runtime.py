"""The config's ``runtime`` field: which library of its backend a model runs on.

In Triton, ``runtime`` names the backend's shared library (``libtriton_onnxruntime.so``)
or ``model.py`` for a Python-based backend, looked up in the version folder, the model
folder and the backend's folder, in that order. tritonpy's backends are Python plugins:
the names that mean the backend's own runtime are taken (none, ``model.py``, Triton's
library name for the backend); any other name is refused as Triton refuses one it cannot
find, or one that leads out of the folder it was found in, and a library found there
is refused too, since tritonpy cannot run it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tritonpy_sdk import TritonError

#: The runtime a Python-based backend (Triton's or a ``--backend-directory`` one) runs.
PYTHON_RUNTIME = "model.py"


def check_runtime(
    runtime: str, backend: str, model: str, version_path: Path, backend_directory: Path | None
) -> None:
    """TritonError (INVALID_ARG) when ``runtime`` names something other than ``backend``'s
    own runtime, with Triton's messages for one not found or leading out of its folder."""
    if runtime in ("", PYTHON_RUNTIME, f"libtriton_{backend}.so"):
        return
    folders = [version_path, version_path.parent]
    if backend_directory is not None:
        folders.append(backend_directory / backend)
    for folder in folders:
        found = folder / runtime
        if not found.exists():
            continue
        inside = os.path.realpath(found).startswith(os.path.realpath(folder) + os.sep)
        if not inside:
            raise TritonError.invalid_arg(
                f"backend library name '{runtime}' escapes backend directory '{folder}', for model "
                f"'{model}', check model config runtime field"
            )
        raise TritonError.invalid_arg(
            f"backend library '{found}' for model '{model}' cannot be loaded: tritonpy runs the "
            f"'{backend}' backend as a Python package, not as a shared library; leave 'runtime' out"
        )
    searched = "".join(f"'{folder}' " for folder in folders)
    raise TritonError.invalid_arg(
        f"unable to find backend library '{runtime}' for model '{model}', searched: {searched}"
    )
