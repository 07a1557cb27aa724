"""A job's options and a schedule's definition as Python keywords: the typed
keyword sets (`JobOptionArgs`, `EnqueueArgs`, `ScheduleArgs`, which mypy checks
a call against) and their conversion to the value objects' fields (`timeout_s`
to `timeout_ms`, a former name to the name now, a misspelt name refused)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, TypedDict

from headgate._domain import option_rules as rules
from headgate._domain.options import (
    SCHEDULE_KEYWORDS,
    ScheduleDefinition,
    current_names,
    refuse_unknown,
)
from headgate._errors import ValidationError
from headgate._json import JsonValue


class JobOptionArgs(TypedDict, total=False):
    """JobOptions a handler, a schedule or a job may set, as Python keywords."""

    queue: str | None
    max_attempts: int | None
    timeout_ms: int | None
    timeout_s: float | None
    """`timeout_ms` in seconds (Python's habit, kept from earlier releases)."""
    priority: int | None
    start_within_ms: int | None
    partition_key: str | None
    rate_class: str | None


class EnqueueArgs(JobOptionArgs, total=False):
    """Every JobOptions field, as `enqueue`'s keywords: those only a job may set too."""

    run_at_ms: int | None
    unique_key: str | None
    tags: Sequence[str] | None


ENQUEUE_KEYWORDS: Final = frozenset(EnqueueArgs.__annotations__) | frozenset(
    JobOptionArgs.__annotations__
)
"""The option names enqueue takes as keywords (and enqueue_many in each item)."""


class ScheduleArgs(JobOptionArgs, total=False):
    """A schedule's definition as Python keywords, `spec` and `kind` aside (each
    method names those itself): `hg.schedules.put`, `update`, `periodic`."""

    summary: str
    payload: JsonValue
    on_missed: str
    backfill_max: int
    backfill_limit: int
    """`backfill_max`'s former name (deprecated: warns; goes in the next minor version)."""
    overlap: str
    paused: bool
    start_at_ms: int | None
    end_at_ms: int | None
    jitter_ms: int


MAX_TIMEOUT_S: Final = rules.MAX_TIMEOUT_MS // 1000


def job_options(values: Mapping[str, Any], known: Collection[str] | None = None) -> dict[str, Any]:
    """Python keywords (`JobOptionArgs`) as JobOptions fields: `timeout_s` becomes
    `timeout_ms` (naming `timeout_s` in its errors); both at once are refused. A
    name not in `known` is refused first (`refuse_unknown`: a misspelt keyword is
    named, not a TypeError of JobOptions); None where a later check names it."""
    values = current_names(values)
    if known is not None:
        refuse_unknown(values, known)
    if values.get("timeout_s") is None:
        return {name: value for name, value in values.items() if name != "timeout_s"}
    if values.get("timeout_ms") is not None:
        raise ValidationError("timeout_s", "give timeout_ms or timeout_s, not both")
    seconds = values["timeout_s"]
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValidationError("timeout_s", f"must be a number of seconds, got {seconds!r}")
    if not (0 < seconds <= MAX_TIMEOUT_S) or math.isnan(seconds):
        raise ValidationError(
            "timeout_s", f"must be more than 0 and at most {MAX_TIMEOUT_S} (a week), got {seconds}"
        )
    converted = {name: value for name, value in values.items() if name != "timeout_s"}
    converted["timeout_ms"] = max(int(seconds * 1000), 1)
    return converted


def definition_from(**values: Any) -> ScheduleDefinition:
    """A definition from Python keywords (`ScheduleArgs`, with `spec` and `kind`)."""
    return ScheduleDefinition.from_fields(job_options(values, SCHEDULE_KEYWORDS))
