"""GPU tensors between server and stub, through CUDA IPC.

Each side of a link owns, per GPU, one *device arena*: a buffer of its own
(``cudaMalloc``) whose IPC handle the peer opens once (``cudaIpcOpenMemHandle``)
and keeps open for the life of the link. A GPU tensor crosses as a copy, device
to device, into a block of the sender's arena; its descriptor names the GPU,
the arena's handle and the block's offset (``("g", (device, handle, offset))``
in ``_wire.TensorDesc``). It is the host ``Arena``'s design on the GPU:

- **Lifetimes.** The sender's block stays allocated until the receiver hands it
  back, exactly as host blocks are: the stub releases an input's block when the
  last user of the tensor ``model.py`` got is gone (the ``pb_utils.Tensor``, and
  every torch tensor made from it through DLPack); the server releases an
  output's block as soon as it has copied it into device memory of its own. The
  release rides on the receiver's next message (``Link.release``). So the source
  of a tensor (a client's CUDA shared-memory region, the model's torch tensor)
  may be freed the moment the copy returns, and no block is reused while its
  reader may still read it.
- **No "already mapped".** A process may map an allocation only once, and a new
  allocation at a freed one's address cannot be opened while the old mapping
  lives. Mapping per tensor would hit both (two inputs in one client region; a
  region freed and allocated again). Here each side opens each of the peer's
  arenas exactly once, and an arena is freed only when its link ends: the
  server closes a stub's arenas and frees its own after that stub has exited,
  before a restarted stub (a new link) maps anything.
- **Any source.** The copy makes every device pointer sendable: memory the
  server itself mapped from a client (which cannot be exported again), stream-
  ordered or virtual-memory allocations (which ``cudaIpcGetMemHandle`` refuses).
- **Synchronisation.** In the stub, ``Cuda.copy`` first waits for the device, so
  the model's kernels (on any stream) are done when its output is copied; on both
  sides it waits for the copy itself, so the block is complete before its
  descriptor is sent.

A tensor that does not fit the arena (``cuda-ipc-byte-size``), or any failure of
the device path, makes the tensor cross as host data, as without a GPU: slower,
never an error.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ._cuda import Cuda, CudaError
from ._wire import Blocks, Link, TensorDesc

log = logging.getLogger("tritonpy.backend.python")

#: Where a "g" descriptor's GPU memory is: (device, IPC handle of the sender's arena, offset).
GpuPlace = tuple[int, bytes, int]


class DeviceArena(Blocks):
    """A device buffer of this process, handed out in blocks, and its IPC handle."""

    def __init__(self, cuda: Cuda, device: int, size: int) -> None:
        super().__init__(size)
        self.device = device
        self.address = cuda.malloc(device, size)
        try:
            self.handle = cuda.ipc_handle(device, self.address)
        except CudaError:
            cuda.free(device, self.address)
            raise


class _Held:
    """Stands for a block of the peer's device arena while something reads it."""

    __slots__ = ("__weakref__",)


class DeviceLink:
    """The device arenas of one side of a ``Link`` (``link.device``), and the peer's."""

    def __init__(self, link: Link, cuda: Cuda, arena_bytes: int, wait_device: bool = True) -> None:
        self.link = link
        self.cuda = cuda
        self.arena_bytes = arena_bytes
        #: Whether a copy first waits for all work on the device: in the stub, where a
        #: model's kernels may still be writing its output on a stream of its own; the
        #: server's sources are complete (its copies are synchronous).
        self.wait_device = wait_device
        #: My arena per GPU; None where it could not be made (tensors then go by host).
        self._mine: dict[int, DeviceArena | None] = {}
        #: The peer's arenas I opened: (device, handle) → where it is mapped here.
        self._theirs: dict[tuple[int, bytes], int] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- sending ---------------------------------------------------------------------------

    def put(
        self, name: str, datatype: str, device: int, address: int, shape: Sequence[int], nbytes: int
    ) -> TensorDesc | None:
        """Copy ``nbytes`` of GPU ``device`` at ``address`` into a block of my arena and
        describe it for the peer; None when it cannot cross so (send it as host data)."""
        with self._lock:
            if self._closed:
                return None
            arena = self._arena(device)
            offset = arena.alloc(nbytes) if arena is not None else None
            if arena is None or offset is None:
                return None
            try:
                if nbytes:
                    self.cuda.copy(device, arena.address + offset, address, nbytes, self.wait_device)
            except CudaError as exc:
                arena.free(offset)
                log.warning("a GPU tensor crosses as host data: copying it failed: %s", exc)
                return None
        place: GpuPlace = (device, arena.handle, offset)
        return (name, datatype, tuple(int(d) for d in shape), "g", place, nbytes)

    def _arena(self, device: int) -> DeviceArena | None:
        if device in self._mine:
            return self._mine[device]
        arena = None
        try:
            arena = DeviceArena(self.cuda, device, self.arena_bytes)
        except CudaError as exc:
            log.warning("no CUDA IPC arena on GPU %d (%s): its tensors cross as host data", device, exc)
        self._mine[device] = arena
        return arena

    def free(self, block: Any) -> None:
        """The peer is done with ``(device, offset)`` of my arena."""
        device, offset = block
        arena = self._mine.get(device)
        if arena is not None:
            arena.free(offset)

    # -- receiving -------------------------------------------------------------------------

    def address(self, place: GpuPlace) -> int:
        """Where the block ``place`` names lies in this process (its arena opened once)."""
        device, handle, offset = place
        key = (device, handle)
        base = self._theirs.get(key)
        if base is None:
            with self._lock:
                if self._closed:
                    raise CudaError("the link's device arenas are closed")
                base = self._theirs.get(key)
                if base is None:
                    base = self._theirs[key] = self.cuda.ipc_open(device, handle)
        return base + offset

    def holder(self, place: GpuPlace) -> object:
        """An object that hands the block back to the peer when it is garbage collected."""
        held = _Held()
        weakref.finalize(held, self.link.release, (place[0], place[2]))
        return held

    def release(self, place: GpuPlace) -> None:
        """Hand the block back now (its data has been copied)."""
        self.link.release((place[0], place[2]))

    def to_host(self, place: GpuPlace, nbytes: int, out_address: int) -> None:
        """Copy the block to host memory at ``out_address``."""
        if nbytes:
            self.cuda.copy_to_host(place[0], out_address, self.address(place), nbytes)

    # -- the end of the link ------------------------------------------------------------------

    def close(self) -> None:
        """Close the peer's arenas and free mine: only once the peer process has exited
        (it may still read my blocks until then)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            theirs, self._theirs = self._theirs, {}
            mine, self._mine = self._mine, {}
        for (device, _), address in theirs.items():
            try:
                self.cuda.ipc_close(device, address)
            except CudaError as exc:
                log.warning("closing a stub's CUDA IPC arena on GPU %d: %s", device, exc)
        for arena in mine.values():
            if arena is not None:
                try:
                    self.cuda.free(arena.device, arena.address)
                except CudaError as exc:
                    log.warning("freeing a CUDA IPC arena on GPU %d: %s", arena.device, exc)
