"""Run ``tritonpy serve`` on Triton's fixed ports and client scripts against it, alone.

NVIDIA's Python-backend example clients talk to ``localhost:8000`` / ``8001`` /
``8002`` and take no flags. Run as ``unshare -rn python tritonpy_netns.py REPO
OUT.json SCRIPT...`` this gives them those ports in a private network namespace
(its own loopback), so nothing else on the machine is in the way: it starts the
server with its default ports, waits until it is ready, runs each script (in its
own folder), stops the server and writes every script's exit code and output to
``OUT.json``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def usable() -> bool:
    """Whether this machine lets an unprivileged process have a network namespace."""
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _ready(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:8000/v2/health/ready", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


def main(repo: str, out: str, scripts: list[str]) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    log = Path(out).with_suffix(".server.log")
    with open(log, "w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "tritonpy", "serve", "--model-repository", repo, "--exit-on-error=false"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        results: dict[str, dict[str, object]] = {}
        try:
            if not _ready(180):
                raise SystemExit(f"the server did not become ready: see {log}")
            for script in scripts:
                try:
                    run = subprocess.run(
                        [sys.executable, script],
                        cwd=str(Path(script).parent),
                        capture_output=True,
                        text=True,
                        timeout=120,
                    )
                    results[script] = {"rc": run.returncode, "stdout": run.stdout, "stderr": run.stderr}
                except subprocess.TimeoutExpired as exc:
                    results[script] = {"rc": None, "stdout": str(exc.stdout), "stderr": "timed out"}
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    Path(out).write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
