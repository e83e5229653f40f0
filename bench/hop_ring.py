"""A duplex link between two processes: one shared-memory ring per direction, eventfd wakes.

The ring that ``bench/frontend_hop.py`` measures as the ``ring`` options. It
lives in bench/ and nothing in the server uses it: it did not beat a plain
Unix socket by enough to be worth its price (bench/frontend_hop.md says by how
much), and it is tested only as far as that benchmark exercises it.

Each direction is a single-producer, single-consumer byte ring in a ``memfd``
mapped by both processes. Frames are written into the ring and read out of it
with no system call on either side while the reader is awake; the writer makes
one (a write to the ring's *data* eventfd) only when the reader said, through a
flag in the ring, that it is going to sleep. A reader that wakes takes every
frame the ring holds, so under load many frames cost one wake.

- **Set-up.** The two processes share a connected Unix stream socket (a
  ``socketpair`` made before the child starts). One side calls
  ``Endpoint.create(sock)``: it makes both rings and their eventfds and sends
  the descriptors over the socket (``SCM_RIGHTS``); the other calls
  ``Endpoint.accept(sock)``. Nothing has a name in ``/dev/shm``: the memory goes
  away with the last process that maps it.
- **Peer death.** The socket stays open for the link's life and carries
  nothing else: when the peer exits, however it exits, the socket reads EOF
  and the endpoint closes (``on_close`` is called, pending writes fail).
- **Full ring: backpressure, not loss.** ``write`` never blocks and never drops:
  what does not fit waits in this side's backlog, in order, and goes out as
  the reader frees room (the reader signals the ring's *space* eventfd when the
  writer said it waits). ``await drain()`` waits until the backlog is below the
  low-water mark, as ``asyncio.StreamWriter.drain`` does; a caller that awaits
  it keeps its memory bounded.
- **Large frames.** A frame larger than a quarter of the ring travels in
  pieces and is put together again by the reader: any size goes through a ring
  of any size, only slower.
- **Threads.** ``write`` may be called from any thread of the writing process
  (a lock makes the producers one); reading belongs to one thread, the event
  loop's (``start``) or a blocked thread's (``recv_blocking``).

Memory order: a frame's bytes are stored before the ring's head that publishes
them, and a side stores its "sleeping"/"waiting" flag and then loads the other
side's index with a lock operation in between (an atomic read-modify-write,
a full barrier on x86-64). Python has no fences of its own; this relies on
x86-64's store order and is not claimed for weaker memory models.
"""

from __future__ import annotations

import asyncio
import collections
import mmap
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

Buffer = bytes | bytearray | memoryview

#: Default bytes of frame data in each direction's ring.
DEFAULT_CAPACITY = 1 << 20
_HEADER_BYTES = 4096
# Header words (8 bytes each, on separate cache lines).
_HEAD = 0  # bytes ever written (the writer's)
_TAIL = 8  # bytes ever consumed (the reader's)
_SLEEPING = 16  # the reader may be asleep: the writer must signal
_WAITING = 24  # the writer waits for room: the reader must signal
_FRAME = struct.Struct("=II")  # payload length, flags
_MORE = 1  # more pieces of this frame follow
_PAD = 2  # the rest of the ring up to its end is padding
_HELLO = b"tritonpy-ring-1"
_HELLO_STRUCT = struct.Struct("=16sQ")


class PeerClosed(ConnectionError):
    """The other process closed the link or exited."""


def _fence(lock: Any) -> None:
    """A full memory barrier in practice: an uncontended lock's atomic read-modify-write."""
    lock.acquire()
    lock.release()


def _drain_eventfd(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass


class _Ring:
    """One direction's shared memory: header words and a power-of-two data area."""

    def __init__(self, mem_fd: int, data_fd: int, space_fd: int) -> None:
        self.mem_fd, self.data_fd, self.space_fd = mem_fd, data_fd, space_fd
        size = os.fstat(mem_fd).st_size
        self.capacity = size - _HEADER_BYTES
        self.map = mmap.mmap(mem_fd, size)
        self.words = memoryview(self.map)[:_HEADER_BYTES].cast("Q")
        self.mask = self.capacity - 1

    @classmethod
    def new(cls, capacity: int) -> _Ring:
        if capacity < 4096 or capacity & (capacity - 1):
            raise ValueError(f"a ring's capacity is a power of two of at least 4096, not {capacity}")
        mem_fd = os.memfd_create("tritonpy-ring", os.MFD_CLOEXEC)
        os.ftruncate(mem_fd, _HEADER_BYTES + capacity)
        flags = os.EFD_NONBLOCK | os.EFD_CLOEXEC
        ring = cls(mem_fd, os.eventfd(0, flags), os.eventfd(0, flags))
        ring.words[_SLEEPING] = 1  # until its reader says otherwise, it is taken to be asleep
        return ring

    def fds(self) -> list[int]:
        return [self.mem_fd, self.data_fd, self.space_fd]

    def close(self) -> None:
        self.words.release()
        try:
            self.map.close()
        except BufferError:  # a caller still holds a view: the mapping goes with it
            pass
        for fd in self.fds():
            try:
                os.close(fd)
            except OSError:
                pass


class Endpoint:
    """One side of a duplex ring link. See the module's description."""

    def __init__(self, sock: socket.socket, out: _Ring, inn: _Ring, low_water: int | None = None) -> None:
        self.sock = sock
        self._out = out
        self._in = inn
        self.max_piece = out.capacity // 4
        self._wlock = threading.Lock()
        self._rlock = threading.Lock()  # only ever for its barrier
        self._backlog: collections.deque[tuple[memoryview, int]] = collections.deque()
        self.backlog_bytes = 0
        self.high_water = out.capacity
        self.low_water = out.capacity // 2 if low_water is None else low_water
        self._partial: list[bytes] = []
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_frames: Callable[[list[bytes]], None] | None = None
        self._on_close: Callable[[], None] | None = None
        self._drainers: list[asyncio.Future[None]] = []

    # -- set-up ----------------------------------------------------------------------------

    @classmethod
    def create(cls, sock: socket.socket, capacity: int = DEFAULT_CAPACITY) -> Endpoint:
        """Make both rings and send them to the process at the socket's other end."""
        out, inn = _Ring.new(capacity), _Ring.new(capacity)
        socket.send_fds(sock, [_HELLO_STRUCT.pack(_HELLO, capacity)], out.fds() + inn.fds())
        return cls(sock, out, inn)

    @classmethod
    def accept(cls, sock: socket.socket, timeout: float | None = 30.0) -> Endpoint:
        """Take the rings the other process made with ``create``."""
        sock.settimeout(timeout)
        try:
            data, fds, _, _ = socket.recv_fds(sock, _HELLO_STRUCT.size, 6)
        finally:
            sock.settimeout(None)
        hello_ok = len(data) == _HELLO_STRUCT.size and _HELLO_STRUCT.unpack(data)[0].rstrip(b"\0") == _HELLO
        if len(fds) != 6 or not hello_ok:
            for fd in fds:
                os.close(fd)
            raise PeerClosed("the peer sent no ring link")
        theirs_out, theirs_in = _Ring(*fds[:3]), _Ring(*fds[3:])
        return cls(sock, theirs_in, theirs_out)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- writing ---------------------------------------------------------------------------

    def write(self, data: Buffer) -> None:
        """Queue one frame: into the ring now when it fits, else into the backlog (in order).

        Never blocks; raises ``PeerClosed`` once the link is closed. Callers that
        produce without bound await ``drain()``.
        """
        if self._closed:
            raise PeerClosed("the ring link is closed")
        view = memoryview(data).cast("B")
        with self._wlock:
            if self._backlog:
                self._backlog.append((view, 0))
                self.backlog_bytes += len(view)
                signal = self._flush_locked()
            else:
                head = self._out.words[_HEAD]
                rest = self._put_pieces(view, 0)
                signal = self._out.words[_HEAD] != head
                if rest is not None:
                    self._backlog.append((view, rest))
                    self.backlog_bytes += len(view)
                    signal = self._flush_locked() or signal
        if signal:
            self._signal_data()

    def _signal_data(self) -> None:
        # Barrier between publishing the head (under the lock just released) and reading the flag.
        _fence(self._rlock)
        ring = self._out
        if ring.words[_SLEEPING]:
            ring.words[_SLEEPING] = 0
            os.eventfd_write(ring.data_fd, 1)

    def _flush_locked(self) -> bool:
        """Move backlog into the ring as room allows; True when anything went in."""
        moved = False
        while self._backlog:
            view, start = self._backlog[0]
            ring = self._out
            before = ring.words[_HEAD]
            done = self._put_pieces(view, start)
            if ring.words[_HEAD] != before:
                moved = True
            if done is None:
                self._backlog.popleft()
                self.backlog_bytes -= len(view)
                continue
            self._backlog[0] = (view, done)
            # No room: ask the reader to signal, then look again in case it freed room meanwhile.
            ring.words[_WAITING] = 1
            _fence(self._rlock)
            if self._has_room_for(view, done):
                continue
            break
        else:
            self._out.words[_WAITING] = 0
        return moved

    def _put_pieces(self, view: memoryview, start: int) -> int | None:
        """Write ``view[start:]`` as one frame's pieces while they fit; where it stopped, or None
        when all of it went in. A frame larger than ``max_piece`` goes in several pieces."""
        ring = self._out
        words = ring.words
        total = len(view)
        while True:
            piece = min(total - start, self.max_piece)
            flags = _MORE if start + piece < total else 0
            need = _FRAME.size + ((piece + 7) & ~7)
            head = words[_HEAD]
            free = ring.capacity - (head - words[_TAIL])
            pos = head & ring.mask
            to_end = ring.capacity - pos
            pad = to_end if to_end < need else 0
            if pad + need > free:
                return start
            if pad:
                _FRAME.pack_into(ring.map, _HEADER_BYTES + pos, 0, _PAD)
                head += pad
                pos = 0
            base = _HEADER_BYTES + pos
            _FRAME.pack_into(ring.map, base, piece, flags)
            ring.map[base + _FRAME.size : base + _FRAME.size + piece] = view[start : start + piece]
            words[_HEAD] = head + need
            start += piece
            if not flags:
                return None

    def _has_room_for(self, view: memoryview, start: int) -> bool:
        ring = self._out
        piece = min(len(view) - start, self.max_piece)
        need = _FRAME.size + ((piece + 7) & ~7)
        head = ring.words[_HEAD]
        to_end = ring.capacity - (head & ring.mask)
        pad = to_end if to_end < need else 0
        return pad + need <= ring.capacity - (head - ring.words[_TAIL])

    def _on_space(self) -> None:
        _drain_eventfd(self._out.space_fd)
        with self._wlock:
            moved = self._flush_locked()
        if moved:
            self._signal_data()
        self._wake_drainers()

    def _wake_drainers(self) -> None:
        if self.backlog_bytes <= self.low_water or self._closed:
            drainers, self._drainers = self._drainers, []
            for fut in drainers:
                if not fut.done():
                    if self._closed:
                        fut.set_exception(PeerClosed("the ring link is closed"))
                    else:
                        fut.set_result(None)

    async def drain(self) -> None:
        """Wait until the backlog is at or below the low-water mark (on the started loop)."""
        if self._closed:
            raise PeerClosed("the ring link is closed")
        if self.backlog_bytes <= self.high_water:
            return
        assert self._loop is not None, "drain() needs start() first"
        fut = self._loop.create_future()
        self._drainers.append(fut)
        await fut

    def flush_blocking(self, timeout: float | None = None) -> bool:
        """For a writer without a loop: wait until the backlog is empty; False on time-out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._wlock:
                moved = self._flush_locked()
                empty = not self._backlog
            if moved:
                self._signal_data()
            if empty:
                return True
            if self._closed:
                raise PeerClosed("the ring link is closed")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            ready, _, _ = select.select([self._out.space_fd, self.sock.fileno()], [], [], left)
            if self.sock.fileno() in ready and self._peer_gone():
                self._close()
                raise PeerClosed("the peer closed the ring link")
            _drain_eventfd(self._out.space_fd)

    # -- reading ---------------------------------------------------------------------------

    def _take(self) -> list[bytes]:
        """Every whole frame the incoming ring holds now (pieces joined); frees their room."""
        ring = self._in
        words, data, mask = ring.words, ring.map, ring.mask
        tail = words[_TAIL]
        head = words[_HEAD]
        if tail == head:
            return []
        frames: list[bytes] = []
        unpack = _FRAME.unpack_from
        partial = self._partial
        while tail != head:
            base = _HEADER_BYTES + (tail & mask)
            length, flags = unpack(data, base)
            if flags & _PAD:
                tail += ring.capacity - (tail & mask)
                continue
            start = base + _FRAME.size
            payload = data[start : start + length]
            tail += _FRAME.size + ((length + 7) & ~7)
            if flags & _MORE:
                partial.append(payload)
            elif partial:
                partial.append(payload)
                frames.append(b"".join(partial))
                partial.clear()
            else:
                frames.append(payload)
        words[_TAIL] = tail
        _fence(self._rlock)
        if words[_WAITING]:
            words[_WAITING] = 0
            os.eventfd_write(ring.space_fd, 1)
        return frames

    def _take_or_sleep(self) -> list[bytes]:
        """Frames now; when there are none, the sleeping flag is set (and the ring checked once more).

        A take may consume pieces of a frame and still complete none: the flag must be set
        whenever this returns nothing, or the writer would never signal again.
        """
        words = self._in.words
        while True:
            frames = self._take()
            if frames:
                return frames
            words[_SLEEPING] = 1
            _fence(self._rlock)
            if words[_HEAD] == words[_TAIL]:
                return frames
            words[_SLEEPING] = 0

    def recv_blocking(self, timeout: float | None = None) -> list[bytes]:
        """For a reader without a loop: the frames there are, waiting up to ``timeout``.

        Returns [] on time-out; raises ``PeerClosed`` once the peer is gone and nothing is left.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._in.words[_SLEEPING] = 0
            frames = self._take_or_sleep()
            if frames:
                return frames
            if self._closed:
                raise PeerClosed("the ring link is closed")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            ready, _, _ = select.select([self._in.data_fd, self.sock.fileno()], [], [], left)
            if self.sock.fileno() in ready and self._peer_gone():
                frames = self._take()
                self._close()
                if frames:
                    return frames
                raise PeerClosed("the peer closed the ring link")
            _drain_eventfd(self._in.data_fd)

    # -- the event loop --------------------------------------------------------------------

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        on_frames: Callable[[list[bytes]], None],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """Read on ``loop``: ``on_frames`` gets each batch of frames in order; ``on_close`` the end.

        Frames already in the ring are delivered on the loop's next turn.
        """
        self._loop = loop
        self._on_frames = on_frames
        self._on_close = on_close
        loop.add_reader(self._in.data_fd, self._on_data)
        loop.add_reader(self._out.space_fd, self._on_space)
        loop.add_reader(self.sock.fileno(), self._on_sock)
        loop.call_soon(self._on_data)

    def _on_data(self) -> None:
        _drain_eventfd(self._in.data_fd)
        self._in.words[_SLEEPING] = 0
        deliver = self._on_frames
        assert deliver is not None
        while True:
            frames = self._take_or_sleep()
            if not frames:
                return
            deliver(frames)

    def _peer_gone(self) -> bool:
        try:
            data = self.sock.recv(64, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return not data

    def _on_sock(self) -> None:
        if self._peer_gone():
            # Whatever the peer wrote before it went is still delivered.
            if self._on_frames is not None:
                frames = self._take()
                if frames:
                    self._on_frames(frames)
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            for fd in (self._in.data_fd, self._out.space_fd, self.sock.fileno()):
                try:
                    loop.remove_reader(fd)
                except (ValueError, OSError):
                    pass
        with self._wlock:
            self._backlog.clear()
            self.backlog_bytes = 0
        self._wake_drainers()
        if self._on_close is not None:
            self._on_close()

    def close(self) -> None:
        """Close this side: the peer sees EOF on the socket; the rings are unmapped."""
        self._close()
        try:
            self.sock.close()
        except OSError:
            pass
        self._out.close()
        self._in.close()


def pair(capacity: int = DEFAULT_CAPACITY) -> tuple[Endpoint, Endpoint]:
    """Both ends in this process (for tests and for a thread on each side)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    first = Endpoint.create(a, capacity)
    return first, Endpoint.accept(b)


__all__ = ["DEFAULT_CAPACITY", "Endpoint", "PeerClosed", "pair"]
