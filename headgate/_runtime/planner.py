"""Planning a batch of due schedules, and the units it writes: pure functions.

`plan_batch` turns due schedule rows into the ticks each fires now (from its
missed-run policy) within a tick budget; `units_for` turns one schedule's
planned ticks, once the store has answered the gate's questions, into the
stream appends to write: per tick, the job (if the gate admits it) and the
enqueue-attempt record, which carries the advance of next_run_ms, at the
schedule stream's expected version (the compare-and-set). Nothing here
touches the store or runs host code (the batch writer and the hook runner
do); a schedule that cannot be planned is logged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from headgate._domain.admission import AdmissionLimits
from headgate._domain.decisions import (
    Candidate,
    Decision,
    GateFacts,
    Reason,
    backoff_ms,
    decide,
    is_admissible,
)
from headgate._domain.events import (
    EnqueueAttempted,
    JobCancelled,
    JobEnqueued,
    MissedRunPolicy,
    NextRunAdvanced,
    Outcome,
)
from headgate._domain.ids import fingerprint_of_text, tick_job_id, tick_unique_key
from headgate._domain.lifecycle import JobState
from headgate._domain.options import JobOptions
from headgate._domain.overlap import OverlapPolicy, is_serial
from headgate._domain.spec import InvalidSpec, ScheduleSpec, parse_spec
from headgate._domain.streams import job_stream, schedule_stream
from headgate._domain.tick_timing import TickTiming
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._projections import ScheduleRow
from headgate._projections.schedules import job_options_of
from headgate._runtime.hooks import TickContext
from headgate._store.port import NO_STREAM, StreamAppend

log = get_logger("headgate.scheduler")


@dataclass(frozen=True)
class PlannedTick:
    candidate: Candidate
    context: TickContext
    failure: Reason | None = None
    """Set when the tick already failed before the gate (a hook, or validation)."""
    superseded: bool = False
    """A later tick of the same plan replaces it (cancel_previous): it is recorded
    skipped (overlap) without asking the gate."""
    next_run_ms: int | None = None
    """The schedule's next tick once this one is done (None if it failed planning)."""
    instant_ms: int | None = None
    """When this tick was due: the tick, or later by its jitter (None: the tick)."""
    next_due_at_ms: int | None = None
    """When `next_run_ms` is due; None once the schedule is finished (or if this
    tick failed planning)."""

    @property
    def due_at_ms(self) -> int:
        """The instant this tick is due at, which lateness is measured from."""
        return self.context.tick_ms if self.instant_ms is None else self.instant_ms

    @property
    def job(self) -> JobEnqueued:
        return self.candidate.job


@dataclass
class SchedulePlan:
    row: ScheduleRow
    spec: ScheduleSpec | None
    """None when the stored spec could not be parsed (its tick fails)."""
    planned_at_ms: int
    ticks: list[PlannedTick] = field(default_factory=list)

    @property
    def schedule_id(self) -> str:
        return self.row.schedule_id


@dataclass
class PreparedBatch:
    """Planned ticks, hooks run, nothing written yet."""

    plans: list[SchedulePlan] = field(default_factory=list)
    deferred: int = 0
    """Schedules left for the next sweep because the tick budget ran out."""

    def units(self) -> int:
        """Units the batch writes: one per tick, and one for a schedule that only realigns."""
        return units_in(self.plans)


@dataclass(frozen=True)
class TickRecord:
    """One attempt as recorded, for logs and after-hooks."""

    context: TickContext
    decision: Decision
    due_at_ms: int | None = None
    """The instant the tick was due at (None: the tick itself)."""

    @property
    def takes_running_jobs(self) -> bool:
        """It cancels a running job of its schedule (cancel_previous): that job's
        worker is to be told at once, wherever it runs."""
        return any(live.state == JobState.RUNNING for live in self.decision.cancels)


REALIGNED: Final = None
"""The owner of a unit that only moves next_run_ms (a due schedule with no tick to fire)."""
Owned = tuple[list[StreamAppend], TickRecord | None]
"""A unit to append, and the attempt it records (REALIGNED for a realignment)."""


def plan_batch(
    rows: Sequence[ScheduleRow],
    now_ms: int,
    max_ticks: int,
    limits: AdmissionLimits,
    then: Callable[[SchedulePlan], None] | None = None,
) -> PreparedBatch:
    """Plan the ticks due at `now_ms`, at most `max_ticks` of them.

    `then` refines each plan before its ticks count against the budget (the
    hook runner cuts a plan short at a failing hook, leaving the budget to the
    next schedules). Ticks beyond the budget stay due for the next sweep: a
    schedule advances only past the ticks it fired.
    """
    prepared = PreparedBatch()
    budget = max_ticks
    for row in rows:
        if budget <= 0:
            prepared.deferred += 1
            continue
        plan = plan_schedule(row, now_ms, budget, limits)
        if then is not None:
            then(plan)
        budget -= max(len(plan.ticks), 1)
        prepared.plans.append(plan)
    return prepared


def plan_schedule(
    row: ScheduleRow, now_ms: int, budget: int, limits: AdmissionLimits
) -> SchedulePlan:
    """The ticks one schedule fires now; a definition that cannot be planned
    becomes one failed attempt (with backoff) instead of failing its neighbours."""
    try:
        return _plan(row, now_ms, budget, limits)
    except InvalidSpec:
        reason = Reason.INVALID_SPEC
    except Exception:
        log.exception("schedule could not be planned", schedule_id=row.schedule_id)
        reason = Reason.INVALID_REQUEST
    plan = SchedulePlan(row, None, planned_at_ms=now_ms)
    plan.ticks.append(
        _tick(row, payload=None, tick_ms=row.next_run_ms, attempt=row.failures + 1, failure=reason)
    )
    return plan


def _plan(row: ScheduleRow, now_ms: int, budget: int, limits: AdmissionLimits) -> SchedulePlan:
    spec = parse_spec(row.spec)
    plan = SchedulePlan(row, spec, planned_at_ms=now_ms)
    policy = MissedRunPolicy(row.on_missed)
    timing = timing_of(row, spec)
    ticks = timing.ticks_to_fire(policy, row.backfill_limit, row.next_run_ms, now_ms)[:budget]
    # Computed before any tick is planned: a tick past the calendar's end fails the plan.
    following = [spec.next_tick_ms(tick_ms) for tick_ms in ticks]
    # Parsed apart from the hooks' snapshot: a hook mutating its copy must not
    # reach the stored job.
    payload = json.loads(row.payload)
    shared = _Shared.of(row)
    last = len(ticks) - 1
    for index, (tick_ms, next_run_ms) in enumerate(zip(ticks, following, strict=True)):
        attempt = row.failures + 1 if index == 0 else 1
        planned = _tick(
            row,
            shared,
            payload=payload,
            tick_ms=tick_ms,
            attempt=attempt,
            next_run_ms=next_run_ms,
            instant_ms=timing.instant_ms(tick_ms, next_run_ms),
            next_due_at_ms=timing.due_at_ms(next_run_ms),
            superseded=index < last and shared.overlap is OverlapPolicy.CANCEL_PREVIOUS,
        )
        # The gate's validation, checked before hooks run: limits may have
        # changed since the schedule was stored, and a tick the gate will
        # refuse is not shown to hooks (decide refuses it again at write time).
        # Every tick of a schedule has its kind and payload: one check will do.
        if index == 0 and not is_admissible(planned.candidate, limits):
            plan.ticks.append(_with_failure(planned, Reason.INVALID_REQUEST))
            break
        plan.ticks.append(planned)
    return plan


def timing_of(row: ScheduleRow, spec: ScheduleSpec) -> TickTiming:
    """The schedule's bounds and jitter."""
    return TickTiming(row.schedule_id, spec, row.start_at_ms, row.end_at_ms, row.jitter_ms)


@dataclass(frozen=True)
class _Shared:
    """What every tick of one schedule's plan has in common (computed once: a
    catch-up plans thousands of ticks)."""

    fingerprint: str
    payload_bytes: int
    options: JobOptions
    """The options of its ticks' jobs (each tick adds its own key)."""
    overlap: OverlapPolicy

    @classmethod
    def of(cls, row: ScheduleRow) -> _Shared:
        return cls(
            fingerprint_of_text(row.kind, row.payload),
            len(row.payload.encode()),
            job_options_of(row),
            OverlapPolicy(row.overlap),
        )


def _tick(
    row: ScheduleRow,
    shared: _Shared | None = None,
    *,
    payload: JsonValue,
    tick_ms: int,
    attempt: int,
    failure: Reason | None = None,
    next_run_ms: int | None = None,
    instant_ms: int | None = None,
    next_due_at_ms: int | None = None,
    superseded: bool = False,
) -> PlannedTick:
    job_id = tick_job_id(row.schedule_id, tick_ms)
    shared = shared or _Shared.of(row)
    job = JobEnqueued(
        job_id,
        row.kind,
        payload,
        shared.options.keyed(tick_unique_key(row.schedule_id, tick_ms)),
        row.schedule_id,
        tick_ms,
        serial=is_serial(shared.overlap),
    )
    candidate = Candidate(job, shared.fingerprint, shared.payload_bytes, shared.overlap)
    context = TickContext(tick_ms, job_id, attempt, row)
    return PlannedTick(
        candidate, context, failure, superseded, next_run_ms, instant_ms, next_due_at_ms
    )


def _with_failure(planned: PlannedTick, reason: Reason) -> PlannedTick:
    return replace(planned, failure=reason)


def with_hook_failure(planned: PlannedTick) -> PlannedTick:
    """The tick, failed by a before-enqueue hook."""
    return _with_failure(planned, Reason.HOOK_ERROR)


def candidates_of(plans: Sequence[SchedulePlan]) -> list[Candidate]:
    """The jobs the gate must be asked about: every tick that has not failed yet
    (nor been superseded)."""
    return [
        tick.candidate
        for plan in plans
        for tick in plan.ticks
        if tick.failure is None and not tick.superseded
    ]


def queues_to_count(plans: Sequence[SchedulePlan], limits: AdmissionLimits) -> set[str]:
    """Queues whose pending jobs the gate must count: those with a limit
    (counting is O(pending jobs))."""
    return {
        tick.job.queue
        for plan in plans
        for tick in plan.ticks
        if tick.failure is None and limits.limit_for(tick.job.queue) is not None
    }


def units_for(
    plan: SchedulePlan, facts: GateFacts, limits: AdmissionLimits, now_ms: int
) -> list[Owned]:
    """The units one schedule's plan writes, deciding each tick at the gate.

    Ticks are chained on the schedule stream's version (each attempt that
    settles its tick advances next_run_ms); the first failure ends the chain,
    so the schedule stays due at that tick.
    """
    row, stream = plan.row, schedule_stream(plan.schedule_id)
    version, last_enqueued = row.version, row.last_enqueued_ms
    if plan.spec is not None and not plan.ticks:
        timing = timing_of(row, plan.spec)
        following = timing.first_tick_ms(now_ms)
        due_at = timing.due_at_ms(following)
        realign = NextRunAdvanced(
            plan.schedule_id, following, last_enqueued, due_at, finished=due_at is None
        )
        return [([StreamAppend(stream, version, (realign,))], REALIGNED)]
    units: list[Owned] = []
    next_run = row.next_run_ms
    next_due_at: int | None = row.due_at_ms
    for tick in plan.ticks:
        if tick.failure is not None:
            decision = Decision(Outcome.FAILED, tick.failure, tick.job.job_id)
        elif tick.superseded:
            decision = Decision(Outcome.SKIPPED, Reason.OVERLAP, tick.job.job_id)
        else:
            decision = decide(tick.candidate, facts, limits)
        if decision.advances:
            assert tick.next_run_ms is not None
            next_run, next_due_at = tick.next_run_ms, tick.next_due_at_ms
            if decision.outcome is Outcome.ENQUEUED:
                last_enqueued = tick.context.tick_ms
        attempt = attempt_event(
            tick, decision, now_ms, next_run, last_enqueued, due_at_ms=next_due_at
        )
        appends = [StreamAppend(stream, version, (attempt,))]
        if decision.append_job:
            job = decision.admitted(tick.job)
            appends.insert(0, StreamAppend(job_stream(job.job_id), NO_STREAM, (job,)))
        appends[:0] = [
            StreamAppend(
                job_stream(live.job_id),
                live.version,
                (JobCancelled(live.job_id, tick.context.schedule_id),),
            )
            for live in decision.cancels
        ]
        units.append((appends, TickRecord(tick.context, decision, tick.due_at_ms)))
        if not decision.advances:
            break
        version += 1
    return units


def failure_unit(
    plan: SchedulePlan, reason: Reason, now_ms: int
) -> tuple[list[StreamAppend], TickRecord]:
    """The unit recording that the schedule's first tick failed for `reason` (the
    store refused the batch), leaving next_run_ms where it was."""
    tick, row = plan.ticks[0], plan.row
    decision = Decision(Outcome.FAILED, reason, tick.job.job_id)
    attempt = attempt_event(
        tick, decision, now_ms, row.next_run_ms, row.last_enqueued_ms, due_at_ms=row.due_at_ms
    )
    stream = schedule_stream(plan.schedule_id)
    record = TickRecord(tick.context, decision, tick.due_at_ms)
    return [StreamAppend(stream, row.version, (attempt,))], record


def attempt_event(
    tick: PlannedTick,
    decision: Decision,
    now_ms: int,
    next_run_ms: int,
    last_enqueued_ms: int | None,
    *,
    due_at_ms: int | None,
) -> EnqueueAttempted:
    """The attempt's record; `next_run_ms` and `last_enqueued_ms` are the
    schedule's values once it is recorded, `due_at_ms` when next_run_ms is due
    (None: the schedule is finished; a failure's retry time overrides it)."""
    context = tick.context
    retry_at = None
    if decision.outcome is Outcome.FAILED:
        retry_at = now_ms + backoff_ms(context.attempt)
    return EnqueueAttempted(
        schedule_id=context.schedule_id,
        tick_ms=context.tick_ms,
        job_id=decision.job_id,
        outcome=decision.outcome,
        reason=decision.reason.value,
        attempt=context.attempt,
        retry_at_ms=retry_at,
        next_run_ms=next_run_ms,
        last_enqueued_ms=last_enqueued_ms,
        due_at_ms=due_at_ms,
        finished=due_at_ms is None,
    )


def units_in(plans: Sequence[SchedulePlan]) -> int:
    return sum(max(len(plan.ticks), 1) for plan in plans)
