"""The link between the server and a stub process: framed messages plus shared memory.

Control messages (a small dict each) go over a Unix socket pair. Tensor data
does not: each side owns one shared-memory arena it writes into, and the
other side maps it and reads tensors as numpy views in place. A block is
handed back to its writer when the reader's last view of it is garbage
collected; the release rides on the reader's next message. Tensors under
``INLINE_BYTES`` travel inside the message instead (a copy of a few bytes is
cheaper than a block). A tensor of ``SPILL_BYTES`` or more that does not fit the
arena gets a shared-memory file of its own, which the reader maps and removes
at once (its pages go when the reader's last view does); a smaller one travels
inside the message, as does anything when shared memory is full.
"""

from __future__ import annotations

import bisect
import collections
import errno
import functools
import glob
import itertools
import logging
import mmap
import os
import pickle
import select
import socket
import struct
import threading
import weakref
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import numpy as np

from ._bytes import deserialize_bytes_tensor, elements, encode_into, encoded_size
from ._dtypes import CODES, triton_to_numpy_type

if TYPE_CHECKING:
    from ._device import DeviceLink

_SHORT = struct.Struct("!i")
_LONG = struct.Struct("!Q")
#: Messages up to this size are written with their length in one ``write``, as
#: ``multiprocessing.Connection.send_bytes`` writes them (larger ones after it).
_SMALL_FRAME = 16384
_write = os.write


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, waiting for room when it is non-blocking and full."""
    sent = 0
    try:
        sent = _write(fd, data)
        if sent == len(data):
            return
    except BlockingIOError:
        pass
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while sent < len(view):
        try:
            sent += _write(fd, view[sent:])
        except BlockingIOError:
            poller.poll()


def _write_frame(fd: int, data: bytes) -> None:
    """``data`` as ``Connection.send_bytes`` frames it: a 4-byte big-endian length, or -1
    and an 8-byte length from 2 GiB on, then the bytes (a small frame in one write)."""
    size = len(data)
    if size <= _SMALL_FRAME:  # one write, the common case
        _write_all(fd, _SHORT.pack(size) + data)
        return
    _write_all(fd, _SHORT.pack(size) if size <= 0x7FFFFFFF else _SHORT.pack(-1) + _LONG.pack(size))
    _write_all(fd, data)


#: The most a ``FrameReader`` asks of the socket at once.
_MAX_CHUNK = 4 << 20

#: Tensors smaller than this travel inside the control message.
INLINE_BYTES = 4096
#: Tensors from this size on that do not fit the arena get a file of their own
#: (smaller ones travel inline: a file costs a few syscalls on each side).
SPILL_BYTES = 1 << 20
_ALIGN = 64
#: Pages of an arena are reserved this much at a time, ahead of their first write.
_RESERVE_STEP = 4 << 20

log = logging.getLogger("tritonpy.backend.python")

#: A tensor on the wire: (name, datatype, shape, where, a, b) with where "i" (a = bytes),
#: "s" (a = offset, b = byte size in the sender's arena), "f" (a = path of a shared-memory
#: file of its own, b = byte size; the reader removes it) or "g" (GPU memory: a = (device,
#: IPC handle of the sender's device arena on it, offset), b = byte size; ``_device``).
TensorDesc = tuple[str, str, tuple[int, ...], str, Any, int]
#: A request of an "exec" message: (token, id, correlation id, flags, timeout µs, parameters,
#: input TensorDescs, requested output names, trace context). A tuple, not a dict: it is
#: pickled on one side and unpickled on the other for every request, and a tuple's
#: positions cost nothing to write or read where a dict's keys do.
RequestDesc = tuple[int, str, Any, int, int, dict[str, Any], list[TensorDesc], list[str], str]
#: A response: (output TensorDescs, error as (message, code) or None, parameters).
ResponseDesc = tuple[list[TensorDesc], tuple[str, int] | None, dict[str, Any]]


def shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else os.environ.get("TMPDIR", "/tmp")


def remove_spills(arena_path: str) -> None:
    """Remove the files of tensors written beside the arena at ``arena_path`` that no
    reader took (their message was never read: a process died in between)."""
    for path in glob.glob(glob.escape(arena_path) + "-*"):
        try:
            os.unlink(path)
        except OSError:
            pass


class Blocks:
    """Blocks of a buffer of ``size`` bytes, allocated and freed by offset (first fit,
    ``_ALIGN``-aligned, freed neighbours merged). Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[tuple[int, int]] = [(0, size)]  # (offset, size), sorted by offset
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    def alloc(self, nbytes: int) -> int | None:
        """A block of at least ``nbytes``, or None (no room, or no memory behind it)."""
        need = (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
        with self._lock:
            for i, (offset, size) in enumerate(self._free):
                if size >= need:
                    if not self._reserve(offset + need):
                        return None
                    if size == need:
                        del self._free[i]
                    else:
                        self._free[i] = (offset + need, size - need)
                    self._used[offset] = need
                    return offset
        return None

    def free(self, offset: int) -> None:
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

    def _reserve(self, end: int) -> bool:
        """Whether the bytes up to ``end`` can be written (always, unless a subclass says no)."""
        return True


class Arena(Blocks):
    """A shared-memory file mapped by both processes; its writer allocates blocks in it.

    The file is sparse: pages cost memory only once written. Before a block is
    first written its pages are reserved (``posix_fallocate``), so a full
    ``/dev/shm`` (64 MiB in a default Docker container) makes that tensor travel
    inline instead of killing the writer with SIGBUS.
    """

    def __init__(self, path: str, size: int, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self._fd = os.open(path, flags, 0o600)
        if create:
            os.ftruncate(self._fd, size)
        super().__init__(os.fstat(self._fd).st_size)
        self.map = mmap.mmap(self._fd, self.size)
        self.path = path
        self._reserved = 0  # bytes from the start whose pages are reserved
        self._warned = False
        self._spills = itertools.count()

    def _reserve(self, end: int) -> bool:
        """Make sure the pages up to ``end`` exist (in steps of ``_RESERVE_STEP``)."""
        if end <= self._reserved:
            return True
        target = min(self.size, max(end, self._reserved + _RESERVE_STEP))
        reserved = self._fallocate(self._fd, self._reserved, target - self._reserved)
        if reserved is None:
            return False
        # A file system (or platform) that cannot reserve: written as is from now on.
        self._reserved = target if reserved else self.size
        return True

    def _fallocate(self, fd: int, offset: int, length: int) -> bool | None:
        """Reserve the pages of ``fd`` from ``offset`` on: True when done, False when
        pages cannot be reserved here at all (write as is), None when shared memory is
        full (warned once)."""
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return False
            self._full(exc)
            return None
        except AttributeError:  # no posix_fallocate on this platform
            return False
        return True

    def _full(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "shared memory for Python-backend tensors is full (%s: %s); tensors now travel "
                "inside messages, which is slower. Give %s more room (docker: --shm-size).",
                os.path.dirname(self.path),
                exc.strerror,
                os.path.dirname(self.path),
            )

    def spill(self, nbytes: int) -> tuple[str, mmap.mmap] | None:
        """A new shared-memory file of ``nbytes`` beside the arena, its pages reserved,
        and a writable map of it; None when shared memory has no room for it."""
        path = f"{self.path}-{next(self._spills)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, nbytes)
            if self._fallocate(fd, 0, nbytes) is None:
                os.unlink(path)
                return None
            return path, mmap.mmap(fd, nbytes)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
            self._fd = -1


@functools.cache
def _numpy_dtype(datatype: str) -> np.dtype[Any]:
    dtype: np.dtype[Any] = np.dtype(triton_to_numpy_type(CODES[datatype]))
    return dtype


def _copy_into(buffer: Any, offset: int, array: np.ndarray[Any, Any]) -> None:
    """Copy the C-contiguous ``array`` into ``buffer`` at ``offset``."""
    target = np.frombuffer(buffer, dtype=array.dtype, count=array.size, offset=offset)
    np.copyto(target, array.reshape(-1), casting="no")


class Link:
    """One side of a server↔stub link: send/receive messages and tensors."""

    def __init__(self, conn: Connection, mine: Arena, theirs: Arena) -> None:
        self.conn = conn
        self.mine = mine  # I write here; the peer reads
        self.theirs = theirs  # the peer writes here; I read
        self._send_lock = threading.Lock()
        #: Blocks of the peer's arena I am done with: an offset for its shared-memory
        #: arena, ``(device, offset)`` for its device arena (``_device.DeviceLink``).
        self._releases: collections.deque[int | tuple[int, int]] = collections.deque()
        #: GPU tensors' arenas and the peer's (``_device.DeviceLink``), made when the
        #: first GPU tensor crosses; None until then.
        self.device: DeviceLink | None = None

    # -- messages --------------------------------------------------------------------------

    def send(self, msg: dict[str, Any]) -> None:
        if self._releases:
            releases = self._take_releases()
            if releases:
                msg["rel"] = releases
        data = pickle.dumps(msg, protocol=5)
        with self._send_lock:
            # ``Connection.send_bytes``'s frame, written here because the socket may be
            # non-blocking: an event loop that watches it (uvloop) makes it so, and a
            # frame larger than the socket's buffer then waits for room rather than
            # failing. Once closed it raises as ``send_bytes`` does
            # (``Connection.fileno``'s check, read here without its two calls).
            fd = self.conn._handle  # type: ignore[attr-defined]
            if fd is None:
                raise OSError("handle is closed")
            _write_frame(fd, data)

    def recv(self) -> dict[str, Any]:
        return self.take_message(pickle.loads(self.conn.recv_bytes()))

    def flush_releases(self) -> None:
        """Send pending releases now (when no other message is due to carry them).

        Never waits for another thread's send: the reading side calls this, and a
        reader blocked behind a writer that waits for the peer to read would stall
        both processes. Releases left behind ride with the next message.
        """
        if not self._releases or not self._send_lock.acquire(blocking=False):
            return
        try:
            releases = self._take_releases()
            fd = self.conn._handle  # type: ignore[attr-defined]
            if releases and fd is not None:
                _write_frame(fd, pickle.dumps({"op": "rel", "rel": releases}, protocol=5))
        finally:
            self._send_lock.release()

    def take_message(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A message read by other means (a ``FrameReader``), its releases applied."""
        for offset in msg.pop("rel", ()):
            if type(offset) is int:
                self.mine.free(offset)
            elif self.device is not None:  # a block of my device arena
                self.device.free(offset)
        return msg

    def release(self, block: int | tuple[int, int]) -> None:
        """Hand a block of the peer's back to it (with my next message)."""
        self._releases.append(block)

    def _take_releases(self) -> list[int | tuple[int, int]]:
        out = []
        pop = self._releases.popleft
        while True:
            try:
                out.append(pop())
            except IndexError:
                return out

    # -- tensors ---------------------------------------------------------------------------

    def put(self, name: str, datatype: str, array: np.ndarray[Any, Any]) -> TensorDesc:
        """Describe ``array`` for the peer, copying its data into my arena (or inline)."""
        # A numpy shape is a tuple of ints already (anything else is made one).
        shape = array.shape if type(array) is np.ndarray else tuple(int(d) for d in array.shape)
        if datatype == "BYTES":
            items = elements(array)
            nbytes = encoded_size(items)
            offset = self.mine.alloc(nbytes) if nbytes >= INLINE_BYTES else None
            if offset is not None:
                encode_into(items, memoryview(self.mine.map)[offset : offset + nbytes])
                return (name, datatype, shape, "s", offset, nbytes)
            spill = self.mine.spill(nbytes) if nbytes >= SPILL_BYTES else None
            if spill is not None:  # its map closes with its last reference
                encode_into(items, memoryview(spill[1]))
                return (name, datatype, shape, "f", spill[0], nbytes)
            buf = bytearray(nbytes)
            encode_into(items, memoryview(buf))
            return (name, datatype, shape, "i", buf, nbytes)
        array = np.ascontiguousarray(array)
        nbytes = array.nbytes
        offset = self.mine.alloc(nbytes) if nbytes >= INLINE_BYTES else None
        if offset is not None:
            _copy_into(self.mine.map, offset, array)
            return (name, datatype, shape, "s", offset, nbytes)
        spill = self.mine.spill(nbytes) if nbytes >= SPILL_BYTES else None
        if spill is not None:  # its map closes with its last reference
            _copy_into(spill[1], 0, array)
            return (name, datatype, shape, "f", spill[0], nbytes)
        return (name, datatype, shape, "i", bytearray(array.tobytes()), nbytes)

    def get(self, desc: TensorDesc) -> np.ndarray[Any, Any]:
        """The array a descriptor names: a view of the peer's arena, released when dropped."""
        _, datatype, shape, where, a, nbytes = desc
        if where == "f":
            return self._get_spill(desc)
        if datatype == "BYTES":
            if where == "i":
                return deserialize_bytes_tensor(a).reshape(shape)
            try:
                return deserialize_bytes_tensor(memoryview(self.theirs.map)[a : a + nbytes]).reshape(shape)
            finally:
                self._releases.append(a)
        dtype = _numpy_dtype(datatype)
        count = nbytes // dtype.itemsize if dtype.itemsize else 0
        if where == "i":
            array = np.frombuffer(a, dtype=dtype, count=count)
            return array if shape == (count,) else array.reshape(shape)  # 1-D: already of its shape
        array = np.frombuffer(self.theirs.map, dtype=dtype, count=count, offset=a)
        weakref.finalize(array.base, self._releases.append, a)
        return array.reshape(shape)

    @staticmethod
    def _get_spill(desc: TensorDesc) -> np.ndarray[Any, Any]:
        """A tensor in a file of its own: mapped, and the file removed (its pages stay
        while the returned array, or a view of it, lives)."""
        name, datatype, shape, _, path, nbytes = desc
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise OSError(f"the shared memory of tensor '{name}' is gone: {exc}") from None
        try:
            os.unlink(path)
            mapped = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        if datatype == "BYTES":
            return deserialize_bytes_tensor(mapped).reshape(shape)
        dtype = _numpy_dtype(datatype)
        return np.frombuffer(mapped, dtype=dtype, count=nbytes // dtype.itemsize).reshape(shape)


class FrameReader:
    """Reads the link's messages without blocking, for a reader on an event loop.

    ``read`` takes what the socket holds (one ``recv``) and returns the messages
    completed by it; a message split across reads waits in a buffer for its rest,
    which is only parsed again once the rest is there (a large message costs one
    copy, not one per read). Frames are ``multiprocessing.Connection``'s: a 4-byte
    big-endian length, or -1 and an 8-byte length for messages of 2 GiB and more.
    """

    def __init__(self, sock: socket.socket, chunk: int = 64 << 10) -> None:
        self.sock = sock
        self._chunk = chunk
        self._pending = bytearray()
        #: How many bytes ``_pending`` must hold before a frame in it can complete.
        self._need = 0

    def read(self) -> list[dict[str, Any]] | None:
        """The messages now complete (maybe none); None once the peer closed the socket."""
        try:
            data: bytes | bytearray = self.sock.recv(self._chunk, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            return None
        if not data:
            return None
        if self._pending:
            self._pending += data
            if len(self._pending) < self._need:
                return []
            data = self._pending
        messages: list[dict[str, Any]] = []
        view = memoryview(data)
        pos, end = 0, len(data)
        need = 0
        while end - pos >= 4:
            (size,) = _SHORT.unpack_from(data, pos)
            head = 4
            if size == -1:
                if end - pos < 12:
                    need = 12
                    break
                (size,) = _LONG.unpack_from(data, pos + 4)
                head = 12
            if end - pos - head < size:
                need = head + size
                if need > self._chunk:  # a large message: read it in larger chunks
                    self._chunk = min(need, _MAX_CHUNK)
                break
            pos += head
            messages.append(pickle.loads(view[pos : pos + size]))
            pos += size
        view.release()
        self._pending = bytearray(data[pos:]) if pos < end else bytearray()
        self._need = need
        return messages
