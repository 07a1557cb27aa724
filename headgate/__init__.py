"""Headgate: durable periodic jobs for Python services."""

from headgate.app import Headgate
from headgate.clock import Clock, FakeClock, StoreClock, SystemClock
from headgate.domain.spec import (
    CronSpec,
    EverySpec,
    InvalidSpec,
    ScheduleSpec,
    due_ticks,
    next_tick_ms,
    parse_spec,
)
from headgate.errors import (
    AdmissionRejected,
    ConcurrencyConflict,
    DuplicateJob,
    HeadgateError,
    LeaseLost,
    NotFound,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    ValidationError,
)
from headgate.model import (
    EnqueueEvent,
    EnqueueEventsPage,
    Job,
    LeaseStatus,
    PeriodicOrigin,
    RunNowResult,
    Schedule,
    SchedulesPage,
)
from headgate.runtime.config import RuntimeConfig
from headgate.runtime.hooks import AttemptResult, EnqueueHook, TickContext

__all__ = [
    "AdmissionRejected",
    "AttemptResult",
    "Clock",
    "ConcurrencyConflict",
    "CronSpec",
    "DuplicateJob",
    "EnqueueEvent",
    "EnqueueEventsPage",
    "EnqueueHook",
    "EverySpec",
    "FakeClock",
    "Headgate",
    "HeadgateError",
    "InvalidSpec",
    "Job",
    "LeaseLost",
    "LeaseStatus",
    "NotFound",
    "PeriodicOrigin",
    "RunNowResult",
    "RuntimeConfig",
    "Schedule",
    "ScheduleSpec",
    "SchedulesPage",
    "StoreClock",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "SystemClock",
    "TickContext",
    "ValidationError",
    "due_ticks",
    "next_tick_ms",
    "parse_spec",
]
