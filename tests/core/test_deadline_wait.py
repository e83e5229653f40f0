"""DeadlineWait: a batch former's timed wait ends at its deadline, not a timer's lateness
after it. A fake clock and condition make the timer late on purpose; nothing is timed."""

from __future__ import annotations

import threading

from tritonpy.scheduler._deadline import MAX_LEAD_NS, DeadlineWait


class LateTimer:
    """A clock and a condition whose timed waits time out ``late_ns`` after they were
    asked to, and whose pauses advance the clock by ``pause_ns``: what a timer on a
    virtual machine does. Records every timed wait's timeout and every pause."""

    def __init__(self, late_ns: int, pause_ns: int = 1_000, notified_after: int | None = None) -> None:
        self.now = 1_000_000_000
        self.late_ns = late_ns
        self.pause_ns = pause_ns
        self.asked: list[int] = []
        self.pauses = 0
        self.notified_after = notified_after  # the wait ends notified this many ns in
        self.held = True  # the caller holds the lock on entry
        self.released_while_pausing = True

    # the clock and the pause DeadlineWait is given
    def clock(self) -> int:
        return self.now

    def pause(self, seconds: float) -> None:
        assert seconds == 0
        self.released_while_pausing &= not self.held
        self.pauses += 1
        self.now += self.pause_ns

    # the Condition interface DeadlineWait uses
    def wait(self, timeout: float | None = None) -> bool:
        assert self.held
        if timeout is None:
            return True
        asked = round(timeout * 1e9)
        self.asked.append(asked)
        if self.notified_after is not None and self.notified_after < asked:
            self.now += self.notified_after
            return True
        self.now += asked + self.late_ns
        return False

    def release(self) -> None:
        assert self.held
        self.held = False

    def acquire(self) -> bool:
        assert not self.held
        self.held = True
        return True


def test_a_late_timer_is_learned_and_the_wait_ends_at_its_deadline() -> None:
    timer = LateTimer(late_ns=40_000)
    waits = DeadlineWait(timer.clock, timer.pause)
    ends = []
    for _ in range(40):
        start = timer.now
        assert waits.wait(timer, 200e-6) is False  # type: ignore[arg-type]
        ends.append(timer.now - start)
        assert timer.held
    # The first waits overrun by the whole lateness; once learned, the wait asks for less
    # and ends right at 200 µs (within one pause), never before it.
    assert ends[0] == 240_000
    assert all(end >= 200_000 for end in ends)
    assert ends[-1] < 200_000 + timer.pause_ns + 1_000
    assert 35_000 < waits.lead_ns <= 40_000
    assert 160_000 <= timer.asked[-1] < 165_000  # 200 µs less the lateness learned
    assert timer.released_while_pausing  # the lock was never held while yielding


def test_a_notification_ends_the_wait_early_and_teaches_nothing() -> None:
    timer = LateTimer(late_ns=40_000, notified_after=50_000)
    waits = DeadlineWait(timer.clock, timer.pause)
    assert waits.wait(timer, 200e-6) is True  # type: ignore[arg-type]
    assert timer.now - 1_000_000_000 == 50_000 and timer.pauses == 0
    assert waits.lead_ns == 0


def test_lateness_is_capped_and_a_short_wait_only_yields() -> None:
    timer = LateTimer(late_ns=10_000_000)  # a stalled host: 10 ms late
    waits = DeadlineWait(timer.clock, timer.pause)
    for _ in range(60):
        waits.wait(timer, 1e-3)  # type: ignore[arg-type]
    assert waits.lead_ns <= MAX_LEAD_NS
    # A wait shorter than the learned lateness never sleeps on the timer: it yields.
    timer.late_ns = 0
    asked_before = len(timer.asked)
    start = timer.now
    assert waits.wait(timer, 20e-6) is False  # type: ignore[arg-type]
    assert len(timer.asked) == asked_before
    assert 20_000 <= timer.now - start < 20_000 + timer.pause_ns + 1


def test_a_wait_already_due_only_lets_go_of_the_lock() -> None:
    timer = LateTimer(late_ns=40_000)
    waits = DeadlineWait(timer.clock, timer.pause)
    assert waits.wait(timer, 0) is False  # type: ignore[arg-type]
    assert timer.asked == [0] and timer.pauses == 0 and waits.lead_ns == 0


def test_no_limit_waits_for_a_notification() -> None:
    cond = threading.Condition()
    waits = DeadlineWait()
    woke: list[bool] = []

    def waiter() -> None:
        with cond:
            woke.append(waits.wait(cond, None))

    thread = threading.Thread(target=waiter)
    thread.start()
    while True:
        with cond:
            if cond._waiters:  # type: ignore[attr-defined]
                cond.notify()
                break
    thread.join(10)
    assert woke == [True]


def test_a_real_timed_wait_never_ends_before_its_deadline() -> None:
    import time

    cond = threading.Condition()
    waits = DeadlineWait()
    with cond:
        for _ in range(50):
            start = time.monotonic_ns()
            assert waits.wait(cond, 300e-6) is False
            assert time.monotonic_ns() - start >= 300_000
