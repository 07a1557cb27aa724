"""Enqueue hooks: user code told about every automatic tick attempt.

`before_enqueue` runs before the attempt is decided; raising fails the
attempt (`failed`/`hook_error`) and the tick is retried later. The runtime
prepares a tick up to `RuntimeConfig.prepare_ahead_ms` before its instant, so
this hook may run that much early; if the batch is then abandoned before the
instant (the runtime stops), it runs again for the next attempt.
`after_enqueue` runs once the attempt's record is durable, off the tick path
(on a thread of its own, in order); what it raises is logged and ignored.
Every call has a budget (`RuntimeConfig.hook_timeout_ms`): a `before_enqueue`
over it fails its attempt (`hook_error`), and any call over it is abandoned
(what it returns later is ignored; see `hook_runner`). Hooks may be called from
several threads at once. Hooks get read-only snapshots: nothing they do
changes what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from headgate._model import Schedule
from headgate._projections import ScheduleRow


@dataclass(frozen=True)
class TickContext:
    """What a hook is told about one attempt. Made by Headgate only."""

    tick_ms: int
    job_id: str
    attempt: int
    """1 for the first attempt at this tick, 2 for its first retry, ..."""
    _planned_from: ScheduleRow = field(repr=False, compare=False)

    @property
    def schedule_id(self) -> str:
        return self._planned_from.schedule_id

    @cached_property
    def schedule(self) -> Schedule:
        """A read-only snapshot of the schedule as the tick was planned, made
        when first read: most ticks have no hook that looks, and a catch-up
        fires thousands."""
        return Schedule.from_row(self._planned_from)


@dataclass(frozen=True)
class AttemptResult:
    outcome: str
    reason: str
    job_id: str
    """The job the tick resolved to (the winner's id for a unique-key duplicate)."""
    committed_at_ms: int | None = None
    """When the record's transaction committed (clock ms): minus the tick, the lateness."""


class EnqueueHook:
    """Subclass and override either method."""

    def before_enqueue(self, context: TickContext) -> None:
        """Called before each automatic attempt."""

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        """Called after each recorded attempt."""
