"""A schedule or a job as it stood at a past instant, and a schedule's definition
changes between two instants: folds of its stream up to that instant with the
projections' own folds, so the answer is what the live row was then.

Only the log can answer this, and only as far back as compaction kept it: a
schedule's stream keeps its newest definitions (each a whole snapshot,
`retention.DEFINITIONS_KEPT`) and newest attempts; a job's stream is kept
whole until the job is removed. An instant before the oldest event kept is
said to be so (`BEFORE_KEPT`), never answered with a guess.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, TypeVar

from headgate._domain.definition_history import FieldChange, definition_diff, payload_outline
from headgate._domain.events import (
    RecordedEvent,
    ScheduleDefined,
    ScheduleDeleted,
    ScheduleUndeclared,
)
from headgate._domain.options import ScheduleDefinition
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import NotFound, ValidationError
from headgate._model import Job, Schedule
from headgate._projections.job_attempts import JOB_ATTEMPTS, SHOWN_PER_JOB, JobAttemptRow
from headgate._projections.jobs import JOBS, JobRow
from headgate._projections.schedules import SCHEDULES
from headgate._store.port import EventLog

__all__ = [
    "BEFORE_KEPT",
    "DEFINED",
    "DELETED",
    "NOT_YET",
    "DefinitionChange",
    "FieldChange",
    "History",
    "JobAsOf",
    "ScheduleAsOf",
    "ScheduleChanges",
]

DEFINED: Final = "defined"
"""It existed at the instant (a job: it had been enqueued)."""
DELETED: Final = "deleted"
"""The schedule had been deleted by then."""
NOT_YET: Final = "not_yet"
"""Its first event came after the instant: it did not exist yet."""
BEFORE_KEPT: Final = "before_kept"
"""The instant is before the oldest event compaction kept: the log cannot say."""

FOLDED_PER_READ: Final = 500
"""Events read per page when folding (a schedule: those after its definition)."""
JOB_EVENTS_FOLDED: Final = 20_000
"""A job stream longer than this (snoozed that often) is not folded."""
CHANGES_SHOWN: Final = 100
"""At most this many changes per answer: a narrower window shows older ones."""
_DEFINITION_EVENTS: Final = (ScheduleDefined, ScheduleDeleted, ScheduleUndeclared)

Row = TypeVar("Row")


@dataclass(frozen=True)
class ScheduleAsOf:
    """A schedule as it stood at `as_of_ms`."""

    schedule_id: str
    as_of_ms: int
    state: str
    """DEFINED, DELETED, NOT_YET or BEFORE_KEPT."""
    schedule: Schedule | None
    """Its definition and timing then (DEFINED, or DELETED: as last defined)."""
    changed_at_ms: int | None
    """When the definition in force then was made (or the deletion)."""
    changed_by: str | None
    """Who made it: "code:<group>" or "operator:<surface>"; None if not recorded."""
    position: int | None
    """The log position of the newest event folded."""
    oldest_kept_ms: int
    """When the oldest event still kept was recorded: how far back it can be read."""
    exact: bool
    """False when not every event between the definition and the instant was
    folded (compaction removed some, or there were over FOLDED_PER_READ): the
    definition is exact, its next run and last enqueued tick those of the newest
    event, which restates them."""


@dataclass(frozen=True)
class DefinitionChange:
    """One change of a schedule's definition, with who made it."""

    recorded_at_ms: int
    version: int
    what: str
    """created, changed, deleted, undeclared (its code stopped declaring it)."""
    changed_by: str | None
    fields: tuple[FieldChange, ...]
    """What differs from the definition before (the payload by its keys only)."""
    before_known: bool = True
    """False when compaction removed the definition before it: `fields` then
    lists every field as new."""


@dataclass(frozen=True)
class ScheduleChanges:
    schedule_id: str
    since_ms: int
    until_ms: int
    changes: tuple[DefinitionChange, ...]
    """Oldest first."""
    more_before: bool
    """More changes happened in the window than are shown: the oldest are left out."""
    oldest_kept_ms: int


@dataclass(frozen=True)
class JobAsOf:
    """A job as its events left it at `as_of_ms`. A claim is not an event, so a
    job running at that instant shows as its last event left it (pending)."""

    job_id: str
    as_of_ms: int
    state: str
    """DEFINED or NOT_YET."""
    job: Job | None
    position: int | None


def _fold(
    apply: Callable[[Row | None, RecordedEvent], Row | None], events: Iterable[RecordedEvent]
) -> Row | None:
    row: Row | None = None
    for recorded in events:
        row = apply(row, recorded)
    return row


class History:
    """Reads of the log that fold one stream up to an instant (bounded reads
    through `EventLog.read_stream_back`)."""

    def __init__(self, log: EventLog) -> None:
        self._log = log

    def schedule_as_of(self, schedule_id: str, as_of_ms: int) -> ScheduleAsOf:
        """NotFound when the log keeps no event of the schedule."""
        stream = schedule_stream(schedule_id)
        oldest = self._oldest(stream, f"no schedule {schedule_id!r}")
        base = self._log.read_stream_back(
            stream, until_ms=as_of_ms, types=(ScheduleDefined,), limit=1
        )
        if not base:
            state = NOT_YET if oldest.version == 1 else BEFORE_KEPT
            return ScheduleAsOf(
                schedule_id, as_of_ms, state, None, None, None, None, oldest.recorded_at_ms, True
            )
        later = [
            e
            for e in self._log.read_stream_back(stream, until_ms=as_of_ms, limit=FOLDED_PER_READ)
            if e.version > base[0].version
        ]
        folded = [base[0], *reversed(later)]
        row = _fold(SCHEDULES.apply, folded)
        assert row is not None  # a definition makes a row
        last = folded[-1]
        deleted = isinstance(last.event, ScheduleDeleted) or row.deleted
        changed = last if isinstance(last.event, ScheduleDeleted) else base[0]
        return ScheduleAsOf(
            schedule_id,
            as_of_ms,
            DELETED if deleted else DEFINED,
            _outlined(Schedule.from_row(row)),
            changed.recorded_at_ms,
            _changed_by(changed),
            last.position,
            oldest.recorded_at_ms,
            exact=last.version - base[0].version == len(later),
        )

    def schedule_changes(
        self, schedule_id: str, since_ms: int, until_ms: int, limit: int = CHANGES_SHOWN
    ) -> ScheduleChanges:
        """The definition changes recorded after `since_ms` up to `until_ms`, oldest
        first, each with its diff from the one before; the newest `limit` of them."""
        if until_ms < since_ms:
            raise ValidationError("until", f"must not be before since ({since_ms} ms)")
        stream = schedule_stream(schedule_id)
        oldest = self._oldest(stream, f"no schedule {schedule_id!r}")
        newest_first = self._log.read_stream_back(
            stream, until_ms=until_ms, types=_DEFINITION_EVENTS, limit=limit + 1
        )
        in_window = [e for e in newest_first if e.recorded_at_ms > since_ms]
        more_before = len(in_window) > limit
        shown = list(reversed(in_window[:limit]))
        changes: list[DefinitionChange] = []
        if shown:
            current, known = self._definition_before(stream, shown[0].version)
            for recorded in shown:
                change, current = _change(recorded, current, known)
                changes.append(change)
                known = True
        return ScheduleChanges(
            schedule_id, since_ms, until_ms, tuple(changes), more_before, oldest.recorded_at_ms
        )

    def job_as_of(self, job_id: str, as_of_ms: int) -> JobAsOf:
        """NotFound when the log keeps no event of the job (never enqueued, or
        removed by compaction past its retention)."""
        stream = job_stream(job_id)
        self._oldest(stream, f"no job {job_id!r}")
        events = self._job_events(stream, as_of_ms, job_id)
        if not events:
            return JobAsOf(job_id, as_of_ms, NOT_YET, None, None)
        row: JobRow | None = _fold(JOBS.apply, events)
        assert row is not None  # a job stream starts with JobEnqueued
        attempts: list[JobAttemptRow] = [
            attempt
            for attempt in (JOB_ATTEMPTS.apply(None, e) for e in reversed(events))
            if attempt is not None
        ]
        job = Job.from_row(row, attempts[:SHOWN_PER_JOB])
        return JobAsOf(job_id, as_of_ms, DEFINED, job, events[-1].position)

    def _job_events(self, stream: str, as_of_ms: int, job_id: str) -> list[RecordedEvent]:
        """The job's events up to the instant, oldest first (a job stream is never
        trimmed, so they start at its JobEnqueued)."""
        pages: list[RecordedEvent] = []
        before: int | None = None
        while True:
            page = self._log.read_stream_back(
                stream, until_ms=as_of_ms, before_version=before, limit=FOLDED_PER_READ
            )
            pages.extend(page)
            if len(page) < FOLDED_PER_READ or page[-1].version == 1:
                return list(reversed(pages))
            if len(pages) >= JOB_EVENTS_FOLDED:
                raise ValidationError(
                    "job_id",
                    f"job {job_id!r} has over {JOB_EVENTS_FOLDED} events: too many to fold",
                )
            before = page[-1].version

    def _oldest(self, stream: str, missing: str) -> RecordedEvent:
        oldest = self._log.oldest_kept(stream)
        if oldest is None:
            raise NotFound(missing)
        return oldest

    def _definition_before(
        self, stream: str, version: int
    ) -> tuple[ScheduleDefinition | None, bool]:
        """The definition in force just before `version` (None: none, or deleted),
        and whether the log still says (False: compaction removed it)."""
        before = self._log.read_stream_back(
            stream, before_version=version, types=(ScheduleDefined, ScheduleDeleted), limit=1
        )
        if not before:
            return None, version == 1 or _starts_whole(self._log, stream)
        event = before[0].event
        return (event.definition if isinstance(event, ScheduleDefined) else None), True


def _starts_whole(log: EventLog, stream: str) -> bool:
    oldest = log.oldest_kept(stream)
    return oldest is not None and oldest.version == 1


def _change(
    recorded: RecordedEvent, current: ScheduleDefinition | None, known: bool
) -> tuple[DefinitionChange, ScheduleDefinition | None]:
    event = recorded.event
    by = _changed_by(recorded)
    if isinstance(event, ScheduleUndeclared):
        change = DefinitionChange(
            recorded.recorded_at_ms, recorded.version, "undeclared", f"code:{event.declared_by}", ()
        )
        return change, current
    if isinstance(event, ScheduleDeleted):
        fields = tuple(definition_diff(current, None)) if known else ()
        change = DefinitionChange(
            recorded.recorded_at_ms, recorded.version, "deleted", by, fields, known
        )
        return change, None
    assert isinstance(event, ScheduleDefined)
    what = "created" if known and current is None else "changed"
    fields = tuple(definition_diff(current if known else None, event.definition))
    change = DefinitionChange(recorded.recorded_at_ms, recorded.version, what, by, fields, known)
    return change, event.definition


def _outlined(schedule: Schedule) -> Schedule:
    """The schedule with its payload told by its outline (`payload_outline`), not its
    values: a value rotated or deleted since (a credential) stays out of what the
    past shows, as it does from the diff."""
    return dataclasses.replace(schedule, payload=payload_outline(schedule.payload))


def _changed_by(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, ScheduleDefined | ScheduleDeleted):
        return event.changed_by
    return None
