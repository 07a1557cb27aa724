"""Holds running attempts to their deadlines, on a thread of its own.

A deadline is an instant on the injected clock (store time), so it passes
when the clock says so: a test moves a fake clock past it, and the attempt
is timed out then, whoever is running its handler. What a timeout does to
the attempt is the attempt's business (`attempts.Attempt.expire`); this
service only watches the time, so the worker pool's dispatcher and
`drain()`'s calling thread never have to look up from their own work to
notice one.
"""

from __future__ import annotations

import threading
from typing import Protocol

from headgate._clock import Clock


class Expiring(Protocol):
    """Something with a deadline that knows what to do when it passes."""

    @property
    def deadline_ms(self) -> int: ...

    def expire(self) -> None:
        """Called once, on the service's thread, when the clock reaches deadline_ms."""


class Deadlines:
    """Calls `expire()` on each watched item when the clock reaches its deadline.

    Watching and forgetting are cheap (a dict under a lock, no wake-up) since
    the pool and drain() do both for every attempt: the thread sleeps until a
    time no later than every watched deadline, and is woken only by a deadline
    nearer than that. Forgetting leaves that time as it was, so attempts that
    come and go (each deadline later than the last) never wake it; it wakes
    there, finds nothing due, and sleeps until the earliest deadline left.
    """

    def __init__(self, clock: Clock, *, name: str = "headgate-deadlines") -> None:
        self._clock = clock
        self._watched: dict[Expiring, int] = {}
        self._next_ms: int | None = None
        """When the thread looks next: no later than any watched deadline (None:
        nothing is watched)."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop watching: what is still watched never expires."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            self._watched.clear()

    def watch(self, item: Expiring) -> None:
        deadline = item.deadline_ms
        with self._lock:
            self._watched[item] = deadline
            if self._next_ms is None or deadline < self._next_ms:
                self._next_ms = deadline
                self._wake.set()

    def forget(self, item: Expiring) -> None:
        """It ended before its deadline: never expire it."""
        with self._lock:
            self._watched.pop(item, None)

    def _serve(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            for item in self._take_due(self._clock.now_ms()):
                item.expire()
            next_ms = self._next_ms
            if next_ms is None:
                self._wake.wait()
            else:
                self._clock.sleep_until(next_ms, self._wake)

    def _take_due(self, now_ms: int) -> list[Expiring]:
        with self._lock:
            if self._next_ms is None or now_ms < self._next_ms:
                return []  # woken early: a nearer deadline, already in _next_ms, or stop
            due = [item for item, deadline in self._watched.items() if deadline <= now_ms]
            for item in due:
                del self._watched[item]
            self._next_ms = min(self._watched.values(), default=None)
        return due
