"""Triton's rate limiter (``--rate-limit execution_count``).

An instance that declares ``rate_limiter { resources [...] }`` in its
instance group may execute only while the resources it needs are free; a
resource's capacity is the most any instance asks for, or what
``--rate-limit-resource name:count[:device]`` sets. Resources are per device
unless ``global: true``. Waiting instances are served by priority (a lower
``priority`` value gets more chances, as Triton's weighting), then in arrival
order.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tritonpy_sdk import TritonError


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


class RateLimiter:
    """Resource pools shared by every model of a server."""

    def __init__(self, explicit: dict[tuple[str, int | None], int] | None = None) -> None:
        self._explicit = explicit or {}
        self._capacity: dict[tuple[str, int], int] = {}
        self._used: dict[tuple[str, int], int] = {}
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._waiting: list[tuple[int, int, Need]] = []

    @staticmethod
    def _key(name: str, device: int, is_global: bool) -> tuple[str, int]:
        return (name, -1 if is_global else device)

    def register(self, need: Need) -> None:
        """Size the pools so that ``need`` can ever be met (Triton: the largest request)."""
        with self._cond:
            for name, count, is_global in need.resources:
                key = self._key(name, need.device, is_global)
                explicit = self._explicit.get(
                    (name, None if is_global else need.device), self._explicit.get((name, None))
                )
                if explicit is not None:
                    if explicit < count:
                        raise TritonError.invalid_arg(
                            f"resource '{name}' has {explicit} units (--rate-limit-resource) "
                            f"but an instance needs {count}"
                        )
                    self._capacity[key] = explicit
                else:
                    self._capacity[key] = max(self._capacity.get(key, 0), count)
                self._used.setdefault(key, 0)

    def _fits(self, need: Need) -> bool:
        return all(
            self._used[self._key(n, need.device, g)] + c <= self._capacity[self._key(n, need.device, g)]
            for n, c, g in need.resources
        )

    @contextmanager
    def hold(self, need: Need) -> Iterator[None]:
        """Block until ``need`` fits (and no higher-priority waiter fits first), then hold it."""
        if not need.resources:
            yield
            return
        ticket = (max(1, need.priority), next(self._tickets), need)
        with self._cond:
            self._waiting.append(ticket)
            while not (self._fits(need) and self._first_fitting() is ticket):
                self._cond.wait()
            self._waiting.remove(ticket)
            for n, c, g in need.resources:
                self._used[self._key(n, need.device, g)] += c
        try:
            yield
        finally:
            with self._cond:
                for n, c, g in need.resources:
                    self._used[self._key(n, need.device, g)] -= c
                self._cond.notify_all()

    def _first_fitting(self) -> tuple[int, int, Need] | None:
        for ticket in sorted(self._waiting, key=lambda t: (t[0], t[1])):
            if self._fits(ticket[2]):
                return ticket
        return None
