"""Repository agents (``model_repository_agents`` in a model's config), run before its load.

Triton runs the agents a config names, in order, from shared libraries in
``--repoagent-directory``; a failing agent fails the load at the
repository-poll stage. tritonpy provides Triton's ``checksum`` agent itself:

    model_repository_agents {
      agents [ { name: "checksum", parameters { key: "MD5:1/model.onnx" value: "<md5 hex>" } } ]
    }

Each parameter's key is ``<algorithm>:<path relative to the model folder>``
and its value the file's expected digest; MD5 is the algorithm Triton's agent
knows. The messages are the agent's. An agent tritonpy does not provide fails
the load (as a missing agent library does in Triton), rather than being
skipped: a model that asks for a check is never served unchecked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tritonpy_sdk import ErrorCode, TritonError

from ..config import ModelConfig

#: The agents tritonpy runs itself.
PROVIDED = ("checksum",)
#: Bytes read at a time when hashing a file (model files may be gigabytes).
_CHUNK = 1 << 20


def run_agents(config: ModelConfig, model_dir: Path) -> None:
    """Run the load action of each agent ``config`` names on ``model_dir``; the first
    failure raises its ``TritonError``."""
    for agent in config.model_repository_agents.agents:
        if agent.name == "checksum":
            for key, value in agent.parameters.items():
                verify_checksum(model_dir, key, value)
        else:
            raise TritonError.invalid_arg(
                f"unable to find 'libtritonrepoagent_{agent.name}.so' for repo agent '{agent.name}': "
                f"tritonpy runs no shared-library repository agents; it provides "
                f"{', '.join(repr(p) for p in PROVIDED)} itself"
            )


def verify_checksum(model_dir: Path, key: str, expected: str) -> None:
    """One ``checksum`` parameter: ``key`` is ``<algorithm>:<relative path>``."""
    algorithm, sep, relative = key.partition(":")
    if not sep:
        raise TritonError.invalid_arg(f"failed to parse key: {key}")
    if algorithm.lower() != "md5":
        raise TritonError(f"Unsupported checksum algorithm: {algorithm}", ErrorCode.UNSUPPORTED)
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with open(os.path.join(model_dir, relative), "rb") as file:
            while chunk := file.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise TritonError.invalid_arg(
            f"failed to open text file for read {relative}: {exc.strerror or exc}"
        ) from None
    got = digest.hexdigest()
    if got != expected:
        raise TritonError.invalid_arg(
            f"Mismatched MD5 hash for file {relative}, expect: {expected}, got: {got}"
        )
