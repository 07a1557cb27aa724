"""The bodies of the "as of" and changes answers (`_history_api`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from headgate._history import (
    DefinitionChange,
    FieldChange,
    JobAsOf,
    ScheduleAsOf,
    ScheduleChanges,
)
from headgate._wire.jobs import JobOut
from headgate._wire.schedules import ScheduleOut


class ScheduleAsOfOut(BaseModel):
    """A schedule as it stood at `as_of_ms`, folded from its events up to then."""

    schedule_id: str
    as_of_ms: int
    state: str = Field(
        description="defined, deleted, not_yet (it did not exist yet) or before_kept "
        "(the instant is before the oldest event compaction kept: the log cannot say)"
    )
    schedule: ScheduleOut | None
    changed_at_ms: int | None = Field(description="When the definition in force was made")
    changed_by: str | None = Field(
        description='Who made it: "code:<group>" or "operator:<surface>" (None: not recorded)'
    )
    position: int | None = Field(description="The log position of the newest event folded")
    oldest_kept_ms: int = Field(description="When the oldest event still kept was recorded")
    exact: bool = Field(
        description="False when not every event between the definition and the instant "
        "was folded (compacted, or too many): the definition is exact, its next run that of "
        "the newest event"
    )

    @classmethod
    def of(cls, as_of: ScheduleAsOf) -> ScheduleAsOfOut:
        schedule = None if as_of.schedule is None else ScheduleOut.of(as_of.schedule)
        return cls.model_validate({**as_of.__dict__, "schedule": schedule})


class FieldChangeOut(BaseModel):
    field: str
    before: str | None
    after: str | None = Field(description="A payload shows its keys and which changed, no value")

    @classmethod
    def of(cls, change: FieldChange) -> FieldChangeOut:
        return cls.model_validate(change.__dict__)


class DefinitionChangeOut(BaseModel):
    recorded_at_ms: int
    version: int
    what: str = Field(description="created, changed, deleted or undeclared")
    changed_by: str | None
    fields: list[FieldChangeOut]
    before_known: bool

    @classmethod
    def of(cls, change: DefinitionChange) -> DefinitionChangeOut:
        fields = [FieldChangeOut.of(field) for field in change.fields]
        return cls.model_validate({**change.__dict__, "fields": fields})


class ScheduleChangesOut(BaseModel):
    schedule_id: str
    since_ms: int
    until_ms: int
    changes: list[DefinitionChangeOut] = Field(description="Oldest first")
    more_before: bool = Field(description="Older changes in the window were left out")
    oldest_kept_ms: int

    @classmethod
    def of(cls, changes: ScheduleChanges) -> ScheduleChangesOut:
        shown = [DefinitionChangeOut.of(change) for change in changes.changes]
        return cls.model_validate({**changes.__dict__, "changes": shown})


class JobAsOfOut(BaseModel):
    """A job as its events left it at `as_of_ms` (a claim is no event: a job
    running then shows as pending)."""

    job_id: str
    as_of_ms: int
    state: str = Field(description="defined or not_yet")
    job: JobOut | None
    position: int | None

    @classmethod
    def of(cls, as_of: JobAsOf) -> JobAsOfOut:
        job = None if as_of.job is None else JobOut.of(as_of.job)
        return cls.model_validate({**as_of.__dict__, "job": job})
