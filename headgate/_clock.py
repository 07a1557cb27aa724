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


_BOOT_CLOCK: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def _elapsed_ns() -> int:
    """A clock no one can step that, unlike the plain monotonic clock, keeps
    counting while the machine is suspended (Linux's CLOCK_BOOTTIME)."""
    return time.clock_gettime_ns(_BOOT_CLOCK) if _BOOT_CLOCK is not None else time.monotonic_ns()


class StoreClock:
    """Time as the store sees it: the store's clock as last read, carried forward
    on this host's monotonic clock.

    Hosts sharing a PostgreSQL store agree on one time this way, so a host
    whose own clock runs ahead cannot take a live holder's lease, nor fire
    ticks early; and a step of this host's clock (an operator, NTP, a resumed
    VM) changes nothing, since between readings only a monotonic clock that
    also counts suspended time is used. The store reads its clock (`measure`)
    when it opens, at every lease claim or renewal, and in a write once a
    reading is `READ_EVERY_S` old (a process that never runs the scheduler).
    A SQLite store is on this host: its clock is the local one, read the same
    way, so a step there takes effect at the next reading rather than at once.
    """

    READ_EVERY_S = 60.0
    TOLERANCE_MS = 20
    """Readings within this of the running time are jitter, not drift: ignored,
    so store time does not wobble with every round trip."""

    def __init__(self, local: Clock | None = None, *, read_every_s: float = READ_EVERY_S) -> None:
        self._read_every_ns = read_every_s * 1e9
        self._local = local if local is not None else SystemClock()
        self._anchor = (self._local.now_ms(), _elapsed_ns())
        """(store ms, monotonic ns) at the last reading, replaced as one value."""
        self._read_at_ns = self._anchor[1]

    @property
    def reading_due(self) -> bool:
        return _elapsed_ns() - self._read_at_ns >= self._read_every_ns

    @property
    def offset_ms(self) -> int:
        """How far store time is from this host's own clock."""
        return self.now_ms() - self._local.now_ms()

    def now_ms(self) -> int:
        anchor_ms, anchor_ns = self._anchor
        return anchor_ms + (_elapsed_ns() - anchor_ns) // 1_000_000

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        remaining = deadline_ms - self.now_ms()
        if remaining > 0:
            interrupt.wait(remaining / 1000)

    def measure(self, read_store_ms: Callable[[], int] | None = None) -> None:
        """Read the store's clock (None: the store is this host, its clock the local
        one) and carry time on from the round trip's midpoint."""
        read = read_store_ms if read_store_ms is not None else self._local.now_ms
        before = _elapsed_ns()
        store_ms = read()
        after = _elapsed_ns()
        midpoint = (before + after) // 2
        self._read_at_ns = midpoint
        anchor_ms, anchor_ns = self._anchor
        running_ms = anchor_ms + (midpoint - anchor_ns) // 1_000_000
        if abs(store_ms - running_ms) > self.TOLERANCE_MS:
            self._anchor = (store_ms, midpoint)
