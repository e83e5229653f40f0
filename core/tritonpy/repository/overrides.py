"""What a load request may bring along: a config to use instead of ``config.pbtxt``,
and the model's files themselves (Triton's ``config`` and ``file:<path>`` load
parameters).

Files are written only inside a private temporary folder made for that load
(mode 0700); a name that is absolute, climbs with ``..``, is empty or would pass
through a link is refused before anything is written. The folder lives as long
as the model versions loaded from it and is removed after they unload.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tritonpy_sdk import TritonError

from ..config import ModelConfig, config_from_dict

log = logging.getLogger(__name__)

#: The prefix of a load parameter that carries one model file.
FILE_PREFIX = "file:"


@dataclass(eq=False)
class Override:
    """A load's own config and, when it brought files, the folder they were written to."""

    config: ModelConfig
    #: The text the config came in (two loads with the same text load the same model).
    text: str
    folder: Path | None = None
    _removed: bool = field(default=False, repr=False)

    def remove(self) -> None:
        """Delete the files folder (once its model versions are unloaded)."""
        if self.folder is not None and not self._removed:
            self._removed = True
            shutil.rmtree(self.folder.parent, ignore_errors=True)


def split_load_parameters(model: str, parameters: Mapping[str, Any]) -> tuple[str, dict[str, bytes]]:
    """A load's parameters as the front ends decoded them → ``(config, files)``.

    ``config`` must be text (the JSON of a ModelConfig) and each ``file:<path>``
    bytes; anything else is refused (INVALID_ARG), as Triton refuses it.
    """
    config = ""
    files: dict[str, bytes] = {}
    for key, value in parameters.items():
        if key == "config":
            if not isinstance(value, str):
                raise TritonError.invalid_arg(
                    f"failed to load '{model}': the 'config' parameter must be a string "
                    "(the JSON of a model configuration)"
                )
            config = value
        elif key.startswith(FILE_PREFIX):
            if not isinstance(value, bytes | bytearray | memoryview):
                raise TritonError.invalid_arg(
                    f"failed to load '{model}': file parameter '{key}' must hold the file's bytes"
                )
            files[key[len(FILE_PREFIX) :]] = bytes(value)
        else:
            raise TritonError.invalid_arg(
                f"failed to load '{model}': unknown load parameter '{key}' "
                f"(a load takes 'config' and '{FILE_PREFIX}<path>')"
            )
    return config, files


def parse_override(name: str, config: str | None, files: Mapping[str, bytes] | None) -> Override | None:
    """The override a load asks for (None: load what the repository holds).

    ``config`` is Triton's JSON form of a ModelConfig; it replaces ``config.pbtxt``
    whole. ``files`` maps ``<version>/<path>`` (the part after ``file:``) to contents;
    they need a ``config`` (Triton's rule: the model is then made from the request
    only). Raises TritonError INVALID_ARG for what cannot be used.
    """
    if files and not config:
        raise TritonError.invalid_arg(
            f"failed to load '{name}': a load with '{FILE_PREFIX}' parameters needs a 'config' parameter too"
        )
    if not config:
        return None
    model_config = _parse_config(name, config)
    override = Override(model_config, config)
    if files:
        override.folder = _write_files(name, files)
    return override


def _parse_config(name: str, text: str) -> ModelConfig:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TritonError.invalid_arg(
            f"failed to load '{name}': the 'config' parameter is not JSON: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise TritonError.invalid_arg(
            f"failed to load '{name}': the 'config' parameter must be a JSON object"
        )
    try:
        config = config_from_dict(data, source="'config' parameter")
    except TritonError as exc:
        raise TritonError.invalid_arg(f"failed to load '{name}': {exc.message}") from None
    if config.name and config.name != name:
        raise TritonError.invalid_arg(
            f"failed to load '{name}': the 'config' parameter names model '{config.name}'"
        )
    config.name = name
    return config


def check_file_name(model: str, path: str) -> PurePosixPath:
    """The path inside the model folder that ``path`` (after ``file:``) names, or
    TritonError INVALID_ARG. As Triton joins it to the model folder, a leading ``/``
    starts at the folder and ``..`` may be used as long as the path stays inside."""
    parts = path.split("/")
    kept: list[str] = []
    problem = None
    for part in parts:
        if part == "..":
            if not kept:
                problem = "a path that leaves the model folder"
                break
            kept.pop()
        elif part not in ("", "."):
            kept.append(part)
    if "\x00" in path:
        problem = "a NUL character"
    elif problem is None and (not kept or parts[-1] in ("", ".", "..")):
        problem = "no file name"
    if problem is not None:
        raise TritonError.invalid_arg(
            f"failed to load '{model}': file parameter '{FILE_PREFIX}{path}' has {problem}; "
            "model files must be named by a path inside the model folder, such as '1/model.onnx'"
        )
    return PurePosixPath(*kept)


def _write_files(model: str, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` into a fresh private folder; return its model folder."""
    checked = [(check_file_name(model, name), data) for name, data in files.items()]
    root = Path(tempfile.mkdtemp(prefix="tritonpy-load-"))  # 0700, ours alone
    folder = root / model
    try:
        folder.mkdir()
        for relative, data in checked:
            try:
                _write_one(folder, relative, data)
            except OSError as exc:  # e.g. a name longer than the file system takes
                raise TritonError.internal(
                    f"failed to load '{model}', failed to poll from model repository: "
                    f"cannot write file parameter '{FILE_PREFIX}{relative}': {exc.strerror}"
                ) from None
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    log.info("wrote %d file(s) of the load of '%s' to a temporary folder", len(checked), model)
    return folder


def _write_one(folder: Path, relative: PurePosixPath, data: bytes) -> None:
    """Create ``folder/relative`` (parents included) without following any link."""
    here = folder
    for part in relative.parts[:-1]:
        here = here / part
        try:
            here.mkdir()
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(here).st_mode):  # a file of this load, or a link
                raise TritonError.invalid_arg(
                    f"file parameter '{FILE_PREFIX}{relative}' names a folder that is a file of the same load"
                ) from None
    target = here / relative.name
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise TritonError.invalid_arg(
            f"file parameter '{FILE_PREFIX}{relative}' names a folder or a file given twice"
        ) from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def refuse_repository_name(repository: str) -> None:
    """UNSUPPORTED when a repository request names a repository, as Triton answers:
    its repositories form one namespace, and a name in the request selects nothing."""
    if repository:
        raise TritonError.unsupported("'repository_name' specification is not supported")
