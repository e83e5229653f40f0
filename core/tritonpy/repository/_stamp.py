"""A model folder's stamp: what tells whether its files changed since it was loaded."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def folder_stamp(path: Path, skip: Path | None = None) -> str:
    """A digest of the names, sizes and modification times of everything under
    ``path`` (hidden entries left out, as the repository scan leaves them out;
    ``skip``, a file, too: the config, for ``files_stamp``).

    Two equal stamps mean nothing Triton looks at changed: the config, label
    files, version folders and the model files in them. A folder that cannot be
    read stamps as such, so it differs from any readable state.
    """
    digest = hashlib.blake2b(digest_size=16)
    skipped = str(skip) if skip is not None else None
    try:
        for root, dirs, files in os.walk(path, onerror=_raise):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            here = os.path.relpath(root, path)
            for name in sorted(files):
                file = os.path.join(root, name)
                if name.startswith(".") or file == skipped:
                    continue
                try:
                    st = os.stat(file)
                except OSError:  # removed while we looked, or a dangling link
                    digest.update(f"{here}/{name}:gone\n".encode())
                    continue
                digest.update(f"{here}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
            digest.update(f"{here}/\n".encode())
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return digest.hexdigest()


def _raise(exc: OSError) -> None:
    raise exc
