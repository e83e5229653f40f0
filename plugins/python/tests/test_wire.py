"""The server↔stub link's tensor transport past its arenas: files of their own, and
messages larger than the socket's buffer."""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import pytest
from triton_python_backend_utils._wire import SPILL_BYTES, Arena, Link, remove_spills


@pytest.fixture
def links(tmp_path: Path) -> Iterator[tuple[Link, Link]]:
    """A server's and a stub's link over a socket pair, with 1 MiB arenas."""
    ours, theirs = socket.socketpair()
    p2c = Arena(str(tmp_path / "p2c"), 1 << 20, create=True)
    c2p = Arena(str(tmp_path / "c2p"), 1 << 20, create=True)
    server = Link(Connection(ours.detach()), mine=p2c, theirs=c2p)
    stub = Link(Connection(theirs.detach()), mine=c2p, theirs=p2c)
    yield server, stub
    server.conn.close()
    stub.conn.close()


def _files(tmp_path: Path) -> list[str]:
    return sorted(os.listdir(tmp_path))


def test_a_tensor_past_the_arena_gets_a_file_that_its_reader_removes(
    links: tuple[Link, Link], tmp_path: Path
) -> None:
    server, stub = links
    big = np.arange(SPILL_BYTES, dtype=np.float32).reshape(4, -1)  # 4 MiB, past the 1 MiB arena
    text = np.array([b"x" * SPILL_BYTES, b"", "h\u00e9".encode()], dtype=np.object_)
    server.send({"op": "exec", "i": [server.put("A", "FP32", big), server.put("T", "BYTES", text)]})
    assert _files(tmp_path) == ["c2p", "p2c", "p2c-0", "p2c-1"]  # beside the writer's arena
    assert server.mine.in_use == 0  # the arena is not involved
    descs = stub.recv()["i"]
    assert [d[3] for d in descs] == ["f", "f"]
    view = stub.get(descs[0])
    strings = stub.get(descs[1])
    assert _files(tmp_path) == ["c2p", "p2c"]  # removed once mapped: nothing to hand back
    np.testing.assert_array_equal(view, big)
    assert view.shape == (4, SPILL_BYTES // 4) and view.dtype == np.float32
    np.testing.assert_array_equal(strings, text)
    big[0, 0] = -1  # the reader sees the writer's copy, not the caller's array
    assert view[0, 0] == 0
    assert not stub._releases


def test_a_tensor_under_the_spill_size_that_does_not_fit_travels_inline(links: tuple[Link, Link]) -> None:
    server, _ = links
    held = server.mine.alloc((1 << 20) - 4096)  # the arena is nearly full
    assert held is not None
    desc = server.put("A", "FP32", np.ones(SPILL_BYTES // 8, np.float32))  # 512 KiB
    assert desc[3] == "i"


def test_no_room_for_a_file_sends_the_tensor_inline(
    links: tuple[Link, Link], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, stub = links

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    big = np.ones(SPILL_BYTES, np.float32)
    desc = server.put("A", "FP32", big)
    assert desc[3] == "i"
    assert _files(tmp_path) == ["c2p", "p2c"]  # the file that found no room is gone
    np.testing.assert_array_equal(stub.get(desc), big)


def test_files_nobody_read_are_removed_by_their_arenas_name(links: tuple[Link, Link], tmp_path: Path) -> None:
    """A process that died before reading its message leaves its tensors' files: the
    server removes them by the arena's name (when the stub ends, and at exit)."""
    server, stub = links
    for _ in range(2):
        server.put("A", "FP32", np.ones(SPILL_BYTES, np.float32))
    stub.put("B", "FP32", np.ones(SPILL_BYTES, np.float32))
    assert _files(tmp_path) == ["c2p", "c2p-0", "p2c", "p2c-0", "p2c-1"]
    remove_spills(server.mine.path)
    assert _files(tmp_path) == ["c2p", "c2p-0", "p2c"]
    remove_spills(str(tmp_path / "c2p"))
    assert _files(tmp_path) == ["c2p", "p2c"]  # the arenas themselves stay


def test_a_message_larger_than_the_socket_buffer_waits_for_room(links: tuple[Link, Link]) -> None:
    """The server's end of the socket is non-blocking under uvloop: a large message
    (a tensor inline because shared memory is full) waits for room, never fails."""
    server, stub = links
    os.set_blocking(server.conn.fileno(), False)
    payload = bytes(range(256)) * (16 << 10)  # 4 MiB: many times a socket's buffer
    received: list[dict[str, object]] = []
    reader = threading.Thread(target=lambda: received.append(stub.recv()))
    reader.start()
    server.send({"op": "send", "r": payload})
    reader.join(timeout=60)
    assert received == [{"op": "send", "r": payload}]
