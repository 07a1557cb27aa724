"""The bodies of /limits and /rate-limits: fleet-wide concurrency limits and
rate classes, each with what runs or started under it now."""

from __future__ import annotations

from pydantic import BaseModel, Field, StrictInt, StrictStr

from headgate._model import ConcurrencyLimitStatus, RateStatus
from headgate._wire.derived import Strict


class LimitIn(Strict):
    queue: StrictStr | None = Field(None, description="Its queue (null: any)")
    kind: StrictStr | None = Field(None, description="Its kind (null: any)")
    partition_key: StrictStr | None = Field(
        None, description='Its partition key (null: any job; "*": each key has the limit)'
    )
    limit: StrictInt = Field(description="At most this many running at once, fleet-wide")


class PartitionRunningOut(BaseModel):
    partition_key: str
    running: int


class ConcurrencyLimitOut(BaseModel):
    queue: str | None = Field(description="null: any queue")
    kind: str | None = Field(description="null: any kind")
    partition_key: str | None = Field(
        description='null: any job; "*": every partition key has the limit on its own'
    )
    limit: int
    running: int = Field(description='Jobs of its scope running now (under "*": all keys)')
    set_at_ms: int
    running_by_partition: list[PartitionRunningOut] = Field(
        description='Under "*": the busiest partition keys and their running jobs'
    )

    @classmethod
    def of(cls, status: ConcurrencyLimitStatus) -> ConcurrencyLimitOut:
        return cls(
            queue=status.queue,
            kind=status.kind,
            partition_key=status.partition_key,
            limit=status.limit,
            running=status.running,
            set_at_ms=status.set_at_ms,
            running_by_partition=[
                PartitionRunningOut(partition_key=key, running=count)
                for key, count in status.running_by_partition
            ],
        )


class LimitList(BaseModel):
    limits: list[ConcurrencyLimitOut]


class RateIn(Strict):
    limit: StrictInt = Field(description="At most this many of its jobs start ...")
    per_ms: StrictInt = Field(description="... in any window this long (a sliding window)")


class RateOut(BaseModel):
    rate_class: str
    limit: int
    per_ms: int
    started: int = Field(description="Its jobs started within the window ending now")
    set_at_ms: int

    @classmethod
    def of(cls, status: RateStatus) -> RateOut:
        return cls.model_validate(status.__dict__)


class RateList(BaseModel):
    rate_limits: list[RateOut]
