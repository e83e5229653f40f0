"""``python -m tritonpy serve`` in a subprocess on free loopback ports, for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

#: Ports this process has handed out: a closed port can come back from the next bind
#: to port 0, and one server's HTTP and metrics ports must differ.
_GIVEN: set[int] = set()


def free_port() -> int:
    """A loopback port free now and never handed out before by this process."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


class ServerProcess:
    """A ``tritonpy serve`` process on a free loopback port; with ``frontend_workers``
    above 1, ``--frontend-workers N`` (N processes serve HTTP and gRPC)."""

    def __init__(
        self,
        repos: list[Path],
        *flags: str,
        log: Path,
        env: dict[str, str] | None = None,
        wait_ready: bool = True,
        frontend_workers: int = 1,
    ) -> None:
        self.frontend_workers = frontend_workers
        self.port = free_port()
        self.url = f"127.0.0.1:{self.port}"
        self.grpc_port = free_port()
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.metrics_port = free_port()
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.log = log
        cmd = [
            sys.executable,
            "-m",
            "tritonpy",
            "serve",
            "--http-address",
            "127.0.0.1",
            "--http-port",
            str(self.port),
            "--grpc-address",
            "127.0.0.1",
            "--grpc-port",
            str(self.grpc_port),
            "--metrics-port",
            str(self.metrics_port),
        ]
        for repo in repos:
            cmd += ["--model-repository", str(repo)]
        if frontend_workers > 1:
            cmd += ["--frontend-workers", str(frontend_workers)]
        cmd += list(flags)
        self._out = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        if wait_ready:
            try:
                self.wait_live()
            except BaseException:
                self.stop()  # never leave a server behind a failed start
                raise

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.log.read_text()

    def wait_for_output(self, text: str, timeout: float = 10.0) -> str:
        """The server's output once it contains ``text`` (it is printed asynchronously)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.output()
            if text in out:
                return out
            time.sleep(0.02)
        raise AssertionError(f"{text!r} never appeared in the server output:\n{self.output()}")

    def wait_live(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"http://{self.url}/v2/health/live", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not live after {timeout}s:\n{self.output()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode
