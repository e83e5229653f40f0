"""``tritonpy new-backend NAME [DIR]``: write an installable backend package to start from.

The package is a ``Predictor`` (the SDK's high-level layer) with its entry
point, a test that runs it with ``tritonpy_sdk.testing.BackendHarness``, and
a README. It depends on ``tritonpy-sdk`` only; ``tritonpy`` and ``pytest`` are
its test extras.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from string import Template

from ._version import __version__

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

_PYPROJECT = Template("""\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "tritonpy-backend-${dist}"
version = "0.1.0"
description = "A tritonpy backend: ${name}."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["tritonpy-sdk>=${sdk}", "numpy>=1.24"]

[project.optional-dependencies]
test = ["tritonpy>=${sdk}", "pytest>=8"]

# The entry-point name is the backend name: `backend: "${name}"` in config.pbtxt.
[project.entry-points."tritonpy.backends"]
${name} = "${package}:${cls}"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
${package} = ["py.typed"]

[tool.pytest.ini_options]
pythonpath = ["src"]
testpaths = ["tests"]
# The tests are synchronous: pytest-asyncio, where installed, stays out (and quiet). Remove this
# line to write async tests with it.
addopts = "-p no:asyncio"
""")

_MODULE = Template('''\
"""The ${name} backend for tritonpy: ``OUTPUTn = INPUTn * scale``, the scale read from model.json.

Replace ``load`` and ``predict`` with your framework's; the server validates
requests against the config, batches them, counts statistics and encodes
the outputs.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from tritonpy_sdk import BackendInfo, Model, Predictor, TritonError, complete_output

Arrays = dict[str, np.ndarray[Any, Any]]


class ${cls}(Predictor):
    # The file in a version folder that holds a model (lets the server pick this
    # backend for a model whose config names none: choose one no other backend claims).
    backend_info = BackendInfo(default_model_filename="model.json", default_instance_kind="KIND_CPU")

    @classmethod
    def auto_complete(cls, model: Model) -> None:
        # Optional, before validation: fill what the config leaves out (here each input
        # INPUTn gets an output OUTPUTn alike). model.user_config is what the user wrote.
        for i in model.config.get("input", []):
            complete_output(model, i["name"].replace("INPUT", "OUTPUT", 1), i["data_type"], i["dims"])

    def load(self) -> None:
        # Once per instance (instance_group count x kind; self.kind, self.device_id).
        try:
            spec = json.loads(self.model_path.read_text())
        except (OSError, ValueError) as exc:
            raise TritonError.invalid_arg(f"cannot read model file {self.model_path}: {exc}") from None
        self.scale = float(spec.get("scale", self.parameters.get("scale", 1)))

    def predict(self, inputs: Arrays) -> Arrays:
        # Batched arrays in (first dimension: the requests of a batch, concatenated),
        # batched arrays out. Raise to fail the batch; return PartialResult to fail rows.
        return {
            name.replace("INPUT", "OUTPUT", 1): (x * self.scale).astype(x.dtype)
            for name, x in inputs.items()
        }
''')

_TEST = Template("""\
from pathlib import Path

import numpy as np
import pytest
from ${package} import ${cls}
from tritonpy_sdk import TritonError
from tritonpy_sdk.testing import BackendHarness

CONFIG = {
    "name": "m",
    "max_batch_size": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [3]}],
}


def _model(tmp_path: Path, text: str) -> Path:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.json").write_text(text)
    return tmp_path / "m"


def test_predicts(tmp_path: Path) -> None:
    with BackendHarness(${cls}, _model(tmp_path, '{"scale": 2}'), config=CONFIG) as h:
        out = h.infer({"INPUT0": np.array([[1, 2, 3]], np.float32)})
    np.testing.assert_array_equal(out["OUTPUT0"], [[2, 4, 6]])


def test_auto_complete_adds_the_output(tmp_path: Path) -> None:
    with BackendHarness(${cls}, _model(tmp_path, "{}"), config=CONFIG) as h:
        assert [o["name"] for o in h.model.config["output"]] == ["OUTPUT0"]


def test_a_batch_is_cut_back_per_request(tmp_path: Path) -> None:
    with BackendHarness(${cls}, _model(tmp_path, '{"scale": 3}'), config=CONFIG) as h:
        requests = [h.request({"INPUT0": np.full((n, 3), n, np.float32)}) for n in (1, 2)]
        first, second = h.execute(requests)
    assert first.outputs["OUTPUT0"].data.tolist() == [[3, 3, 3]]
    assert second.outputs["OUTPUT0"].data.tolist() == [[6, 6, 6], [6, 6, 6]]


def test_a_bad_model_file_fails_the_load(tmp_path: Path) -> None:
    with pytest.raises(TritonError, match="cannot read model file"):
        BackendHarness(${cls}, _model(tmp_path, "{nope"), config=CONFIG).start()
""")

_README = Template("""\
# tritonpy-backend-${dist}

A tritonpy backend, `backend: "${name}"`. It serves
version folders holding a `model.json` such as `{"scale": 2.0}`:
`OUTPUTn = INPUTn * scale`.

```
pip install -e .[test]      # the backend, and tritonpy + pytest for its tests
pytest                      # runs it with tritonpy_sdk.testing.BackendHarness, no server
tritonpy backends --check   # lists "${name}" once installed next to tritonpy
```

A model using it (`<repository>/<model>/config.pbtxt`; outputs are auto-completed):

```
backend: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
```

Edit `load` and `predict` in `src/${package}/__init__.py` (see "Writing a
backend" in the tritonpy documentation). The entry point in `pyproject.toml`
names the class; its name is the `backend:` value.
""")


def class_name(name: str) -> str:
    """``my_backend`` → ``MyBackend``."""
    return "".join(part.capitalize() for part in name.split("_") if part) or "Backend"


def new_backend(name: str, directory: Path | None = None) -> Path:
    """Write the package of backend ``name`` to ``directory`` (default:
    ``./tritonpy-backend-<name>``); ValueError for a bad name or a folder in use."""
    if not _NAME.match(name):
        raise ValueError(
            f"backend name '{name}' must start with a lowercase letter and hold only "
            "lowercase letters, digits and '_' (it is the `backend:` value and part of the package name)"
        )
    target = directory if directory is not None else Path(f"tritonpy-backend-{name.replace('_', '-')}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"'{target}' exists and is not an empty folder")
    package = f"tritonpy_backend_{name}"
    values = {
        "name": name,
        "dist": name.replace("_", "-"),
        "package": package,
        "cls": class_name(name),
        "sdk": ".".join(__version__.split(".")[:2]),
    }
    files = {
        "pyproject.toml": _PYPROJECT,
        "README.md": _README,
        f"src/{package}/__init__.py": _MODULE,
        f"tests/test_{name}.py": _TEST,
    }
    for relative, template in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.substitute(values), encoding="utf-8")
    (target / "src" / package / "py.typed").write_text("", encoding="utf-8")
    return target


def main(name: str, directory: str | None) -> int:
    """The ``new-backend`` command: write the package, say where and what next."""
    try:
        target = new_backend(name, Path(directory) if directory else None)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote backend '{name}' to {target}: pip install -e '{target}[test]', then run pytest there")
    return 0
