"""Headgate: durable periodic jobs for Python services.

The public surface is this module, `headgate.web` (the ASGI app), `headgate.ops`
(store maintenance) and `headgate.testing` (a fake clock). Modules and packages
whose names start with an underscore are internal and may change in any release.
"""

import warnings

from headgate._app import Headgate
from headgate._clock import Clock, StoreClock, SystemClock
from headgate._domain.activity import ActivityPoint
from headgate._domain.admission import AdmissionLimits
from headgate._domain.job_rules import InvalidResult
from headgate._domain.lifecycle import AttemptOutcome, JobState
from headgate._domain.limits import EACH_PARTITION
from headgate._domain.missed_runs import MissedRunPolicy
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._domain.retry import Retry
from headgate._domain.spec import (
    CronSpec,
    EverySpec,
    InvalidSpec,
    ScheduleSpec,
    due_ticks,
    next_tick_ms,
    parse_spec,
)
from headgate._errors import (
    AdmissionRejected,
    ConcurrencyConflict,
    ConstraintViolation,
    DuplicateJob,
    DuplicateTickJobs,
    HeadgateError,
    JobFailed,
    JobStateConflict,
    LeaseLost,
    NotFound,
    ProjectionsRebuilding,
    SchemaBehind,
    SchemaIncomplete,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    StoreUnopenable,
    TickHasJob,
    ValidationError,
)
from headgate._history import (
    DefinitionChange,
    FieldChange,
    JobAsOf,
    ScheduleAsOf,
    ScheduleChanges,
)
from headgate._model import (
    BulkResult,
    ConcurrencyLimitStatus,
    DeclaredHandler,
    DrainSummary,
    EnqueueEvent,
    EnqueueEventsPage,
    EnqueueNowResult,
    Job,
    JobAttempt,
    JobSettings,
    JobsPage,
    LeaseStatus,
    PeriodicOrigin,
    PutScheduleResult,
    PutSchedulesResult,
    QuarantineEntry,
    QuarantinePage,
    QueueStatus,
    RateStatus,
    Readiness,
    RunningAttempt,
    Schedule,
    ScheduleHealth,
    SchedulerHealth,
    ScheduleRun,
    ScheduleRunsPage,
    SchedulesPage,
    SettingInForce,
    SettingSource,
    UnservedWork,
    UpcomingRun,
    WorkerStatus,
)
from headgate._runtime.config import RuntimeConfig, WorkerConfig
from headgate._runtime.handlers import JobContext
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from headgate._runtime.schedule_alerts import ScheduleAlert
from headgate._runtime.snooze import Snooze, SnoozeLimitExceeded
from headgate._runtime.task_calls import ArgumentsRefused
from headgate._tasks import JobHandle, Task
from headgate._version import installed_version as _installed_version

__version__ = _installed_version()
"""This Headgate's version, as the installed distribution `headgate-jobs` states it."""

__all__ = [
    "EACH_PARTITION",
    "ActivityPoint",
    "AdmissionLimits",
    "AdmissionRejected",
    "ArgumentsRefused",
    "AttemptOutcome",
    "AttemptResult",
    "BulkResult",
    "Clock",
    "ConcurrencyConflict",
    "ConcurrencyLimitStatus",
    "ConstraintViolation",
    "CronSpec",
    "DeclaredHandler",
    "DefinitionChange",
    "DrainSummary",
    "DuplicateJob",
    "DuplicateTickJobs",
    "EnqueueEvent",
    "EnqueueEventsPage",
    "EnqueueHook",
    "EnqueueNowResult",
    "EverySpec",
    "FieldChange",
    "Headgate",
    "HeadgateError",
    "InvalidResult",
    "InvalidSpec",
    "Job",
    "JobAsOf",
    "JobAttempt",
    "JobContext",
    "JobFailed",
    "JobHandle",
    "JobOptions",
    "JobSettings",
    "JobState",
    "JobStateConflict",
    "JobsPage",
    "LeaseLost",
    "LeaseStatus",
    "MissedRunPolicy",
    "NotFound",
    "PeriodicOrigin",
    "ProjectionsRebuilding",
    "PutScheduleResult",
    "PutSchedulesResult",
    "QuarantineEntry",
    "QuarantinePage",
    "QueueStatus",
    "RateStatus",
    "Readiness",
    "Retry",
    "RunningAttempt",
    "RuntimeConfig",
    "Schedule",
    "ScheduleAlert",
    "ScheduleAsOf",
    "ScheduleChanges",
    "ScheduleDefinition",
    "ScheduleHealth",
    "ScheduleRun",
    "ScheduleRunsPage",
    "ScheduleSpec",
    "SchedulerHealth",
    "SchedulesPage",
    "SchemaBehind",
    "SchemaIncomplete",
    "SchemaTooNew",
    "SettingInForce",
    "SettingSource",
    "Snooze",
    "SnoozeLimitExceeded",
    "StoreClock",
    "StoreClosed",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "StoreUnopenable",
    "SystemClock",
    "Task",
    "TickContext",
    "TickHasJob",
    "UnservedWork",
    "UpcomingRun",
    "ValidationError",
    "WorkerConfig",
    "WorkerStatus",
    "due_ticks",
    "next_tick_ms",
    "parse_spec",
]

_RENAMED: dict[str, str] = {
    "RunNowResult": "EnqueueNowResult",
    "JobLimits": "JobSettings",
    "LimitInForce": "SettingInForce",
    "LimitSource": "SettingSource",
    "RateLimitStatus": "RateStatus",
}
"""Public names renamed, each still importable (with a DeprecationWarning) for one
minor version: old -> new."""


def __getattr__(name: str) -> object:
    if name in _RENAMED:
        warnings.warn(
            f"headgate.{name} is deprecated and will be removed in the next minor version: "
            f"use headgate.{_RENAMED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'headgate' has no attribute {name!r}")
