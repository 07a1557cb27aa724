"""Time, injected: everything that needs "now" asks a Clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Epoch milliseconds, UTC."""

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        """Block until the clock reaches `deadline_ms` or `interrupt` is set."""


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        remaining = deadline_ms - self.now_ms()
        if remaining > 0:
            interrupt.wait(remaining / 1000)


class StoreClock:
    """Time as the store sees it: a local clock corrected by its measured offset
    from the database server's clock.

    Hosts sharing a PostgreSQL store agree on one time this way, so a host
    whose own clock runs ahead cannot take a live holder's lease, nor fire
    ticks early. The store measures the offset (`measure`) when it claims or
    renews a lease; with SQLite, one host's store, it stays 0.
    """

    TOLERANCE_MS = 20
    """Offsets closer than this to the current one are jitter, not drift: ignored,
    so store time does not wobble with every round trip."""

    def __init__(self, local: Clock | None = None) -> None:
        self._local = local if local is not None else SystemClock()
        self._offset_ms = 0

    @property
    def offset_ms(self) -> int:
        return self._offset_ms

    def now_ms(self) -> int:
        return self._local.now_ms() + self._offset_ms

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        self._local.sleep_until(deadline_ms - self._offset_ms, interrupt)

    def measure(self, read_store_ms: Callable[[], int]) -> None:
        """Read the store's clock and take the offset from the round trip's midpoint."""
        before = self._local.now_ms()
        store_ms = read_store_ms()
        after = self._local.now_ms()
        offset = store_ms - (before + after) // 2
        if abs(offset - self._offset_ms) > self.TOLERANCE_MS:
            self._offset_ms = offset


class FakeClock:
    """A clock that only moves when told to; sleepers wake as it passes them.

    `sleep_until` polls its interrupt in short real-time slices, so a test that
    sets the interrupt or advances the clock releases sleepers at once.
    """

    def __init__(self, start_ms: int = 1_704_067_200_000) -> None:
        self._now = start_ms
        self._moved = threading.Condition()

    def now_ms(self) -> int:
        with self._moved:
            return self._now

    def set(self, now_ms: int) -> None:
        with self._moved:
            if now_ms < self._now:
                raise ValueError(f"a fake clock never goes back ({now_ms} < {self._now})")
            self._now = now_ms
            self._moved.notify_all()

    def advance(self, delta_ms: int) -> int:
        with self._moved:
            self.set(self._now + delta_ms)
            return self._now

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        with self._moved:
            while self._now < deadline_ms and not interrupt.is_set():
                self._moved.wait(0.005)
