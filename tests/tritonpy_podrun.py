"""Start a command as a container would, on the ports it declares, and probe it.

Run as ``unshare -rn python tritonpy_podrun.py SPEC.json OUT.json`` (a private
network namespace, so the fixed ports of a manifest are free). SPEC holds
``argv`` (the command line), ``tcp`` (ports that must accept connections),
``http`` (``[port, path]`` that must answer 200: the probes), ``exec`` (commands
that must exit 0 while it is ready, such as the image's HEALTHCHECK) and
``grace`` (seconds the process has after SIGTERM). OUT gets what was seen.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def main(spec_path: str, out_path: str) -> None:
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    log = Path(out_path).with_suffix(".log")
    result: dict[str, Any] = {"tcp": {}, "http": {}, "exec": [], "ready": False}
    with open(log, "w") as sink:
        proc = subprocess.Popen(spec["argv"], stdout=sink, stderr=subprocess.STDOUT)
        try:
            port, path = spec["http"][-1]  # the readiness probe comes last
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if _status(port, path) == 200:
                    result["ready"] = True
                    break
                time.sleep(0.2)
            for port in spec["tcp"]:
                result["tcp"][str(port)] = _open(port)
            for port, path in spec["http"]:
                result["http"][f"{port}{path}"] = _status(port, path)
            for argv in spec["exec"]:
                result["exec"].append(subprocess.run(argv, capture_output=True, timeout=30).returncode)
        finally:
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                result["exit"] = proc.wait(spec["grace"])
            except subprocess.TimeoutExpired:
                proc.kill()
                result["exit"] = f"still running {spec['grace']} s after SIGTERM"
            result["stop_s"] = round(time.monotonic() - start, 2)
    result["log"] = log.read_text()[-4000:]
    Path(out_path).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
