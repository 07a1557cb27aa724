"""The bodies of /workers, /scheduler and /handlers: the processes that run
jobs, the scheduler lease and its health, and the handlers code declares."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from headgate._model import DeclaredHandler, LeaseStatus, SchedulerHealth, WorkerStatus


class WorkerOut(BaseModel):
    worker_id: str
    host: str
    pid: int
    queues: dict[str, int] = Field(description="queue -> capacity")
    kinds: list[str] | None = Field(
        description="The kinds it has handlers for; null when its build did not say"
    )
    running: int
    running_job_ids: list[str] = Field(description="Jobs it runs now (the first 200 in all)")
    overdue: int = Field(description="Handlers still running past their timeout")
    started_at_ms: int
    heartbeat_at_ms: int
    heartbeat_age_ms: int
    expires_at_ms: int

    @classmethod
    def of(cls, worker: WorkerStatus, now_ms: int) -> WorkerOut:
        return cls(
            **{
                **worker.__dict__,
                "running_job_ids": list(worker.running_job_ids),
                "kinds": None if worker.kinds is None else list(worker.kinds),
            },
            heartbeat_age_ms=max(0, now_ms - worker.heartbeat_at_ms),
        )


class LeaseOut(BaseModel):
    holder: str
    host: str
    pid: int
    term: int
    expires_at_ms: int

    @classmethod
    def of(cls, lease: LeaseStatus) -> LeaseOut:
        return cls.model_validate(lease.__dict__)


class SchedulerHealthOut(BaseModel):
    state: Literal["ok", "no_scheduler", "behind"] = Field(
        description="no_scheduler: schedules due past the grace and no process holds the "
        "scheduler lease; behind: a holder, yet schedules due past the grace"
    )
    message: str = Field(description="What it means, for an operator")
    holder: LeaseOut | None = Field(description="The scheduler lease's holder; null: nobody")
    oldest_due_ms: int | None = Field(
        description="When the schedule due longest became due; null: none is due"
    )
    behind_ms: int = Field(description="How long it has waited (0: none is due)")
    grace_ms: int = Field(description="How long a due schedule may wait before it is reported")

    @classmethod
    def of(cls, health: SchedulerHealth) -> SchedulerHealthOut:
        return cls(
            state=health.state,  # type: ignore[arg-type]
            message=health.message,
            holder=None if health.holder is None else LeaseOut.of(health.holder),
            oldest_due_ms=health.oldest_due_ms,
            behind_ms=health.behind_ms,
            grace_ms=health.grace_ms,
        )


class WorkersOut(BaseModel):
    workers: list[WorkerOut]
    scheduler: LeaseOut | None = Field(description="The scheduler lease's holder; null: nobody")


class HandlerOut(BaseModel):
    kind: str
    queue: str = Field(
        description="Where its jobs go when enqueued by a process without its handler"
    )
    priority: int
    start_within_ms: int | None
    partition_key: str | None
    rate_class: str | None
    declared_by: str = Field(description="The declarations group of the code that has it")
    host: str = Field(description="The process (host:pid) that recorded it as it is")
    declared_at_ms: int = Field(description="Since when it is declared as it is")

    @classmethod
    def of(cls, handler: DeclaredHandler) -> HandlerOut:
        return cls.model_validate(handler.__dict__)


class HandlerList(BaseModel):
    handlers: list[HandlerOut] = Field(description="By kind, then declarations group")
