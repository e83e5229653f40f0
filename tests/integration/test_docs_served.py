"""The README's and the quickstart's snippets work as pasted, against the example repository.

Each Python block of README.md and docs/quickstart.md runs as a script (the
network ones with ``localhost:8000`` pointed at a test server); each ``curl``
inference command of docs/quickstart.md and docs/http_api.md is sent as written
and answered with 200 (and with the response the page shows, where it shows one).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"


def blocks(page: str, language: str) -> list[str]:
    """The fenced code blocks of ``page`` (relative to the repository) in ``language``."""
    text = (ROOT / page).read_text()
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _run(code: str, cwd: Path = ROOT) -> str:
    run = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{code}\n---\n{run.stderr}"
    return run.stdout


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.md"])
def test_python_snippets_run_as_pasted(server_factory, page: str) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([EXAMPLES])
    snippets = blocks(page, "python")
    assert snippets
    for code in snippets:
        out = _run(code.replace("localhost:8000", server.url))
        # simple adds and subtracts; the first row of INPUT0 + INPUT1 or INPUT0 - INPUT1 is printed
        assert re.search(r"\[\[\s*-?\d+\s+-?\d+", out), out


def test_readme_in_process_snippet_is_self_contained() -> None:
    (code,) = [c for c in blocks("README.md", "python") if "tritonpy.Server" in c]
    out = _run(code)
    assert "[[ 1  2  3  4" in out and "[[-1  0  1  2" in out, out


def _curl_requests(page: str) -> list[tuple[str, bytes, str | None]]:
    """``(url, body, shown response)`` of each ``curl ... -d`` inference command of ``page``."""
    text = (ROOT / page).read_text()
    found = []
    for match in re.finditer(r"^```bash\n(curl .*?)^```\n(?:\n```json\n(.*?)^```)?", text, re.S | re.M):
        args = shlex.split(match.group(1))
        if "-d" not in args or not any("/infer" in a for a in args):
            continue
        url = next(a for a in args if a.startswith("localhost:8000/"))
        found.append((url, args[args.index("-d") + 1].encode(), match.group(2)))
    return found


@pytest.mark.parametrize("page", ["docs/quickstart.md", "docs/http_api.md"])
def test_curl_inference_examples_work_as_pasted(server_factory, page: str) -> None:  # type: ignore[no-untyped-def]
    server = server_factory([EXAMPLES])
    requests = _curl_requests(page)
    assert requests
    for url, body, shown in requests:
        url = "http://" + url.replace("localhost:8000", server.url)
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=30) as response:
            assert response.status == 200
            answer = json.loads(response.read())
        if shown is not None:
            assert answer == json.loads(shown)


def test_your_own_model_walkthrough_serves_its_three_models(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """docs/your_own_model.md from an empty folder: each file it shows under a bold path is
    written there, each other Python block runs in order, then the client block queries the
    repository they made."""
    text = (ROOT / "docs" / "your_own_model.md").read_text()
    shown = re.findall(r"^\*\*`([^`]+)`\*\*\n\n```\w*\n(.*?)^```", text, flags=re.S | re.M)
    for path, content in shown:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    files = {content for _, content in shown}
    scripts = [code for code in blocks("docs/your_own_model.md", "python") if code not in files]
    clients = [code for code in scripts if "localhost:8000" in code]
    assert len(scripts) == 3 and len(clients) == 1
    for code in scripts:
        if code not in clients:
            _run(code, cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "my_repository").iterdir()) == ["doubler", "fraud", "greeter"]
    assert not (tmp_path / "my_repository" / "doubler" / "config.pbtxt").exists()
    server = server_factory([tmp_path / "my_repository"])
    out = _run(clients[0].replace("localhost:8000", server.url))
    lines = out.splitlines()
    assert lines[0] == "[[ 0.  2.  4.  6.]" and lines[1] == " [ 8. 10. 12. 14.]]", out
    assert lines[2] == "[[b'hello triton']]", out
    assert lines[3] == "[1 0]", out
