"""Find model folders in one or more repository roots, and their version folders.

A repository root holds one folder per model; a model folder holds an optional
``config.pbtxt`` (or, with ``--model-config-name``, ``configs/<name>.pbtxt``) and
numeric version folders (``1/``, ``2/`` ...). Hidden entries are ignored, as are
non-numeric folders and plain files.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RepoEntry:
    """A model folder found in a repository. ``error`` is set for a clash;
    ``config_name`` is ``--model-config-name`` (``config_path``)."""

    name: str
    path: Path
    error: str | None = None
    config_name: str = ""

    @property
    def config_path(self) -> Path:
        """The config file the model is read from, as Triton chooses it: the folder's
        ``configs/<config_name>.pbtxt`` when there is one, else its ``config.pbtxt``."""
        if self.config_name:
            custom = self.path / "configs" / f"{self.config_name}.pbtxt"
            if custom.is_file():
                return custom
        return self.path / "config.pbtxt"


def repository_path_error(root: Path) -> str | None:
    """Why ``root`` cannot be a model repository (missing, or not a folder), or None."""
    if root.is_dir():
        return None
    if root.exists():  # Triton's wording, with the path
        return f"repository path is not a valid directory: '{root}' is a file"
    return f"failed to stat model repository path '{root}': no such directory"


def scan_repositories(roots: list[Path], config_name: str = "") -> list[RepoEntry]:
    """All model folders under ``roots``, sorted by name, each to be read from its
    ``config_name`` config (``RepoEntry.config_path``).

    A model name found in two roots is an error for that model (Triton refuses
    ambiguous names); a root that is missing or a file raises ``FileNotFoundError``.
    """
    found: dict[str, list[Path]] = {}
    for root in roots:
        error = repository_path_error(root)
        if error is not None:
            raise FileNotFoundError(error)
        for child in sorted(root.iterdir()):
            if child.name.startswith(".") or not child.is_dir():
                continue
            found.setdefault(child.name, []).append(child)
    result: list[RepoEntry] = []
    for name in sorted(found):
        paths = found[name]
        if len(paths) > 1:
            where = ", ".join(str(p.parent) for p in paths)
            result.append(
                RepoEntry(
                    name,
                    paths[0],
                    f"model '{name}' exists in multiple model repositories: {where}",
                    config_name,
                )
            )
        else:
            result.append(RepoEntry(name, paths[0], config_name=config_name))
    return result


def version_dirs(model_path: Path) -> dict[int, Path]:
    """The numeric version folders of a model: ``{version: path}``."""
    versions: dict[int, Path] = {}
    for child in model_path.iterdir():
        if not child.is_dir() or child.name.startswith("."):
            continue
        if not child.name.isdigit():
            log.debug("ignoring non-numeric folder %s in model %s", child.name, model_path.name)
            continue
        versions[int(child.name)] = child  # 0 is a version too, as in Triton
    return versions
