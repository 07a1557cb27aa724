"""The write side of the control API: validate, decide, append.

Each command validates every field before touching the store (a bad request
writes nothing), then decides and appends inside one serialised write
transaction of the store port, so it reads exactly the state it changes.
Every job a command creates passes the admission gate (`decisions.decide`);
a refusal becomes an exception here.

Split by aggregate: `schedules`, `jobs`, and `flow` (quarantine, queue pauses,
limits and rate limits), over `base` (the store's parts, the gate for a job
made outside the scheduler); `Commands` is all of them, as its callers hold it.
"""

from __future__ import annotations

from headgate._commands.base import BULK_CHUNK, CommandBase, Settings
from headgate._commands.flow import FlowCommands
from headgate._commands.jobs import BulkOutcome, JobCommands, NewJob
from headgate._commands.schedules import (
    CREATED,
    UNCHANGED,
    UPDATED,
    Put,
    ScheduleCommands,
    definitions_of,
    require_allowed,
)

__all__ = [
    "BULK_CHUNK",
    "CREATED",
    "UNCHANGED",
    "UPDATED",
    "BulkOutcome",
    "CommandBase",
    "Commands",
    "NewJob",
    "Put",
    "Settings",
    "definitions_of",
    "require_allowed",
]


class Commands(ScheduleCommands, JobCommands, FlowCommands):
    """The write side whole: each aggregate's commands over one store."""
