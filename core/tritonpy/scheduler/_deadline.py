"""Timed waits that end at their deadline: the queue delay of a batch former.

A thread that sleeps until a batch is due wakes when the kernel's timer fires,
some time after the timeout: its timer slack (50 µs by default on Linux, set to
1 µs by ``precise_timeouts``) plus the time to deliver the interrupt and run the
thread, which on a virtual machine is itself 30-45 µs (measured on a 2-core
Firecracker guest: a 200 µs ``Condition.wait`` ended 43 µs late with 1 µs slack,
92 µs with the default). A 200 µs ``max_queue_delay_microseconds`` then delays a
lone request by a fifth more than the configured maximum.

``DeadlineWait`` learns how late its timed waits end, asks for that much less,
and yields the processor (the lock and the GIL released) for whatever is left
until the deadline: the wait ends at the deadline, never before it, and the
thread spins only for the timer's jitter, not for its lateness.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable

#: Linux's prctl option that sets the calling thread's timer slack, in ns.
_PR_SET_TIMERSLACK = 29
#: The most a wait is shortened by (what a timer may be late by, however it measured).
MAX_LEAD_NS = 100_000
#: Weight of the newest lateness in the running estimate (1/8: a few waits to adapt).
_SHIFT = 3


def precise_timeouts() -> bool:
    """Let the calling thread's timed waits end within 1 µs of their deadline (Linux: its
    timer slack, 50 µs by default, which a 100-500 µs queue delay would overrun by a
    tenth or more). Whether it was set; elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no C library to ask
        return False


class DeadlineWait:
    """``wait(cond, seconds)``: as ``cond.wait(seconds)`` (the lock held on entry and on
    return; a notification ends it early), but a wait that times out returns at its
    deadline rather than a timer's lateness after it. Shared by the threads of one
    scheduler; its estimate is a hint, so unsynchronized updates are harmless."""

    def __init__(
        self,
        clock: Callable[[], int] = time.monotonic_ns,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._pause = pause
        #: How late a timed wait has ended after its timeout (ns, a running average).
        self.lead_ns = 0

    def wait(self, cond: threading.Condition, seconds: float | None) -> bool:
        """Wait on ``cond`` until notified (True) or ``seconds`` have passed (False; None:
        no limit). The caller decides again either way, as after ``Condition.wait``."""
        if seconds is None:
            return cond.wait()
        if seconds <= 0:
            return cond.wait(0)  # due now: only let others take the lock a moment
        start = self._clock()
        due = start + int(seconds * 1e9)
        asked = due - start - self.lead_ns
        if asked > 0:
            if cond.wait(asked / 1e9):
                return True
            late = self._clock() - (start + asked)
            self.lead_ns += (min(max(late, 0), MAX_LEAD_NS) - self.lead_ns) >> _SHIFT
        if self._clock() >= due:
            return False
        # The last stretch, shorter than a timer's lateness: give the processor away
        # until the deadline, holding neither the lock (arrivals queue meanwhile; the
        # caller sees them when it decides again) nor the GIL (``sleep(0)`` releases it).
        cond.release()
        try:
            while self._clock() < due:
                self._pause(0)
        finally:
            cond.acquire()
        return False
