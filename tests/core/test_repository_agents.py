"""Repository agents: Triton's ``checksum`` agent verifies a model's files before each load;
an agent tritonpy does not provide fails the load instead of being skipped."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import tritonpy
from tritonpy.repository.agents import verify_checksum
from tritonpy_scale import CONFIG, Scale
from tritonpy_sdk import ErrorCode, TritonError


def write_model(repo: Path, name: str, k: str, agents: str = "") -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.txt").write_text(k)
    (folder / "config.pbtxt").write_text(CONFIG + agents)
    return folder


def make_server(repo: Path, **options: object) -> tritonpy.Server:
    server = tritonpy.Server(model_repository=repo, **options)
    server.backends.register("scale", Scale())
    return server


def infer(server: tritonpy.Server, name: str) -> int:
    return int(server.model(name).predict({"INPUT0": np.array([[1, 1]], np.int32)})["OUTPUT0"][0, 0])


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def _agents(*parameters: tuple[str, str], name: str = "checksum") -> str:
    entries = " ".join(f'parameters {{ key: "{k}" value: "{v}" }}' for k, v in parameters)
    return f'model_repository_agents {{ agents [ {{ name: "{name}" {entries} }} ] }}\n'


def test_checksums_of_the_model_files(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.txt").write_bytes(b"7\n")
    good = _md5(tmp_path / "1" / "model.txt")
    verify_checksum(tmp_path, "MD5:1/model.txt", good)
    verify_checksum(tmp_path, "md5:1/model.txt", good)  # the algorithm in any case
    cases = [
        (
            "MD5:1/model.txt",
            "0" * 32,
            ErrorCode.INVALID_ARG,
            f"Mismatched MD5 hash for file 1/model.txt, expect: {'0' * 32}, got: {good}",
        ),
        ("1/model.txt", good, ErrorCode.INVALID_ARG, "failed to parse key: 1/model.txt"),
        ("SHA256:1/model.txt", good, ErrorCode.UNSUPPORTED, "Unsupported checksum algorithm: SHA256"),
        (
            "MD5:1/gone.txt",
            good,
            ErrorCode.INVALID_ARG,
            "failed to open text file for read 1/gone.txt: No such file or directory",
        ),
    ]
    for key, value, code, message in cases:
        with pytest.raises(TritonError) as err:
            verify_checksum(tmp_path, key, value)
        assert (err.value.code, err.value.message) == (code, message)


def test_a_model_loads_only_while_its_files_match(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    folder = write_model(repo, "a", "2")
    model_file = folder / "1" / "model.txt"
    good = _md5(model_file)
    (folder / "config.pbtxt").write_text(CONFIG + _agents(("MD5:1/model.txt", good)))
    write_model(repo, "b", "3")
    with make_server(repo, model_control_mode="explicit", load_model=["a", "b"]) as server:
        assert infer(server, "a") == 2
        model_file.write_text("9")  # changed on disk: the next load checks again, and refuses
        with pytest.raises(TritonError) as err:
            server.load_model("a")
        assert err.value.code is ErrorCode.INTERNAL
        assert err.value.message == (
            "failed to load 'a', failed to poll from model repository: Mismatched MD5 hash for file "
            f"1/model.txt, expect: {good}, got: {_md5(model_file)}"
        )
        assert infer(server, "a") == 2  # the version loaded before keeps serving
        assert infer(server, "b") == 3  # the others serve on


def test_mismatch_at_startup_leaves_the_model_unavailable_with_the_reason(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_model(repo, "a", "2", _agents(("MD5:1/model.txt", "0" * 32)))
    write_model(repo, "b", "3")
    with make_server(repo, strict_readiness=False) as server:
        assert infer(server, "b") == 3
        with pytest.raises(TritonError, match="'a' has no available versions"):
            infer(server, "a")
        reason = next(e for e in server.repository_index() if e["name"] == "a")["reason"]
        assert reason.startswith("Invalid argument: Mismatched MD5 hash for file 1/model.txt, expect: 0000")
        assert {"name": "b", "version": "1", "state": "READY"} in server.repository_index()


def test_an_agent_tritonpy_does_not_provide_fails_the_load(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_model(repo, "a", "2", _agents(("key", "value"), name="decrypt"))
    with make_server(repo, model_control_mode="explicit") as server:
        with pytest.raises(TritonError) as err:
            server.load_model("a")
    assert err.value.message == (
        "failed to load 'a', failed to poll from model repository: unable to find "
        "'libtritonrepoagent_decrypt.so' for repo agent 'decrypt': tritonpy runs no shared-library "
        "repository agents; it provides 'checksum' itself"
    )


def test_a_load_with_a_config_override_runs_its_agents(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    folder = write_model(repo, "a", "2")
    good = _md5(folder / "1" / "model.txt")
    with make_server(repo, model_control_mode="explicit") as server:
        agents = {"agents": [{"name": "checksum", "parameters": {"MD5:1/model.txt": good}}]}
        override = {
            "backend": "scale",
            "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]}],
            "model_repository_agents": agents,
        }
        server.load_model("a", config=json.dumps(override))
        assert infer(server, "a") == 2
        agents["agents"][0]["parameters"] = {"MD5:1/model.txt": "f" * 32}
        with pytest.raises(TritonError, match="Mismatched MD5 hash for file 1/model.txt, expect: f{32}"):
            server.load_model("a", config=json.dumps(override))
        assert infer(server, "a") == 2  # refused before anything changed: the loaded model serves on
