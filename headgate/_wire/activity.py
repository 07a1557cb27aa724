"""The body of /activity: the per-minute roll-up the overview charts."""

from __future__ import annotations

from pydantic import BaseModel, Field

from headgate._domain.activity import ActivityPoint


class ActivityPointOut(BaseModel):
    minute_ms: int = Field(description="The minute's start, epoch ms")
    series: str = Field(
        description="ticks, jobs, tick_lateness_ms, pickup_ms, queue_depth, oldest_pending_s, "
        "limit_running or limit"
    )
    key: str = Field(
        description="An outcome (ticks, jobs), p50 or p99 (latencies), a queue, or a limit's scope"
    )
    value: float

    @classmethod
    def of(cls, point: ActivityPoint) -> ActivityPointOut:
        return cls.model_validate(point.__dict__)


class ActivityList(BaseModel):
    points: list[ActivityPointOut] = Field(description="Oldest minute first")
