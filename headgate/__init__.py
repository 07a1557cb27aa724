"""Headgate: durable periodic jobs for Python services."""

from headgate.domain.spec import (
    CronSpec,
    EverySpec,
    InvalidSpec,
    ScheduleSpec,
    due_ticks,
    next_tick_ms,
    parse_spec,
)

__all__ = [
    "CronSpec",
    "EverySpec",
    "InvalidSpec",
    "ScheduleSpec",
    "due_ticks",
    "next_tick_ms",
    "parse_spec",
]
