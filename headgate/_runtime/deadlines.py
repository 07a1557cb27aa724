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

    Watching and forgetting are cheap (a dict under a lock) since the pool
    does both for every attempt; the thread wakes only when the earliest
    deadline it knows of passes, or an earlier one is added.
    """

    def __init__(self, clock: Clock, *, name: str = "headgate-deadlines") -> None:
        self._clock = clock
        self._watched: dict[Expiring, int] = {}
        self._next_ms: int | None = None
        """The earliest deadline watched when last looked (perhaps since forgotten)."""
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
            due = [item for item, deadline in self._watched.items() if deadline <= now_ms]
            for item in due:
                del self._watched[item]
            self._next_ms = min(self._watched.values(), default=None)
        return due
