"""Who reads the stub's socket, and when.

The main thread reads while it waits for work, so a batch arrives on the thread
that runs it: no hand-off between threads and no second wake-up per batch.
While ``execute`` runs nobody reads, unless

- a reply is awaited (a BLS call, a metric or model-control query), or
- ``execute`` has run for ``PATIENCE`` seconds: cancellations, readiness checks
  and the release of shared-memory blocks must not wait for it to end;

then a helper thread reads until neither holds any more. An ``async def
execute`` model has batches in flight while its event loop runs, so there the
helper reads all the time (``read_always``).

Exactly one thread reads at a time (the *reading turn*); a message meant for
another thread is handed to it: main's messages (a batch, ``fini``, ...) through
``next``, the others through ``dispatch``.
"""

from __future__ import annotations

import collections
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from ._wire import Link

#: How long ``execute`` may run before the helper starts reading beside it, and how
#: long the helper waits for a message before it checks whether it is still needed.
PATIENCE = 0.02
#: After this long with no batch the helper stops checking on the main thread.
_IDLE = 1.0


class LinkReader:
    """The reading turn of one link.

    ``dispatch(msg)`` handles a message any thread may handle (a reply, a
    cancellation, ...) and returns True; it returns False for a message that is
    the main thread's, which then comes out of ``next``. ``awaited()`` tells
    whether a reply is awaited.
    """

    def __init__(
        self,
        link: Link,
        dispatch: Callable[[dict[str, Any]], bool],
        awaited: Callable[[], bool],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self._link = link
        self._dispatch = dispatch
        self._awaited = awaited
        self._on_error = on_error
        self._cv = threading.Condition(threading.Lock())
        self._reading = False
        self._mine: collections.deque[dict[str, Any]] = collections.deque()
        self._always = False
        self._parked = False
        #: When the batch ``execute`` is running started (None between batches), set by
        #: the main thread without the lock: a plain attribute store.
        self._busy_since: float | None = None
        self._last_busy = 0.0
        self._poller: select.poll | None = None  # ``drain``'s, made at its first call
        threading.Thread(target=self._help, name="stub-reader", daemon=True).start()

    # -- the main thread ---------------------------------------------------------------------

    def next(self) -> dict[str, Any]:
        """The main thread's next message, read on this thread when nobody else reads."""
        cv = self._cv
        with cv:
            while not self._mine:
                if not self._reading:
                    self._reading = True
                    break
                cv.wait()
            else:
                return self._mine.popleft()
        try:
            while True:
                msg = self._recv()
                if not self._dispatch(msg):
                    return msg
        finally:
            self._end_turn()

    def drain(self) -> None:
        """Take the messages the socket already holds, when nobody else reads: a
        batch sent while another ran (the server's ``pipeline_depth``) may have had
        its cancellation sent behind it, and ``is_cancelled()`` should say so
        when its ``execute`` starts. Main's messages wait for ``next``."""
        cv = self._cv
        with cv:
            if self._reading:  # the helper reads: it hands cancellations on as they come
                return
            self._reading = True
        try:
            poller = self._poller
            if poller is None:  # one poll object for the link's life (``Connection.poll``
                # makes a selector per call: ~2 µs against ~0.3)
                poller = self._poller = select.poll()
                poller.register(self._link.conn.fileno(), select.POLLIN)
            while poller.poll(0):
                msg = self._recv()
                if not self._dispatch(msg):
                    with cv:
                        self._mine.append(msg)
        finally:
            self._end_turn()

    def _end_turn(self) -> None:
        """The main thread gives up the reading turn it took in ``next`` or ``drain``."""
        with self._cv:
            self._reading = False
            if self._awaited():  # the helper reads for the thread that awaits it
                self._cv.notify_all()

    def busy(self) -> None:
        """The main thread starts a batch."""
        self._busy_since = time.monotonic()
        if self._parked:
            with self._cv:
                self._cv.notify_all()

    def idle(self) -> None:
        """The main thread is done with its batch."""
        self._last_busy = time.monotonic()
        self._busy_since = None

    def awaiting(self) -> None:
        """A reply is now awaited: make sure somebody reads."""
        with self._cv:
            if not self._reading:
                self._cv.notify_all()

    def read_always(self) -> None:
        """From now on the helper reads, whatever the main thread does."""
        with self._cv:
            self._always = True
            self._cv.notify_all()

    # -- the helper --------------------------------------------------------------------------

    def _needed(self) -> bool:
        if self._always or self._awaited():
            return True
        since = self._busy_since
        return since is not None and time.monotonic() - since >= PATIENCE

    def _help(self) -> None:
        cv = self._cv
        while True:
            with cv:
                while self._reading or not self._needed():
                    # Woken by the main thread's hand-over or a reply awaited; and while
                    # batches come, by a timer that notices a long ``execute``. Parked
                    # (no timer) after a second with no batch, so an idle stub sleeps.
                    timeout: float | None = None
                    since = self._busy_since
                    if since is not None and not self._reading:
                        timeout = max(since + PATIENCE - time.monotonic(), 0.001)
                    elif since is not None or time.monotonic() - self._last_busy < _IDLE:
                        timeout = PATIENCE
                    self._parked = timeout is None
                    cv.wait(timeout)
                    self._parked = False
                self._reading = True
            while True:
                if self._always or self._link.conn.poll(PATIENCE):
                    msg = self._recv()
                    if not self._dispatch(msg):
                        with cv:
                            self._mine.append(msg)
                            cv.notify_all()
                with cv:
                    if not self._needed():
                        self._reading = False
                        cv.notify_all()  # the main thread, if it waits for its turn
                        break

    def _recv(self) -> dict[str, Any]:
        try:
            return self._link.recv()
        except (EOFError, OSError):
            os._exit(0)  # the server is gone
        except BaseException as exc:
            self._on_error(exc)
            raise
