"""Headgate: durable periodic jobs for Python services.

The public surface is this module, `headgate.web` (the ASGI app), `headgate.ops`
(store maintenance) and `headgate.testing` (a fake clock). Modules and packages
whose names start with an underscore are internal and may change in any release.
"""

from headgate._app import Headgate
from headgate._clock import Clock, StoreClock, SystemClock
from headgate._domain.admission import AdmissionLimits
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
    DuplicateJob,
    HeadgateError,
    JobStateConflict,
    LeaseLost,
    NotFound,
    ProjectionsRebuilding,
    SchemaBehind,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    StoreUnopenable,
    ValidationError,
)
from headgate._model import (
    DrainSummary,
    EnqueueEvent,
    EnqueueEventsPage,
    Job,
    JobAttempt,
    JobsPage,
    LeaseStatus,
    PeriodicOrigin,
    PutSchedulesResult,
    QuarantineEntry,
    QuarantinePage,
    Readiness,
    RunNowResult,
    Schedule,
    SchedulesPage,
    WorkerStatus,
)
from headgate._runtime.config import RuntimeConfig, WorkerConfig
from headgate._runtime.handlers import JobContext
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext

__all__ = [
    "AdmissionLimits",
    "AdmissionRejected",
    "AttemptResult",
    "Clock",
    "ConcurrencyConflict",
    "CronSpec",
    "DrainSummary",
    "DuplicateJob",
    "EnqueueEvent",
    "EnqueueEventsPage",
    "EnqueueHook",
    "EverySpec",
    "Headgate",
    "HeadgateError",
    "InvalidSpec",
    "Job",
    "JobAttempt",
    "JobContext",
    "JobStateConflict",
    "JobsPage",
    "LeaseLost",
    "LeaseStatus",
    "NotFound",
    "PeriodicOrigin",
    "ProjectionsRebuilding",
    "PutSchedulesResult",
    "QuarantineEntry",
    "QuarantinePage",
    "Readiness",
    "RunNowResult",
    "RuntimeConfig",
    "Schedule",
    "ScheduleSpec",
    "SchedulesPage",
    "SchemaBehind",
    "SchemaTooNew",
    "StoreClock",
    "StoreClosed",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "StoreUnopenable",
    "SystemClock",
    "TickContext",
    "ValidationError",
    "WorkerConfig",
    "WorkerStatus",
    "due_ticks",
    "next_tick_ms",
    "parse_spec",
]
