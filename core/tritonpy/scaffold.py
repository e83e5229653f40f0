"""``tritonpy new-backend NAME [DIR]``: write an installable backend package to start from.

The package is a ``Predictor`` (the SDK's high-level layer) with its entry
point, tests that run it with ``tritonpy_sdk.testing.BackendHarness``, and a
README. It depends on ``tritonpy-sdk`` only; ``tritonpy`` and ``pytest`` are
its test extras.

Its files are ``scaffold_template/`` beside this module (package data), the one
place the layout of a backend package is written: each ``X.tmpl`` there becomes
``X``, with ``${name}`` (the backend name), ``${dist}`` (it with dashes),
``${package}`` (the import name), ``${cls}`` (the class) and ``${sdk}`` (the
SDK version to require) replaced in its path and its text (``string.Template``;
``$$`` is a literal ``$``). The tests scaffold a package, run its tests, lint
it, install it with pip and serve it, so the template cannot rot.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from string import Template

from ._version import __version__

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: The package template (package data of the wheel: the server is never imported from a zip).
TEMPLATE = Path(__file__).resolve().parent / "scaffold_template"
_SUFFIX = ".tmpl"


def template_files() -> Iterator[tuple[str, str]]:
    """(path relative to the package, placeholders still in it; text) of each template file."""
    for path in sorted(TEMPLATE.rglob(f"*{_SUFFIX}")):
        yield path.relative_to(TEMPLATE).as_posix()[: -len(_SUFFIX)], path.read_text(encoding="utf-8")


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
    rendered = [
        (Template(relative).substitute(values), Template(text).substitute(values))
        for relative, text in template_files()
    ]
    for relative, text in rendered:
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
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
