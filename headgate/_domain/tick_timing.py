"""When a schedule's ticks fire: its bounds (start, end) and its jitter.

A tick keeps its identity (`tick_ms`, from which its job id is derived);
what bounds and jitter change is which ticks fire and the instant each is
enqueued at:

- no tick before `start_at_ms` (the first is the first at or after it) and
  none after `end_at_ms`; once next_run_ms is past the end the schedule is
  finished and the sweep no longer reads it;
- a tick is due at its instant, `tick_ms + delay`, the delay drawn from
  [0, jitter_ms) by a stable hash of (schedule id, tick): every process, and a
  retry, computes the same one (Python's `hash()` is randomised per process,
  so blake2b). The delay is cut short one millisecond before the following
  tick, so a schedule's instants keep the order of its ticks: only the newest
  tick at or before now can still be waiting for its instant.

Everything here is pure: the planner, the commands and `upcoming` call it
with what the schedule row holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Final

from headgate._domain.missed_runs import MissedRunPolicy
from headgate._domain.spec import InvalidSpec, ScheduleSpec

MAX_JITTER_MS: Final = 3_600_000
"""An hour: jitter spreads ticks sharing an instant, it does not reschedule them."""


def jitter_delay_ms(schedule_id: str, tick_ms: int, jitter_ms: int) -> int:
    """The tick's delay before its bound to the next tick: in [0, jitter_ms), the
    same in every process."""
    if jitter_ms <= 0:
        return 0
    digest = blake2b(f"{schedule_id}\n{tick_ms}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter_ms


@dataclass(frozen=True)
class TickTiming:
    """One schedule's bounds and jitter, with its parsed spec."""

    schedule_id: str
    spec: ScheduleSpec
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    jitter_ms: int = 0

    def instant_ms(self, tick_ms: int, following_ms: int | None = None) -> int:
        """When `tick_ms` is due (`following_ms`: the tick after it, if known)."""
        if self.jitter_ms <= 0:  # most schedules: every tick is due at itself
            return tick_ms
        delay = jitter_delay_ms(self.schedule_id, tick_ms, self.jitter_ms)
        if delay == 0:
            return tick_ms
        if following_ms is None:
            try:
                following_ms = self.spec.next_tick_ms(tick_ms)
            except InvalidSpec:  # the calendar's last tick: nothing to overtake
                return tick_ms + delay
        return tick_ms + min(delay, following_ms - tick_ms - 1)

    def finished(self, next_run_ms: int) -> bool:
        """Whether a schedule whose next tick is `next_run_ms` has no tick left."""
        return self.end_at_ms is not None and next_run_ms > self.end_at_ms

    def due_at_ms(self, next_run_ms: int) -> int | None:
        """When the scheduler should look at the schedule; None once it is finished."""
        if self.end_at_ms is None and self.jitter_ms <= 0:
            return next_run_ms
        return None if self.finished(next_run_ms) else self.instant_ms(next_run_ms)

    def first_tick_ms(self, after_ms: int) -> int:
        """The first tick strictly after `after_ms` and at or after the start."""
        if self.start_at_ms is not None and self.start_at_ms > after_ms:
            after_ms = self.start_at_ms - 1
        return self.spec.next_tick_ms(after_ms)

    def not_before_start(self, next_run_ms: int) -> int:
        """`next_run_ms`, or the first tick at or after the start if it is earlier."""
        if self.start_at_ms is None or next_run_ms >= self.start_at_ms:
            return next_run_ms
        return self.first_tick_ms(self.start_at_ms - 1)

    def ticks_to_fire(
        self, policy: MissedRunPolicy, backfill_max: int, next_run_ms: int, now_ms: int
    ) -> list[int]:
        """The ticks a due schedule fires at `now_ms`, oldest first: the policy's
        newest ticks in [next_run_ms, min(now, end)] whose instant has come.

        skip and run_once fire the latest; backfill the `backfill_max` latest.
        """
        limit = backfill_max if policy is MissedRunPolicy.BACKFILL else 1
        upto = now_ms if self.end_at_ms is None else min(now_ms, self.end_at_ms)
        if upto < next_run_ms:
            return []
        if self.jitter_ms <= 0:
            return self.spec.due_ticks(next_run_ms, upto, limit)
        ticks = self.spec.due_ticks(next_run_ms, upto, limit + 1)
        # Only the newest can still wait for its instant: each earlier tick's
        # instant is before the tick that follows it, so before now.
        if ticks and self.instant_ms(ticks[-1]) > now_ms:
            ticks.pop()
        return ticks[-limit:]

    def upcoming(self, next_run_ms: int, due_at_ms: int, count: int) -> list[tuple[int, int]]:
        """(tick, instant) of the next `count` ticks from `next_run_ms`, up to the
        end; the first is due at `due_at_ms` (a failing tick's retry time)."""
        runs: list[tuple[int, int]] = []
        tick: int | None = next_run_ms
        while tick is not None and len(runs) < count and not self.finished(tick):
            try:
                following: int | None = self.spec.next_tick_ms(tick)
            except InvalidSpec:
                following = None
            instant = due_at_ms if not runs else self.instant_ms(tick, following)
            runs.append((tick, instant))
            tick = following
        return runs
