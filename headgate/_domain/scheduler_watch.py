"""Is anybody firing the ticks? What a worker, a probe, the console and the
metrics tell from the scheduler lease and the oldest due schedule.

A fleet of `headgate worker` processes and no `serve` (or host calling
`start()`) fires no ticks at all, and nothing else would say so: schedules go
due and stay due. The due index gives the oldest due instant in one read, and
the lease who holds the scheduler duty; the two, against the clock, tell:

* `ok`: nothing has been due for longer than the grace, whoever holds the lease;
* `no_scheduler`: schedules have been due past the grace and no process holds
  the lease (none runs a scheduler, or the holder died and none took over);
* `behind`: a process holds the lease, yet schedules have been due past the
  grace (its store writes fail or it is overloaded: see its log).

The grace covers a takeover: a holder that dies leaves its lease to expire
(`lease_ttl_ms`) before another takes it, so ticks may wait that long twice
over, and a few seconds, without anything being wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

MIN_GRACE_MS: Final = 10_000


class SchedulerState(StrEnum):
    OK = "ok"
    NO_SCHEDULER = "no_scheduler"
    BEHIND = "behind"


def grace_ms(lease_ttl_ms: int) -> int:
    """How long a due schedule may wait before it is reported: two lease
    lifetimes (a takeover), and at least MIN_GRACE_MS."""
    return max(2 * lease_ttl_ms, MIN_GRACE_MS)


@dataclass(frozen=True)
class SchedulerWatch:
    """The scheduler duty as seen at `now_ms`."""

    lease_live: bool
    """Some process holds the scheduler lease, unexpired."""
    oldest_due_ms: int | None
    """When the schedule due longest became due (None: none is due, or none exists)."""
    now_ms: int
    grace_ms: int

    @property
    def behind_ms(self) -> int:
        """How long the oldest due schedule has waited (0 when none is due)."""
        if self.oldest_due_ms is None or self.oldest_due_ms > self.now_ms:
            return 0
        return self.now_ms - self.oldest_due_ms

    @property
    def state(self) -> SchedulerState:
        if self.behind_ms <= self.grace_ms:
            return SchedulerState.OK
        return SchedulerState.BEHIND if self.lease_live else SchedulerState.NO_SCHEDULER

    def says(self) -> str:
        """One sentence for an operator."""
        waited = f"{self.behind_ms // 1000} s"
        if self.state is SchedulerState.NO_SCHEDULER:
            return (
                f"no process is the scheduler: schedules have been due for {waited} and no "
                "tick fires (run `headgate serve`, `headgate scheduler --app MODULE:NAME`, or "
                "call start() in a host)"
            )
        if self.state is SchedulerState.BEHIND:
            return (
                f"the scheduler is behind: schedules have been due for {waited} (see the "
                "scheduler's log: its store writes may be failing, or it is overloaded)"
            )
        return "ticks fire on time"
