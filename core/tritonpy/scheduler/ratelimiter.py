"""Triton's rate limiter (``--rate-limit execution_count``): which instance runs next.

An instance that declares ``rate_limiter { resources [...] }`` in its instance
group may execute only while the resources it needs are free; a resource's
capacity is the most any instance asks for, or what
``--rate-limit-resource name:count[:device]`` sets (once one is given, a
resource no flag names has none: an instance needing it is refused, as in
Triton). Resources are per device unless ``global: true``; a name is one or
the other across the server.

As in Triton, the limiter chooses the instance, before a batch is bound to one:
a rate-limited model's scheduler offers its idle instances (``acquire``) and
gets the one whose resources fit, reserved, or nothing and a wake-up when
resources are released. Work stays queued meanwhile, so an instance whose
resources are taken never holds a batch another instance could run. Waiting
schedulers are served by priority (a lower ``priority`` value first, as
Triton's weighting gives it more chances), then in the order they began to
wait; a scheduler passes over a fitting instance only for an earlier waiter
that wants the same resource.

Every rate-limited scheduler waits on conditions built on the limiter's one
lock (``lock``), and calls ``acquire``, ``release`` and ``withdraw`` with
it held: a wake-up is then a plain ``notify`` and no two locks are ever taken
in opposite orders.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tritonpy_sdk import TritonError

log = logging.getLogger("tritonpy.ratelimiter")


@dataclass(frozen=True)
class Need:
    """What one instance needs to execute."""

    resources: tuple[tuple[str, int, bool], ...]  # (name, count, global)
    device: int
    priority: int = 1


def parse_resource_flags(items: Iterable[str]) -> dict[tuple[str, int | None], int]:
    """``--rate-limit-resource name:count[:device]`` → {(name, device or None): count}."""
    out: dict[tuple[str, int | None], int] = {}
    for item in items:
        parts = item.split(":")
        try:
            if len(parts) == 2:
                out[(parts[0], None)] = int(parts[1])
            elif len(parts) == 3:
                out[(parts[0], int(parts[2]))] = int(parts[1])
            else:
                raise ValueError
        except ValueError:
            raise TritonError.invalid_arg(
                f"--rate-limit-resource expects <name>:<count>[:<device>], got '{item}'"
            ) from None
    return out


@dataclass(eq=False)
class _Waiter:
    rank: tuple[int, int]  # (best priority among its candidates, when it began to wait)
    candidates: tuple[Need, ...]
    wake: Callable[[], None]


class RateLimiter:
    """Resource pools shared by every model of a server."""

    def __init__(self, explicit: dict[tuple[str, int | None], int] | None = None) -> None:
        self._explicit = explicit or {}
        self._capacity: dict[tuple[str, int], int] = {}
        #: The needs registered for each pool: count → how many instances need that many.
        self._wanted: dict[tuple[str, int], collections.Counter[int]] = {}
        self._used: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._tickets = itertools.count()
        self._waiters: dict[object, _Waiter] = {}

    @staticmethod
    def _key(name: str, device: int, is_global: bool) -> tuple[str, int]:
        return (name, -1 if is_global else device)

    @property
    def lock(self) -> threading.Lock:
        """The limiter's lock: a rate-limited scheduler's conditions are made on it."""
        return self._lock

    def register(self, need: Need) -> None:
        """Size the pools so that ``need`` can ever be met (Triton: the largest need of the
        instances registered, or ``--rate-limit-resource``); as Triton's resource manager,
        refuse it, before anything changes, when it needs more than the flags give (once
        any is given, a resource it does not name has none) or names a resource global
        that another instance has per device, or the other way round."""
        with self._lock:
            for name, count, is_global in need.resources:
                key = self._key(name, need.device, is_global)
                explicit = self._explicit_size(key)
                if explicit is not None and explicit < count:
                    raise TritonError.invalid_arg(
                        f'Resource count for "{name}" is limited to {explicit} which will prevent '
                        "scheduling of one or more model instances, the minimum required count "
                        f"is {count}"
                    )
                kinds = {is_global for n, _, is_global in need.resources if n == name}
                kinds |= {d == -1 for (n, d), wanted in self._wanted.items() if n == name and wanted}
                if len(kinds) > 1:
                    raise TritonError.invalid_arg(
                        f'Resource "{name}" is present as both global and device-specific '
                        "resource in the model configuration."
                    )
            for name, count, is_global in need.resources:
                key = self._key(name, need.device, is_global)
                self._wanted.setdefault(key, collections.Counter())[count] += 1
                self._resize(key)
                self._used.setdefault(key, 0)
            self._log_sizes()

    def unregister(self, need: Need) -> None:
        """An instance ``register`` sized the pools for is gone: a pool shrinks to the
        largest need left (as Triton's, when instances are removed)."""
        with self._lock:
            for name, count, is_global in need.resources:
                key = self._key(name, need.device, is_global)
                wanted = self._wanted.get(key)
                if not wanted or not wanted[count]:
                    continue
                wanted[count] -= 1
                if not wanted[count]:
                    del wanted[count]
                self._resize(key)
            self._log_sizes()

    def _explicit_size(self, key: tuple[str, int]) -> int | None:
        """What ``--rate-limit-resource`` gives the pool ``key``, as Triton reads the flags:
        a global resource the most any flag gives its name, whatever the device; a
        device's the most of its own flag and the per-device one; 0 for a resource no
        flag names, once any flag is given (None: no flags, the pools size themselves)."""
        if not self._explicit:
            return None
        name, device = key
        sizes = [
            count
            for (n, d), count in self._explicit.items()
            if n == name and (device == -1 or d is None or d == device)
        ]
        return max(sizes, default=0)

    def _resize(self, key: tuple[str, int]) -> None:
        explicit = self._explicit_size(key)
        self._capacity[key] = explicit if explicit is not None else max(self._wanted.get(key, ()), default=0)

    def _log_sizes(self) -> None:
        """Triton's verbose account of the pools (``Max Resource Map``)."""
        if not log.isEnabledFor(logging.DEBUG):
            return
        text = "\nMax Resource Map===>\n"
        for device in sorted({d for _, d in self._capacity}):
            text += f"\tDevice: {'GLOBAL' if device == -1 else device}\n"
            for (name, d), count in sorted(self._capacity.items()):
                if d == device:
                    text += f"\t\tResource: {name}\t Count: {count}\n"
        log.debug("%s", text)

    # -- with the lock held (a rate-limited scheduler's condition) ---------------------

    def acquire(self, owner: object, candidates: Sequence[Need], wake: Callable[[], None]) -> int | None:
        """Reserve the resources of one of ``candidates`` (``owner``'s idle instances)
        and return its index; or, when none may run now, return None: ``owner`` waits
        and ``wake()`` is called whenever the resources change, until it acquires or
        ``withdraw``s."""
        waiter = self._waiters.get(owner)
        ticket = waiter.rank[1] if waiter is not None else next(self._tickets)
        rank = (min(max(1, c.priority) for c in candidates), ticket)
        ahead = [w for o, w in self._waiters.items() if o is not owner and w.rank < rank]
        for index in sorted(range(len(candidates)), key=lambda i: max(1, candidates[i].priority)):
            need = candidates[index]
            if self._fits(need) and not any(self._wants_same(w, need) for w in ahead):
                self._waiters.pop(owner, None)
                self._change(need, +1)
                return index
        self._waiters[owner] = _Waiter(rank, tuple(candidates), wake)
        return None

    def release(self, need: Need) -> None:
        """An instance finished executing: free what it held."""
        self._change(need, -1)

    def waiting(self) -> int:
        """How many schedulers wait for resources now."""
        with self._lock:
            return len(self._waiters)

    def withdraw(self, owner: object) -> None:
        """``owner`` no longer waits (no work, or no idle instance to offer)."""
        if self._waiters.pop(owner, None) is not None:
            self._wake_all()  # those that deferred to it may run now

    def _fits(self, need: Need) -> bool:
        return all(
            self._used[self._key(n, need.device, g)] + c <= self._capacity[self._key(n, need.device, g)]
            for n, c, g in need.resources
        )

    def _wants_same(self, waiter: _Waiter, need: Need) -> bool:
        """Whether ``waiter`` could run now on a resource that ``need`` would take."""
        taken = {self._key(n, need.device, g) for n, _, g in need.resources}
        return any(
            self._fits(c) and any(self._key(n, c.device, g) in taken for n, _, g in c.resources)
            for c in waiter.candidates
        )

    def _change(self, need: Need, sign: int) -> None:
        if not need.resources:
            return
        for n, c, g in need.resources:
            self._used[self._key(n, need.device, g)] += sign * c
        self._wake_all()

    def _wake_all(self) -> None:
        for waiter in self._waiters.values():
            waiter.wake()
