"""Control calls from front-end workers to the core, and the core's broadcasts back.

Everything but inference is rare (health, metadata, model control, statistics,
trace and log settings, shared-memory registration), and the front ends call it
synchronously (``Server``'s methods). So it travels on plain blocking Unix
sockets, answered by a thread of the core per connection, never by the core's
event loop: a control call waits for neither the inferences in flight nor for
the loop to come round. Arguments and answers are pickled (control calls only;
both ends are this server's own processes).

- The core listens on a socket in a directory only its user can enter (its
  path is handed to the workers it starts; no other process can connect).
- Each worker thread that calls opens its own connection (``ControlClient``), so
  a model load on one thread never holds up a metadata call on another.
- Each worker has one *broadcast* connection, read by a thread of its own, on
  which the core tells every worker what changed (a region unregistered, the log
  settings) and waits for each one's acknowledgement before it answers the call
  that changed it: a client that unregisters a region through one worker and
  then sends a request through another finds it gone there too.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from tritonpy_sdk import ErrorCode, TritonError

log = logging.getLogger("tritonpy")

_LENGTH = struct.Struct("!I")
#: How long the core waits for a worker to acknowledge a broadcast (a stuck worker
#: must not hold model control up for ever: it is restarted when it dies).
BROADCAST_TIMEOUT = 10.0
#: What a call gets once the core process is gone.
CORE_GONE = "the server's core process is not answering (it stopped or died)"


def send_message(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def recv_message(sock: socket.socket) -> Any:
    (n,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
    return pickle.loads(_recv_exactly(sock, n))


class ControlServer:
    """The core's side: answers workers' calls from ``methods``, sends broadcasts."""

    def __init__(self, methods: dict[str, Callable[..., Any]]) -> None:
        self.methods = methods
        self._dir = tempfile.mkdtemp(prefix="tritonpy-")  # mode 0700: only this user enters it
        self.path = os.path.join(self._dir, "control")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._receivers: dict[int, socket.socket] = {}  # worker index → its broadcast connection
        self._callers: set[socket.socket] = set()
        self._broadcast_lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="tritonpy-control", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(conn,), name="tritonpy-control-call", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            role, index = recv_message(conn)
            if role == "broadcast":
                with self._broadcast_lock:
                    old = self._receivers.pop(index, None)
                    self._receivers[index] = conn
                if old is not None:
                    old.close()
                return
            with self._broadcast_lock:
                self._callers.add(conn)
            while True:
                method, args = recv_message(conn)
                send_message(conn, self._call(method, args))
        except (ConnectionError, OSError, EOFError):
            with self._broadcast_lock:
                self._callers.discard(conn)
            conn.close()

    def _call(self, method: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        fn = self.methods.get(method)
        if fn is None:
            return ("error", "INTERNAL", f"no control call '{method}'")
        try:
            return ("ok", fn(*args))
        except TritonError as exc:
            return ("error", exc.code.name, exc.message)
        except Exception as exc:
            log.error("control call %s failed: %s: %s", method, type(exc).__name__, exc, exc_info=exc)
            return ("error", "INTERNAL", f"{type(exc).__name__}: {exc}")

    def forget(self, index: int) -> None:
        """Drop worker ``index``'s broadcast connection (it died)."""
        with self._broadcast_lock:
            conn = self._receivers.pop(index, None)
        if conn is not None:
            conn.close()

    def broadcast(self, message: Any) -> None:
        """Send ``message`` to every worker; return once each acknowledged it (or failed to)."""
        with self._broadcast_lock:
            for index, conn in list(self._receivers.items()):
                try:
                    conn.settimeout(BROADCAST_TIMEOUT)
                    send_message(conn, message)
                    recv_message(conn)
                except (OSError, ConnectionError, EOFError) as exc:
                    log.warning("front-end worker %d did not take a broadcast: %s", index, exc)
                    self._receivers.pop(index, None)
                    conn.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._broadcast_lock:
            for conn in [*self._receivers.values(), *self._callers]:
                _hang_up(conn)
            self._receivers.clear()
            self._callers.clear()
        shutil.rmtree(self._dir, ignore_errors=True)


def _hang_up(conn: socket.socket) -> None:
    """Close ``conn`` so that a thread blocked reading it wakes up (``close`` alone does not)."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class ControlClient:
    """A worker's side: ``call`` from any thread (one connection per thread)."""

    def __init__(self, path: str, index: int) -> None:
        self.path = path
        self.index = index
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()

    def connect(self, role: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
            send_message(sock, (role, self.index))
        except OSError:
            sock.close()
            raise
        with self._lock:
            self._open.add(sock)
        return sock

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        sock.close()

    def close(self) -> None:
        """Close every connection of every thread."""
        with self._lock:
            socks, self._open = self._open, set()
        for sock in socks:
            _hang_up(sock)

    def call(self, method: str, *args: Any) -> Any:
        """The core's answer to ``method(*args)``; its ``TritonError`` raised here."""
        sock: socket.socket | None = getattr(self._local, "sock", None)
        try:
            if sock is None:
                sock = self._local.sock = self.connect("call")
            send_message(sock, (method, args))
            answer = recv_message(sock)
        except (OSError, ConnectionError, EOFError):
            self._local.sock = None
            if sock is not None:
                self._drop(sock)
            raise TritonError.unavailable(CORE_GONE) from None
        if answer[0] == "ok":
            return answer[1]
        _, code, message = answer
        raise TritonError(message, ErrorCode[code] if code in ErrorCode.__members__ else ErrorCode.INTERNAL)

    def receive_broadcasts(self, apply: Callable[[Any], None], on_gone: Callable[[], None]) -> None:
        """On a thread of its own: apply each broadcast and acknowledge it; ``on_gone`` once the core is."""
        try:
            sock = self.connect("broadcast")
        except OSError:
            on_gone()
            return
        try:
            while True:
                message = recv_message(sock)
                try:
                    apply(message)
                except Exception as exc:  # acknowledge anyway: the core must not wait for ever
                    log.error("applying %r failed: %s", message, exc, exc_info=exc)
                send_message(sock, "ok")
        except (OSError, ConnectionError, EOFError):
            self._drop(sock)
            on_gone()
