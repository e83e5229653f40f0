"""The link between the server and a stub process: framed messages plus shared memory.

Control messages (a small dict each) go over a Unix socket pair. Tensor data
does not: each side owns one shared-memory arena it writes into, and the
other side maps it and reads tensors as numpy views in place. A block is
handed back to its writer when the reader's last view of it is garbage
collected; the release rides on the reader's next message. Tensors under
``INLINE_BYTES`` travel inside the message instead (a copy of a few bytes is
cheaper than a block), as does anything that does not fit the arena.
"""

from __future__ import annotations

import bisect
import collections
import mmap
import os
import pickle
import threading
import weakref
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ._bytes import deserialize_bytes_tensor, encode_into, encoded_size
from ._dtypes import CODES, triton_to_numpy_type

#: Tensors smaller than this travel inside the control message.
INLINE_BYTES = 4096
_ALIGN = 64

#: A tensor on the wire: (name, datatype, shape, where, a, b) with where "i" (a = bytes) or
#: "s" (a = offset, b = byte size in the sender's arena).
TensorDesc = tuple[str, str, tuple[int, ...], str, Any, int]


def shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else os.environ.get("TMPDIR", "/tmp")


class Arena:
    """A shared-memory file mapped by both processes; its writer allocates blocks in it."""

    def __init__(self, path: str, size: int, create: bool) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self.size = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        self.path = path
        self._free: list[tuple[int, int]] = [(0, self.size)]  # (offset, size), sorted by offset
        self._used: dict[int, int] = {}
        self._lock = threading.Lock()

    def alloc(self, nbytes: int) -> int | None:
        need = (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
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


def _numpy_type(datatype: str) -> Any:
    return triton_to_numpy_type(CODES[datatype])


class Link:
    """One side of a server↔stub link: send/receive messages and tensors."""

    def __init__(self, conn: Connection, mine: Arena, theirs: Arena) -> None:
        self.conn = conn
        self.mine = mine  # I write here; the peer reads
        self.theirs = theirs  # the peer writes here; I read
        self._send_lock = threading.Lock()
        self._releases: collections.deque[int] = collections.deque()

    # -- messages --------------------------------------------------------------------------

    def send(self, msg: dict[str, Any]) -> None:
        releases = self._take_releases()
        if releases:
            msg["rel"] = releases
        data = pickle.dumps(msg, protocol=5)
        with self._send_lock:
            self.conn.send_bytes(data)

    def recv(self) -> dict[str, Any]:
        msg: dict[str, Any] = pickle.loads(self.conn.recv_bytes())
        for offset in msg.pop("rel", ()):
            self.mine.free(offset)
        return msg

    def flush_releases(self) -> None:
        """Send pending releases now (when no other message is due to carry them)."""
        if self._releases:
            self.send({"op": "rel"})

    def _take_releases(self) -> list[int]:
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
        shape = tuple(int(d) for d in array.shape)
        if datatype == "BYTES":
            nbytes = encoded_size(array)
            offset = self.mine.alloc(nbytes) if nbytes >= INLINE_BYTES else None
            if offset is None:
                buf = bytearray(nbytes)
                encode_into(array, memoryview(buf))
                return (name, datatype, shape, "i", buf, nbytes)
            encode_into(array, memoryview(self.mine.map)[offset : offset + nbytes])
            return (name, datatype, shape, "s", offset, nbytes)
        array = np.ascontiguousarray(array)
        nbytes = array.nbytes
        offset = self.mine.alloc(nbytes) if nbytes >= INLINE_BYTES else None
        if offset is None:
            return (name, datatype, shape, "i", bytearray(array.tobytes()), nbytes)
        target = np.frombuffer(self.mine.map, dtype=array.dtype, count=array.size, offset=offset)
        np.copyto(target, array.reshape(-1), casting="no")
        return (name, datatype, shape, "s", offset, nbytes)

    def get(self, desc: TensorDesc) -> np.ndarray[Any, Any]:
        """The array a descriptor names: a view of the peer's arena, released when dropped."""
        _, datatype, shape, where, a, nbytes = desc
        if datatype == "BYTES":
            if where == "i":
                return deserialize_bytes_tensor(a).reshape(shape)
            try:
                return deserialize_bytes_tensor(memoryview(self.theirs.map)[a : a + nbytes]).reshape(shape)
            finally:
                self._releases.append(a)
        dtype = np.dtype(_numpy_type(datatype))
        count = nbytes // dtype.itemsize if dtype.itemsize else 0
        if where == "i":
            return np.frombuffer(a, dtype=dtype, count=count).reshape(shape)
        array = np.frombuffer(self.theirs.map, dtype=dtype, count=count, offset=a)
        weakref.finalize(array.base, self._releases.append, a)
        return array.reshape(shape)
