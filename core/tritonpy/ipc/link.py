"""A link between two processes on event loops: framed messages on a Unix stream socket,
tensors in shared memory.

Made for the hop between a front-end worker and the core process of
``--frontend-workers`` (bench/frontend_hop.md says why this shape and not a
shared-memory ring): small messages travel in the socket, each behind a
4-byte length; tensor data of any size may instead be written into the
sender's *arena*, a ``memfd`` the peer maps, so that only its offset travels.

- **Set-up.** Both processes hold the ends of a connected Unix stream socket
  (a ``socketpair`` made before the child starts, or an accepted connection).
  Each calls ``await Link.open(sock, on_frames)``: it makes its own arena and
  sends the descriptor over the socket (``SCM_RIGHTS``), maps the peer's, and
  puts the socket on the running loop. Nothing is named in ``/dev/shm`` (nor
  held to its size: 64 MiB in a default Docker container); the memory goes
  away with the last process that maps it, and its pages cost memory only once
  written.
- **Frames.** ``send(*parts)`` sends one frame (the parts joined, without a
  copy of its own); ``on_frames`` gets, in order, every frame one read of the
  socket completed: under load many frames cost one wake-up.
- **Arena blocks.** ``put(data)`` copies bytes into my arena and returns the
  offset (None when it has no room: then send the data inline, nothing is
  lost). The peer reads ``theirs(offset, nbytes)`` in place and, when done,
  ``release(offset)``s it; releases ride on the next frame it sends (a frame
  of their own if it sends nothing in that turn of the loop) and free the
  block here. An arena is large (``DEFAULT_ARENA_BYTES``, address space only)
  so that a tensor of hundreds of MiB crosses it too, written once and read in
  place, instead of inside a frame (several copies through the socket); the
  memory it holds stays bounded by what is in flight plus ``resident`` bytes:
  blocks are taken lowest offset first, and a freed block's pages above
  ``resident`` go back to the system at once (``MADV_REMOVE``).
- **Backpressure.** ``send`` never blocks and never drops; past the
  transport's high-water mark ``await drain()`` waits until the peer has read,
  as ``asyncio.StreamWriter.drain`` does.
- **Peer death.** However the peer ends, the socket closes: ``on_close`` is
  called once, ``closed`` is set, ``drain`` raises and ``send`` raises.

Everything but ``Arena.alloc``/``free`` belongs to the loop's thread.
"""

from __future__ import annotations

import asyncio
import bisect
import mmap
import os
import socket
import struct
import threading
from collections.abc import Callable
from typing import cast

Buffer = bytes | bytearray | memoryview

#: Bytes of each side's arena unless told otherwise: address space, not memory (pages cost
#: memory only once written, and those above ``DEFAULT_RESIDENT_BYTES`` only while in use).
DEFAULT_ARENA_BYTES = 2 << 30
#: The arena's first bytes, whose pages stay once written (most tensors are small and reuse
#: them); the pages of blocks freed beyond go back to the system.
DEFAULT_RESIDENT_BYTES = 64 << 20
_ALIGN = 64
_PAGE = mmap.PAGESIZE
_HELLO = b"tritonpy-link-1\0"
#: Frame header: bytes after the length word, releases in it. Then the releases, then the payload.
_HEAD = struct.Struct("=IH")
_MAX_FRAME = (1 << 32) - 1
_MAX_RELEASES = (1 << 16) - 1
#: A read buffer grown past this for a large frame shrinks again once the frame is through.
_KEEP_BUFFER = 1 << 20


class Arena:
    """A fixed-size shared-memory file; its owner allocates blocks in it, the peer only reads."""

    def __init__(self, fd: int, writable: bool, resident: int = DEFAULT_RESIDENT_BYTES) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.map = mmap.mmap(fd, self.size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
        #: Where pages of freed blocks start to go back to the system (page-aligned).
        self.resident = -(-resident // _PAGE) * _PAGE
        self._free: list[tuple[int, int]] = [(0, self.size)]  # (offset, size), by offset
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def create(cls, size: int, resident: int = DEFAULT_RESIDENT_BYTES) -> Arena:
        fd = os.memfd_create("tritonpy-arena", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        return cls(fd, writable=True, resident=resident)

    def alloc(self, nbytes: int) -> int | None:
        """The offset of a block of at least ``nbytes``; None when no block that large is free."""
        need = max(_ALIGN, (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN)
        with self._lock:
            for i, (offset, size) in enumerate(self._free):
                if size >= need:
                    if size == need:
                        del self._free[i]
                    else:
                        self._free[i] = (offset + need, size - need)
                    self._used[offset] = need
                    return offset
        return None

    def free(self, offset: int) -> None:
        """Give a block back (an offset that is not allocated is ignored); its whole pages
        beyond ``resident`` go back to the system first, before anyone can take it again."""
        size = self._used.get(offset)  # a dict read needs no lock; the pop below decides
        if size is not None and offset + size > self.resident:
            start = -(-max(offset, self.resident) // _PAGE) * _PAGE
            end = (offset + size) // _PAGE * _PAGE
            if end > start:
                self.map.madvise(mmap.MADV_REMOVE, start, end - start)
        with self._lock:
            size = self._used.pop(offset, None)
            if size is None:
                return
            i = bisect.bisect_left(self._free, (offset, 0))
            if i < len(self._free) and offset + size == self._free[i][0]:
                size += self._free[i][1]
                del self._free[i]
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == offset:
                offset, size = self._free[i - 1][0], self._free[i - 1][1] + size
                del self._free[i - 1]
                i -= 1
            self._free.insert(i, (offset, size))

    @property
    def in_use(self) -> int:
        with self._lock:
            return sum(self._used.values())

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # views still exported: the mapping goes with the last of them
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


class Link(asyncio.BufferedProtocol):
    """One side of a link; see the module's description. Made by ``Link.open``."""

    def __init__(
        self,
        on_frames: Callable[[list[bytes]], None],
        mine: Arena,
        peer: Arena,
        on_close: Callable[[Exception | None], None] | None = None,
    ) -> None:
        self.on_frames = on_frames
        self.on_close = on_close
        self.mine = mine
        self.peer = peer
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray(1 << 16)
        self._view = memoryview(self._buf)
        self._filled = 0
        self._releases: list[int] = []
        self._release_scheduled = False
        self._paused = False
        self._drainers: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._need = 0  # bytes the buffer must hold for the frame being read
        # Frames read before ``open`` returned (uvloop may read before ``connection_made``).
        self._ready = False
        self._early: list[bytes] = []

    @classmethod
    async def open(
        cls,
        sock: socket.socket,
        on_frames: Callable[[list[bytes]], None],
        on_close: Callable[[Exception | None], None] | None = None,
        arena_bytes: int = DEFAULT_ARENA_BYTES,
        high_water: int = 4 << 20,
        resident: int = DEFAULT_RESIDENT_BYTES,
    ) -> Link:
        """Exchange arenas with the process at the socket's other end and start reading.

        Waits for the peer's greeting without a deadline of its own (wrap it in
        ``asyncio.wait_for``); a peer that sends anything else, or closes, is a
        ``ConnectionError``. Linux only (``memfd_create``, ``SCM_RIGHTS``).
        """
        loop = asyncio.get_running_loop()
        mine = Arena.create(arena_bytes, resident)
        sock.setblocking(False)
        try:
            socket.send_fds(sock, [_HELLO], [mine.fd])
            fds = await _recv_fd(loop, sock)
        except BaseException:
            mine.close()
            raise
        link = cls(on_frames, mine, Arena(fds, writable=False), on_close)
        transport, _ = await loop.connect_accepted_socket(lambda: link, sock)
        transport.set_write_buffer_limits(high=high_water)
        loop.call_soon(link._start_reading)
        return link

    # -- sending ---------------------------------------------------------------------------

    def send(self, *parts: Buffer) -> None:
        """Send one frame made of ``parts``, with the releases pending on this side."""
        if self.closed or self.transport is None:
            raise ConnectionError("the link is closed")
        if not self._releases:  # the common case: the header alone, from a prepared Struct
            size = 2
            for part in parts:
                size += len(part) if type(part) is bytes else memoryview(part).nbytes
            if size > _MAX_FRAME:
                raise ValueError(f"a frame of {size} bytes is larger than 4 GiB: put its data in the arena")
            self.transport.writelines((_HEAD.pack(size, 0), *parts))
            return
        size = sum(memoryview(p).nbytes for p in parts)
        releases = self._releases
        if len(releases) > _MAX_RELEASES:
            releases, self._releases = releases[:_MAX_RELEASES], releases[_MAX_RELEASES:]
        else:
            self._releases = []
        size += 2 + 8 * len(releases)
        if size > _MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes is larger than 4 GiB: put its data in the arena")
        head = struct.pack(f"=IH{len(releases)}Q", size, len(releases), *releases)
        self.transport.writelines((head, *parts))

    async def drain(self) -> None:
        """Wait while the transport holds more than its high-water mark (the peer reads slowly)."""
        if self.closed:
            raise ConnectionError("the link is closed")
        if not self._paused:
            return
        assert self._loop is not None
        fut = self._loop.create_future()
        self._drainers.append(fut)
        await fut

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drainers(None)

    def _wake_drainers(self, exc: Exception | None) -> None:
        drainers, self._drainers = self._drainers, []
        for fut in drainers:
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)

    # -- arena blocks ----------------------------------------------------------------------

    def put(self, data: Buffer) -> int | None:
        """Copy ``data`` into my arena: its offset, or None when the arena has no room."""
        view = memoryview(data).cast("B")
        offset = self.mine.alloc(view.nbytes)
        if offset is not None:
            self.mine.map[offset : offset + view.nbytes] = view
        return offset

    def theirs(self, offset: int, nbytes: int) -> memoryview:
        """A read-only view of a block in the peer's arena; ``release`` it when done."""
        if offset < 0 or offset + nbytes > self.peer.size:
            raise ValueError(f"block {offset}+{nbytes} is outside the peer's arena")
        return memoryview(self.peer.map)[offset : offset + nbytes]

    def release(self, offset: int) -> None:
        """The peer may reuse this block of its arena (told on the next frame sent)."""
        self._releases.append(offset)
        if not self._release_scheduled and self._loop is not None and not self.closed:
            self._release_scheduled = True
            self._loop.call_soon(self._flush_releases)

    def _flush_releases(self) -> None:
        self._release_scheduled = False
        while self._releases and not self.closed:
            self.send()

    # -- receiving -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not its subclasses
        self._loop = asyncio.get_running_loop()
        # No frame is delivered before ``open`` has returned the link to its caller.
        self.transport.pause_reading()

    def _start_reading(self) -> None:
        self._ready = True
        early, self._early = self._early, []
        if early:
            self.on_frames(early)
        if not self.closed and self.transport is not None:
            self.transport.resume_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self._buf) - self._filled < 1 << 14:
            self._grow(self._filled + (1 << 16))
        return self._view[self._filled :]

    def _grow(self, size: int) -> None:
        self._view.release()
        new = bytearray(max(size, 2 * len(self._buf)))
        new[: self._filled] = self._buf[: self._filled]
        self._buf = new
        self._view = memoryview(new)

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        buf, filled, view = self._buf, self._filled, self._view
        frames: list[bytes] = []
        free = self.mine.free
        pos = 0
        while filled - pos >= _HEAD.size:
            size, nrel = _HEAD.unpack_from(buf, pos)
            end = pos + 4 + size
            if end > filled:
                if end - pos > len(buf):
                    # Make room for the whole frame once (after moving it to the front below).
                    self._need = end - pos
                break
            if nrel:
                for offset in struct.unpack_from(f"={nrel}Q", buf, pos + _HEAD.size):
                    free(offset)
            start = pos + _HEAD.size + 8 * nrel
            if end > start or not nrel:
                frames.append(bytes(view[start:end]))
            pos = end
        if pos:
            rest = filled - pos
            if rest:
                buf[:rest] = view[pos:filled]
            self._filled = rest
        if self._need:
            if self._need > len(self._buf):
                self._grow(self._need)
            self._need = 0
        elif not self._filled and len(self._buf) > _KEEP_BUFFER:
            # A large frame is through: give its buffer back.
            self._view.release()
            self._buf = bytearray(1 << 16)
            self._view = memoryview(self._buf)
        if frames:
            if self._ready:
                self.on_frames(frames)
            else:
                self._early.extend(frames)

    def eof_received(self) -> bool:
        return False  # close the transport: the peer is gone

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        self._wake_drainers(ConnectionError("the link is closed"))
        if self.on_close is not None:
            self.on_close(exc)

    def close(self) -> None:
        """Close the socket (the peer sees it) and unmap both arenas."""
        if self.transport is not None:
            self.transport.close()
        self.mine.close()
        self.peer.close()


async def _recv_fd(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> int:
    """The peer's arena descriptor, waiting on the loop for it."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, len(_HELLO), 1)
        except (BlockingIOError, InterruptedError):
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(sock.fileno(), _settle, readable)
            try:
                await readable
            finally:
                loop.remove_reader(sock.fileno())
            continue
        if data != _HELLO or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ConnectionError("the peer sent no link greeting")
        return fds[0]


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


__all__ = ["DEFAULT_ARENA_BYTES", "DEFAULT_RESIDENT_BYTES", "Arena", "Link"]
