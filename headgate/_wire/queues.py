"""The bodies of /queues, /quarantine and /unserved: queues and their pauses,
quarantined fingerprints, and the pending work no live worker runs."""

from __future__ import annotations

from pydantic import BaseModel, Field, StrictStr

from headgate._model import QuarantineEntry, QueueStatus, UnservedWork
from headgate._wire.derived import Strict


class QuarantineIn(Strict):
    note: StrictStr = ""


class QuarantineOut(BaseModel):
    fingerprint: str
    note: str = Field(description="Why: the crash limit (naming the job) or an operator's note")
    quarantined_at_ms: int
    kind: str | None = Field(
        None, description="The kind of its newest job held in quarantine; null if none is"
    )
    sample_job_id: str | None = Field(None, description="That job (GET /jobs/{job_id})")

    @classmethod
    def of(cls, entry: QuarantineEntry) -> QuarantineOut:
        return cls.model_validate(entry.__dict__)


class QuarantineList(BaseModel):
    entries: list[QuarantineOut]
    next_cursor: str | None


class QueuePauseIn(Strict):
    note: StrictStr = Field("", description="Why (shown with the queue while it is paused)")


class QueueOut(BaseModel):
    name: str
    paused: bool = Field(description="Nobody claims its jobs while it is paused")
    pending: int = Field(description="Its jobs waiting (due or scheduled)")
    running: int
    paused_at_ms: int | None
    note: str = Field(description="The note given when it was paused")

    @classmethod
    def of(cls, status: QueueStatus) -> QueueOut:
        return cls.model_validate(status.__dict__)


class QueueList(BaseModel):
    queues: list[QueueOut]
    more: int = Field(
        default=0, description="Queues left out: each has fewer jobs than those listed"
    )


class UnservedOut(BaseModel):
    queue: str
    kind: str
    pending: int = Field(description="Its pending jobs, which wait until a worker runs them")
    reason: str

    @classmethod
    def of(cls, work: UnservedWork) -> UnservedOut:
        return cls(queue=work.queue, kind=work.kind, pending=work.pending, reason=work.reason)


class UnservedList(BaseModel):
    unserved: list[UnservedOut]
    more: int = Field(default=0, description="(queue, kind) left out: each has fewer pending jobs")
