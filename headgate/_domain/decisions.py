"""What to do with a due schedule and with every job: pure functions of state.

The admission gate is `decide`: every job, scheduled, manual or ordinary,
passes it, and nothing else admits a job. The writers gather the facts it
needs from the store in bulk (`WriteTransaction.gate_facts`), then call it
for each job; the scheduler records its `Decision` as the attempt's outcome,
the commands turn a refusal into an exception. Nothing here performs I/O,
so every rule is tested directly (tests/domain/test_decisions.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from headgate._domain.admission import AdmissionLimits, kind_problem, payload_problem
from headgate._domain.events import JobEnqueued, JobState, MissedRunPolicy, Outcome
from headgate._domain.fair_share import Lane, Turns
from headgate._domain.options import DEFAULT_PRIORITY
from headgate._domain.overlap import OverlapPolicy
from headgate._domain.spec import ScheduleSpec

BACKOFF_BASE_MS: Final = 1_000
BACKOFF_CAP_MS: Final = 300_000


class Reason(StrEnum):
    """Stable, low-cardinality reason codes stored in enqueue-attempt records."""

    ACCEPTED = "accepted"
    UNIQUE_KEY = "unique_key"
    ID_CONFLICT = "id_conflict"
    QUARANTINED = "quarantined"
    BACKPRESSURE = "backpressure"
    STORE_UNAVAILABLE = "store_unavailable"
    INVALID_REQUEST = "invalid_request"
    STORE_ERROR = "store_error"
    INVALID_SPEC = "invalid_spec"
    HOOK_ERROR = "hook_error"
    OVERLAP = "overlap"
    """Skipped: an earlier tick job of the schedule is pending or running, and its
    overlap policy (skip, buffer_one) holds the new tick back."""


@dataclass(frozen=True)
class LiveTickJob:
    """A tick job of a schedule that is pending or running."""

    job_id: str
    tick_ms: int
    state: str
    version: int
    """Its stream's version: where a cancellation is appended."""


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: Reason
    job_id: str
    """The job the attempt resolved to (the holder's id for a unique-key duplicate)."""
    append_job: bool = False
    """True only when this attempt creates the job."""
    cancels: tuple[LiveTickJob, ...] = ()
    """Earlier tick jobs of the schedule this attempt cancels (cancel_previous)."""
    fair_turn: int = 0
    """The admitted job's turn among its queue's partitions (`fair_share`)."""

    def admitted(self, job: JobEnqueued) -> JobEnqueued:
        """The job as it is appended: with its fair turn."""
        if job.fair_turn == self.fair_turn:
            return job
        return dataclasses.replace(job, fair_turn=self.fair_turn)

    @property
    def advances(self) -> bool:
        """Every outcome but a failure moves the schedule past the tick."""
        return self.outcome is not Outcome.FAILED


def ticks_to_fire(
    spec: ScheduleSpec, policy: MissedRunPolicy, backfill_max: int, next_run_ms: int, now_ms: int
) -> list[int]:
    """The ticks a due schedule fires now, oldest first.

    skip and run_once fire only the latest due tick: with next_run_ms stored
    durably, the latest due tick is the recovery tick, so the two behave the
    same today. backfill fires the `backfill_max` most recent missed ticks.
    """
    limit = backfill_max if policy is MissedRunPolicy.BACKFILL else 1
    return spec.due_ticks(next_run_ms, now_ms, limit)


def backoff_ms(attempt: int) -> int:
    """Delay before retrying a failed tick: doubling from 1 s, capped at 5 minutes."""
    return min(BACKOFF_BASE_MS << min(max(attempt - 1, 0), 20), BACKOFF_CAP_MS)


@dataclass(frozen=True)
class Candidate:
    """A job asking to be admitted."""

    job: JobEnqueued
    fingerprint: str
    """What quarantine matches: the job's kind and canonical payload (ids.fingerprint_of_text)."""
    payload_bytes: int
    """Size of the payload's canonical JSON text, in UTF-8."""
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    """Its schedule's overlap policy (a tick's job); allow for every other job."""


@dataclass(frozen=True)
class GateFacts:
    """What the store said about the jobs a batch wants to create."""

    existing_jobs: Mapping[str, JobEnqueued]
    """job id -> the JobEnqueued already in that job's stream."""
    unique_key_holders: Mapping[str, str]
    """unique key -> id of the pending job holding it."""
    quarantined: frozenset[str]
    pending: dict[str, int]
    """queue -> pending jobs, counting the ones this batch has admitted so far
    (only queues with a limit are counted)."""
    live_ticks: dict[str, list[LiveTickJob]] = field(default_factory=dict)
    """schedule id -> its pending and running tick jobs, kept up to date as the
    batch admits and cancels (only schedules whose overlap is not allow)."""
    turns: Turns = field(default_factory=Turns)
    """The fair-share turns of the batch's queues and partitions."""


def overlap_schedules(candidates: Sequence[Candidate]) -> set[str]:
    """The schedules whose live tick jobs the gate must know: those of ticks whose
    overlap policy is not allow."""
    return {
        candidate.job.periodic_schedule_id
        for candidate in candidates
        if candidate.overlap is not OverlapPolicy.ALLOW
        and candidate.job.periodic_schedule_id is not None
    }


def priority_of(job: JobEnqueued) -> int:
    """The priority a job is claimed at (its own, else the default)."""
    return DEFAULT_PRIORITY if job.options.priority is None else job.options.priority


def lanes_of(candidates: Sequence[Candidate]) -> set[Lane]:
    """The (queue, priority) lanes whose current fair turn the gate must know."""
    return {(candidate.job.queue, priority_of(candidate.job)) for candidate in candidates}


def partitions_of(candidates: Sequence[Candidate]) -> set[tuple[str, int, str]]:
    """The (queue, priority, partition key) whose latest fair turn the gate must know."""
    return {
        (candidate.job.queue, priority_of(candidate.job), key)
        for candidate in candidates
        if (key := candidate.job.options.partition_key) is not None
    }


def is_admissible(candidate: Candidate, limits: AdmissionLimits) -> bool:
    """The gate's first rule: a kind and a payload that today's limits accept."""
    return (
        kind_problem(candidate.job.kind) is None
        and payload_problem(candidate.payload_bytes, limits.max_payload_bytes) is None
    )


def decide(candidate: Candidate, facts: GateFacts, limits: AdmissionLimits) -> Decision:
    """The admission gate: the outcome of one attempt to enqueue a job.

    The rules, in order:
    1. a kind or payload that today's limits reject fails (`invalid_request`);
    2. a job already stored under the same id is this job again (`enqueued`,
       nothing appended: a replay after a crash) or, with other content, an id
       collision (`deduplicated`/`id_conflict`);
    3. a pending job holding the unique key wins (`deduplicated`/`unique_key`,
       resolving to the holder's id);
    4. a quarantined fingerprint is skipped (`skipped`/`quarantined`);
    5. a queue at its pending limit refuses (`failed`/`backpressure`);
    6. a tick its schedule's overlap policy holds back is skipped
       (`skipped`/`overlap`: see `overlap_decision`);
    7. otherwise the job is admitted and appended, at its fair-share turn
       (`fair_share.Turns.take`); facts.pending and facts.turns count it, so
       later candidates of the same batch see it.
    """
    job = candidate.job
    if not is_admissible(candidate, limits):
        return Decision(Outcome.FAILED, Reason.INVALID_REQUEST, job.job_id)
    existing = facts.existing_jobs.get(job.job_id)
    if existing is not None:
        if existing == job:
            return Decision(Outcome.ENQUEUED, Reason.ACCEPTED, job.job_id)
        return Decision(Outcome.DEDUPLICATED, Reason.ID_CONFLICT, job.job_id)
    if job.unique_key is not None:
        holder = facts.unique_key_holders.get(job.unique_key)
        if holder is not None:
            return Decision(Outcome.DEDUPLICATED, Reason.UNIQUE_KEY, holder)
    if candidate.fingerprint in facts.quarantined:
        return Decision(Outcome.SKIPPED, Reason.QUARANTINED, job.job_id)
    limit = limits.limit_for(job.queue)
    pending = facts.pending.get(job.queue, 0)
    if limit is not None and pending >= limit:
        return Decision(Outcome.FAILED, Reason.BACKPRESSURE, job.job_id)
    cancels: tuple[LiveTickJob, ...] = ()
    if candidate.overlap is not OverlapPolicy.ALLOW:
        live = facts.live_ticks.setdefault(job.periodic_schedule_id or "", [])
        if holds_back(candidate.overlap, live):
            return Decision(Outcome.SKIPPED, Reason.OVERLAP, job.job_id)
        if candidate.overlap is OverlapPolicy.CANCEL_PREVIOUS:
            cancels = tuple(live)
            live.clear()
        live.append(LiveTickJob(job.job_id, job.periodic_tick_ms or 0, JobState.PENDING, 1))
    facts.pending[job.queue] = pending + 1
    turn = facts.turns.take(job.queue, priority_of(job), job.options.partition_key)
    return Decision(
        Outcome.ENQUEUED,
        Reason.ACCEPTED,
        job.job_id,
        append_job=True,
        cancels=cancels,
        fair_turn=turn,
    )


def holds_back(policy: OverlapPolicy, live: list[LiveTickJob]) -> bool:
    """Whether a new tick is skipped for the schedule's live tick jobs: under skip,
    while any is pending or running; under buffer_one, while one already waits
    (one running is what it waits behind). allow and cancel_previous never."""
    if policy is OverlapPolicy.SKIP:
        return bool(live)
    if policy is OverlapPolicy.BUFFER_ONE:
        return any(job.state == JobState.PENDING for job in live)
    return False
