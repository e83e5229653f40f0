"""Model repositories on disk: model folders, version folders, version policies, labels."""

from ._labels import read_labels
from ._layout import RepoEntry, repository_path_error, scan_repositories, version_dirs
from ._versions import select_versions
from .namespaces import model_key

__all__ = [
    "RepoEntry",
    "model_key",
    "read_labels",
    "repository_path_error",
    "scan_repositories",
    "select_versions",
    "version_dirs",
]
