"""What every command shares: the store's log and reads, the settings a
request is checked against, and the admission gate for a job made outside
the scheduler."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final

from headgate._domain.admission import AdmissionLimits, kind_problem, require_payload
from headgate._domain.decisions import Candidate, Decision, Reason, decide
from headgate._domain.events import JobEnqueued, RecordedEvent
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.names import require
from headgate._domain.schedule_load import Ceilings
from headgate._domain.streams import job_stream
from headgate._errors import AdmissionRejected, ConcurrencyConflict, DuplicateJob, ValidationError
from headgate._store.port import NO_STREAM, Store, StreamAppend, WriteTransaction

BULK_CHUNK: Final = 500
"""Schedules, or jobs, per write transaction in a bulk call."""


@dataclass(frozen=True)
class Settings:
    """The server's settings a request is checked against (beyond the value
    objects' own rules): what this Headgate's RuntimeConfig says."""

    limits: AdmissionLimits
    min_interval_ms: int
    ceilings: Ceilings
    """The store-wide ceilings on schedules (`schedule_load`)."""


class CommandBase:
    """The store's parts a command writes and reads through."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self._log = store.log
        self._reads = store.reads
        self._clock = store.clock
        self._settings = settings
        self._limits = settings.limits

    def _writing(self, within: object) -> AbstractContextManager[WriteTransaction]:
        """The store's own write transaction, or one in the host's (`within`)."""
        return self._log.write() if within is None else self._log.write_within(within)

    def _validated_payload(self, job: JobEnqueued) -> str:
        """The gate's validation, for every job: its kind (as the gate takes it: a
        schedule stored with a kind today's naming rule refuses still runs now),
        and its payload within today's limits. Returns the payload's canonical text."""
        require("kind", kind_problem(job.kind))
        return require_payload(job.payload, self._limits.max_payload_bytes)

    def _admit(
        self, transaction: WriteTransaction, job: JobEnqueued, payload_text: str
    ) -> JobEnqueued:
        """The admission gate, for a job created outside the scheduler
        (`payload_text`: what `_validated_payload` returned for this job);
        raises unless it admits the job as new. Returns the job to append."""
        candidate = Candidate(
            job, fingerprint_of_text(job.kind, payload_text), len(payload_text.encode())
        )
        limited = [job.queue] if self._limits.limit_for(job.queue) is not None else []
        facts = transaction.gate_facts([candidate], limited)
        decision = decide(candidate, facts, self._limits)
        refusal = gate_refusal(decision, job, self._limits)
        if refusal is not None:
            raise refusal
        return decision.admitted(job)


def gate_refusal(decision: Decision, job: JobEnqueued, limits: AdmissionLimits) -> Exception | None:
    """What a command raises for the gate's decision, or None when it admits the job."""
    if decision.append_job:
        return None
    if decision.reason is Reason.UNIQUE_KEY:
        assert job.unique_key is not None
        return DuplicateJob(job.unique_key, decision.job_id)
    if decision.reason is Reason.QUARANTINED:
        return AdmissionRejected(
            "quarantined", f"jobs of kind {job.kind!r} with this payload are quarantined"
        )
    if decision.reason is Reason.BACKPRESSURE:
        return AdmissionRejected(
            "backpressure",
            f"queue {job.queue!r} has {limits.limit_for(job.queue)} pending jobs, its limit",
        )
    if decision.reason is Reason.INVALID_REQUEST:
        return ValidationError("payload", "is not admissible under the current limits")
    # The job's id is taken (a replay, or an id collision): a command's ids are
    # fresh or checked first, so another writer got there in between.
    return ConcurrencyConflict(job_stream(job.job_id), NO_STREAM, None)


def append_one(transaction: WriteTransaction, unit: list[StreamAppend]) -> list[RecordedEvent]:
    (result,) = transaction.append_units([unit])
    if isinstance(result, Exception):
        raise result
    return result
