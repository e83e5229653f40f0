"""tritonpy.ipc.link: frames and shared-memory blocks between two real processes."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tritonpy.ipc.link import Arena, Link

# The other process: opens its end of the link and behaves as its mode says.
CHILD = r"""
import asyncio, os, socket, struct, sys, time
from tritonpy.ipc.link import Link

fd, mode = int(sys.argv[1]), sys.argv[2]

async def main():
    done = asyncio.get_running_loop().create_future()
    link = None

    def on_frames(frames):
        for frame in frames:
            if mode == "die":
                os._exit(3)
            if frame == b"bye":
                done.set_result(None)
            elif mode in ("echo", "stall"):
                link.send(frame)
            elif frame == b"stat":
                link.send(struct.pack("=Q", link.mine.in_use))
            else:  # "blocks": sum the peer's block, answer with it reversed in a block of mine
                offset, nbytes = struct.unpack("=QQ", frame)
                data = bytes(link.theirs(offset, nbytes))
                link.release(offset)
                mine = link.put(data[::-1])
                link.send(struct.pack("=QQQ", sum(data), mine, nbytes))

    def on_close(exc):
        if not done.done():
            done.set_result(None)

    link = await Link.open(socket.socket(fileno=fd), on_frames, on_close)
    if mode == "stall":
        time.sleep(1.0)  # read nothing for a while (the loop is blocked), then echo
    await done
    link.close()

asyncio.run(main())
"""

Frames = list[bytes]


def spawn(mode: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(theirs.fileno()), mode], pass_fds=[theirs.fileno()]
    )
    theirs.close()
    return child, mine


def run_with_child(mode: str, body: Callable[[Link, asyncio.Queue[bytes]], Awaitable[Any]]) -> Any:
    """Open a link to a child in ``mode`` and run ``body`` with it and the queue of frames received."""
    child, sock = spawn(mode)

    async def main() -> Any:
        received: asyncio.Queue[bytes] = asyncio.Queue()

        def on_frames(frames: Frames) -> None:
            for frame in frames:
                received.put_nowait(frame)

        link = await Link.open(sock, on_frames)
        try:
            return await asyncio.wait_for(body(link, received), 60)
        finally:
            if not link.closed:
                link.send(b"bye")
                await asyncio.sleep(0)
            link.close()

    try:
        return asyncio.run(main())
    finally:
        try:
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()


def test_frames_arrive_whole_and_in_order() -> None:
    sizes = [i * 37 % 3001 for i in range(2000)]  # 0 bytes included

    async def body(link: Link, received: asyncio.Queue[bytes]) -> None:
        sent = [struct.pack("=I", i) + bytes([i % 251]) * size for i, size in enumerate(sizes)]
        for frame in sent:
            link.send(frame[:4], frame[4:])  # a frame of two parts
        for frame in sent:
            assert await received.get() == frame

    run_with_child("echo", body)


def test_frames_larger_than_every_buffer() -> None:
    big = bytes(range(256)) * (32 << 12)  # 8 MiB: more than the socket's and the reader's buffers

    async def body(link: Link, received: asyncio.Queue[bytes]) -> None:
        link.send(big)
        link.send(b"after")
        await link.drain()
        assert await received.get() == big
        assert await received.get() == b"after"
        assert len(link._buf) <= 1 << 20  # the read buffer grown for it was given back

    run_with_child("echo", body)


def test_a_stalled_reader_pushes_back_and_nothing_is_lost() -> None:
    frame = b"x" * (1 << 20)

    async def body(link: Link, received: asyncio.Queue[bytes]) -> None:
        for i in range(32):
            link.send(struct.pack("=I", i), frame)
        # 32 MiB cannot all be in the socket: the rest waits here, past the high-water mark.
        assert link._paused
        await link.drain()
        for i in range(32):
            assert await received.get() == struct.pack("=I", i) + frame

    run_with_child("stall", body)


def test_blocks_travel_by_offset_and_come_back_when_released() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB

    async def body(link: Link, received: asyncio.Queue[bytes]) -> None:
        offset = link.put(data)
        assert offset is not None
        assert link.mine.in_use >= len(data)
        link.send(struct.pack("=QQ", offset, len(data)))
        total, theirs, nbytes = struct.unpack("=QQQ", await received.get())
        assert total == sum(data)
        # The child released my block before it answered: the release came with the answer.
        assert link.mine.in_use == 0
        view = link.theirs(theirs, nbytes)
        assert bytes(view) == data[::-1]
        view.release()
        link.release(theirs)
        link.send(b"stat")  # the release rides on this frame
        assert struct.unpack("=Q", await received.get()) == (0,)

    run_with_child("blocks", body)


def test_a_release_goes_out_alone_when_nothing_else_is_sent() -> None:
    data = b"y" * 100_000

    async def body(link: Link, received: asyncio.Queue[bytes]) -> None:
        link.send(struct.pack("=QQ", link.put(data) or 0, len(data)))
        _, theirs, _ = struct.unpack("=QQQ", await received.get())
        link.release(theirs)
        await asyncio.sleep(0)  # the loop's next turn: a frame of releases only goes out
        assert not link._releases
        link.send(b"stat")
        assert struct.unpack("=Q", await received.get()) == (0,)
        assert received.empty()  # the releases-only frame was not delivered as a message

    run_with_child("blocks", body)


def test_peer_death_closes_the_link() -> None:
    child, sock = spawn("die")

    async def main() -> None:
        closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        link = await Link.open(sock, lambda frames: None, closed.set_result)
        link.send(b"die now")
        await asyncio.wait_for(closed, 30)
        assert link.closed
        with pytest.raises(ConnectionError):
            link.send(b"anyone?")
        with pytest.raises(ConnectionError):
            await link.drain()
        link.close()

    try:
        asyncio.run(main())
    finally:
        assert child.wait(30) == 3


def test_a_peer_that_is_not_a_link_is_refused() -> None:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.sendall(b"GET / HTTP/1.1\r\n\r\n")

    async def main() -> None:
        with pytest.raises(ConnectionError):
            await Link.open(mine, lambda frames: None)

    asyncio.run(main())
    theirs.close()
    mine.close()


def test_arena_blocks_are_bounded_and_coalesce() -> None:
    arena = Arena.create(1 << 16)
    try:
        blocks = [arena.alloc(4096) for _ in range(16)]
        assert None not in blocks
        assert arena.alloc(1) is None  # full: the caller sends inline instead
        assert arena.in_use == 1 << 16
        for offset in blocks[4:8]:
            assert offset is not None
            arena.free(offset)
        big = arena.alloc(4 * 4096)  # four freed neighbours make one block again
        assert big == blocks[4]
        arena.free(12345)  # not a block: ignored
        for offset in blocks[:4] + blocks[8:] + [big]:
            assert offset is not None
            arena.free(offset)
        assert arena.in_use == 0
        assert arena.alloc(1 << 16) == 0
    finally:
        arena.close()


def test_a_freed_blocks_pages_beyond_the_resident_part_go_back_to_the_system() -> None:
    """A large arena costs only what is in flight beyond its resident first bytes."""
    arena = Arena.create(1 << 24, resident=1 << 16)
    try:
        low, high = arena.alloc(1 << 16), arena.alloc(1 << 22)
        assert low == 0 and high == 1 << 16
        arena.map[0 : 1 << 16] = b"k" * (1 << 16)
        arena.map[high : high + (1 << 22)] = b"g" * (1 << 22)
        held = os.fstat(arena.fd).st_blocks * 512
        assert held >= (1 << 16) + (1 << 22)
        arena.free(high)
        assert os.fstat(arena.fd).st_blocks * 512 <= held - (1 << 22)  # its pages are gone
        assert arena.map[high : high + 4] == b"\0" * 4
        arena.free(low)
        assert arena.map[0:4] == b"kkkk"  # resident pages stay for the next block
        assert arena.alloc(1 << 24) == 0  # and the whole arena is one free block again
    finally:
        arena.close()


def test_put_answers_none_when_the_arena_is_full() -> None:
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    async def main() -> None:
        a, b = await asyncio.gather(
            Link.open(mine, lambda frames: None, arena_bytes=1 << 16),
            Link.open(theirs, lambda frames: None, arena_bytes=1 << 16),
        )
        assert a.put(b"z" * (1 << 16)) == 0
        assert a.put(b"z") is None
        with pytest.raises(ValueError):
            b.theirs(1 << 16, 1)
        a.close()
        b.close()

    asyncio.run(main())
