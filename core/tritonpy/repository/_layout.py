"""Find model folders in one or more repository roots, and their version folders.

A repository root holds one folder per model; a model folder holds an optional
``config.pbtxt`` (or, with ``--model-config-name``, ``configs/<name>.pbtxt``) and
numeric version folders (``1/``, ``2/`` ...). Hidden entries are ignored, as are
non-numeric folders and plain files. A root registered with a name mapping
(``ModelManager.register_repository``) serves some of its folders under other
names. With model namespacing (``--model-namespacing``) each root is a namespace
of its own, and one name may be a model in several of them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .namespaces import model_key

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RepoEntry:
    """A model folder found in a repository. ``error`` is set for a clash;
    ``config_name`` is ``--model-config-name`` (``config_path``); ``mapped`` when
    the folder serves under a name its repository's registration gave it (its
    config's ``name`` is then replaced by ``name``, as Triton does). ``namespace``:
    its repository, as the server was given it, under model namespacing ("" without)."""

    name: str
    path: Path
    error: str | None = None
    config_name: str = ""
    mapped: bool = False
    namespace: str = ""

    @property
    def key(self) -> str:
        """What tells this model from every other: its name, or under model namespacing
        ``<namespace>::<name>`` (Triton's identifier, as its log shows it)."""
        return model_key(self.namespace, self.name)

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


def scan_repositories(
    roots: list[Path],
    config_name: str = "",
    mappings: Mapping[Path, Mapping[str, str]] | None = None,
    namespaces: Mapping[Path, str] | None = None,
) -> list[RepoEntry]:
    """All model folders under ``roots``, sorted by key, each to be read from its
    ``config_name`` config (``RepoEntry.config_path``). ``mappings`` gives, for a
    root, the name each of some of its folders serves under (``{folder: name}``);
    ``namespaces``, under model namespacing, each root's namespace.

    A model name found in two roots of one namespace is an error for that model
    (Triton refuses ambiguous names), unless one of them is a mapped name: that one
    is the model, as Triton finds a mapped name first. A root that is missing or a
    file raises ``FileNotFoundError``.
    """
    found: dict[tuple[str, str], list[Path]] = {}
    mapped: set[Path] = set()
    for root in roots:
        error = repository_path_error(root)
        if error is not None:
            raise FileNotFoundError(error)
        names = (mappings or {}).get(root, {})
        namespace = (namespaces or {}).get(root, "")
        for child in sorted(root.iterdir()):
            if child.name.startswith(".") or not child.is_dir():
                continue
            name = names.get(child.name)
            if name is not None:
                mapped.add(child)
            found.setdefault((namespace, name or child.name), []).append(child)
    result: list[RepoEntry] = []
    for namespace, name in sorted(found):
        paths = found[namespace, name]
        chosen = [p for p in paths if p in mapped] or paths
        if len(chosen) > 1:
            where = ", ".join(str(p.parent) for p in chosen)
            result.append(
                RepoEntry(
                    name,
                    chosen[0],
                    f"model '{name}' exists in multiple model repositories: {where}",
                    config_name,
                    namespace=namespace,
                )
            )
        else:
            entry = RepoEntry(name, chosen[0], None, config_name, chosen[0] in mapped, namespace)
            result.append(entry)
    return result


#: A model's folders that are not versions, passed over without a word (Triton's skip list:
#: warm-up data, sequence initial state, the ``configs`` of ``--model-config-name``).
_NOT_VERSIONS = frozenset({"warmup", "initial_state", "configs"})


def version_dirs(model_path: Path) -> dict[int, Path]:
    """The numeric version folders of a model: ``{version: path}``. Others are ignored with
    Triton's warning; so is a number with a leading zero (``01``), as Triton ignores it."""
    versions: dict[int, Path] = {}
    for child in model_path.iterdir():
        name = child.name
        if not child.is_dir() or name.startswith(".") or name in _NOT_VERSIONS:
            continue
        if not (name.isascii() and name.isdigit()):
            log.warning("ignore version directory '%s' which fails to convert to integral number", name)
        elif len(name) > 1 and name[0] == "0":
            log.warning(
                "ignore version directory '%s' which contains leading zeros in its directory name", name
            )
        else:
            versions[int(name)] = child  # 0 is a version too, as in Triton
    return versions
