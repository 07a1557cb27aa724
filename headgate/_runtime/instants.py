"""When a batch due at an instant opens its transaction, and when it commits.

A thousand schedules sharing one instant must be enqueued at that instant,
not one batch-write later, and their transaction must hold the store's
write lock as briefly as possible. So a batch sent ahead of its instant
opens its transaction just early enough to be written by then (from the
write speed measured so far), and holds its commit until the clock reaches
the instant. This module is the one place that waits for an instant; the
store only records the events at it (`EventLog.write(record_at_ms=...)`).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Final

from headgate._clock import Clock

INITIAL_WRITE_MS_PER_TICK: Final = 0.2
"""Until measured: a generous guess at the write cost of one tick."""
MAX_WRITE_MS_PER_TICK: Final = 1.0
"""A stalled write is not a speed: the estimate never learns beyond this."""
LEARN_FROM_TICKS: Final = 100
"""Only batches this big teach the per-tick write cost; in smaller ones (single
ticks, schedule-by-schedule retries) the transaction's fixed cost dominates."""
LEARNING_RATE: Final = 0.3
WRITE_ESTIMATE_SAFETY: Final = 2.0
WRITE_SLACK_MS: Final = 10
"""Covers a transaction's fixed cost (begin, fence, head, checkpoints)."""
INSTANT_GRACE_S: Final = 0.1
"""Real time a wait may overrun the clock's own distance to its instant."""
LEAD_MARGIN_MS: Final = 50
"""Added to a late batch's lateness when the next instant's lead grows."""
MAX_LEAD_MS: Final = 3_000
"""The furthest ahead of its instant a batch is ever sent."""


class InstantNotReached(Exception):
    """A write held for an instant was abandoned before it: nothing was committed.

    Raised when the runtime stops while the write waits, or when the clock
    does not reach the instant within the real time it should take (a fake
    clock that a test is not advancing, a clock stepped backwards).
    """


def wait_for_instant(clock: Clock, instant_ms: int, cancel: threading.Event) -> bool:
    """Wait until `clock` reaches `instant_ms`; False if cancelled before it, or if
    the clock does not get there.

    The wait is capped in real time at the distance the clock showed plus a
    grace, so a clock that stops moving cannot hold a caller (or a write lock)
    forever. Once the instant has passed, a cancel changes nothing.
    """
    remaining_ms = instant_ms - clock.now_ms()
    give_up = time.monotonic() + max(remaining_ms, 0) / 1000 + INSTANT_GRACE_S
    while remaining_ms > 0:
        left_s = give_up - time.monotonic()
        if cancel.is_set() or left_s <= 0:
            return False
        cancel.wait(min(remaining_ms / 1000, left_s))
        remaining_ms = instant_ms - clock.now_ms()
    return True


def next_lead_ms(lead_ms: int, late_ms: int, configured_ms: int) -> int:
    """How long before its instant the next instant's schedules are sent, given
    this lead and how late the last batch sent at it committed.

    `prepare_ahead_ms` suits an instant of a thousand ticks; one of several
    thousand takes longer to read, plan and write than that, and every tick of
    it would commit late by the difference, every time. So a late batch moves
    the lead out by its lateness (and a margin), up to MAX_LEAD_MS; each batch
    on time brings it back a tenth of the way to the configured lead. A
    configured lead of 0 (fire when due) stays 0.
    """
    if configured_ms == 0:
        return 0
    if late_ms > 0:
        return min(lead_ms + late_ms + LEAD_MARGIN_MS, max(MAX_LEAD_MS, configured_ms))
    return max(configured_ms, lead_ms - math.ceil((lead_ms - configured_ms) / 10))


class InstantTiming:
    """The write-timing model: a learned write speed, and the two waits."""

    def __init__(self, clock: Clock, cancel: threading.Event) -> None:
        self.clock = clock
        self.cancel = cancel
        """Set when the runtime stops: every wait is abandoned at once."""
        self._write_ms_per_tick = INITIAL_WRITE_MS_PER_TICK

    def write_estimate_ms(self, units: int) -> int:
        """How long before its instant a batch of `units` should start writing."""
        return math.ceil(self._write_ms_per_tick * units * WRITE_ESTIMATE_SAFETY) + WRITE_SLACK_MS

    def wait_to_open(self, instant_ms: int, units: int) -> None:
        """Wait until a batch of `units` due at `instant_ms` should open its
        transaction; raises InstantNotReached if abandoned."""
        if not wait_for_instant(
            self.clock, instant_ms - self.write_estimate_ms(units), self.cancel
        ):
            raise InstantNotReached

    def hold_commit_until(self, instant_ms: int) -> None:
        """Inside the write, before it commits: wait for the instant; raises
        InstantNotReached (rolling the write back) if abandoned."""
        if not wait_for_instant(self.clock, instant_ms, self.cancel):
            raise InstantNotReached

    def learn(self, units: int, seconds: float) -> None:
        """A batch of `units` took `seconds` to write (commit wait excluded)."""
        if units < LEARN_FROM_TICKS:
            return
        observed = min(seconds * 1000 / units, MAX_WRITE_MS_PER_TICK)
        self._write_ms_per_tick += (observed - self._write_ms_per_tick) * LEARNING_RATE
