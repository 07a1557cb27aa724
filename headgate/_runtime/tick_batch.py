"""Firing a batch of due schedules: plan, hooks, one fenced transaction, report.

This is the work the schedule actors do with a TickDue message. It is plain
code (no actor machinery) so it can be driven and tested directly:

1. `prepare`: plan each schedule's ticks from its policy (pure) and run the
   before-enqueue hooks, outside any transaction;
2. `commit`: in one write transaction fenced by the scheduler lease's term,
   read the facts the admission gate needs in bulk, decide every tick, and
   append each tick as its own unit: the job and its enqueue-attempt record,
   which also carries the advance of next_run_ms, at the schedule stream's
   expected version (the compare-and-set). A crash anywhere before commit
   leaves nothing; after commit, everything. Given the instant the ticks are
   due (`at_ms`), the batch is written just ahead of it and committed once the
   clock reaches it, so a thousand schedules sharing one instant are enqueued
   at that instant, not one batch-write later;
3. `finish`: log each tick and run the after-enqueue hooks.

If the batch's transaction fails, each schedule is retried alone, so one
broken schedule never fails its neighbours; a schedule that still fails gets
a `failed` record with a stable reason and a backoff.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from headgate._clock import Clock
from headgate._domain.admission import AdmissionLimits, require_kind
from headgate._domain.decisions import (
    Decision,
    GateFacts,
    Reason,
    backoff_ms,
    decide,
    ticks_to_fire,
)
from headgate._domain.events import (
    EnqueueAttempted,
    JobEnqueued,
    MissedRunPolicy,
    NextRunAdvanced,
    Outcome,
)
from headgate._domain.ids import fingerprint_of_text, tick_job_id, tick_unique_key
from headgate._domain.spec import InvalidSpec, ScheduleSpec, parse_spec
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import (
    ConcurrencyConflict,
    LeaseLost,
    ProjectionsRebuilding,
    StoreError,
    StoreUnavailable,
    ValidationError,
)
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._projections import ScheduleRow
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from headgate._store import read_model
from headgate._store.event_store import (
    NO_STREAM,
    EventStore,
    Fence,
    InstantNotReached,
    StreamAppend,
    WriteTransaction,
    wait_for_instant,
)

log = get_logger("headgate.scheduler")


@dataclass(frozen=True)
class PlannedTick:
    job: JobEnqueued
    fingerprint: str
    context: TickContext
    failure: Reason | None = None
    """Set when the tick already failed before the gate (hook or validation)."""
    next_run_ms: int | None = None
    """The schedule's next tick once this one is done (None if it failed planning)."""


@dataclass
class SchedulePlan:
    row: ScheduleRow
    spec: ScheduleSpec | None
    planned_at_ms: int
    ticks: list[PlannedTick] = field(default_factory=list)

    @property
    def schedule_id(self) -> str:
        return self.row.schedule_id


@dataclass(frozen=True)
class TickRecord:
    """One attempt as recorded, for logs and after-hooks."""

    context: TickContext
    decision: Decision


INITIAL_WRITE_MS_PER_TICK: Final = 0.2
"""Until measured: a generous guess at the write cost of one tick."""
MAX_WRITE_MS_PER_TICK: Final = 1.0
"""A stalled write is not a speed: the estimate never learns beyond this."""
LEARN_FROM_TICKS: Final = 100
"""Only batches this big teach the per-tick write cost; in smaller ones (single
ticks, schedule-by-schedule retries) the transaction's fixed cost dominates."""
LEARNING_RATE: Final = 0.3
WRITE_ESTIMATE_SAFETY: Final = 2.0
WRITE_SLACK_MS: Final = 10
"""Covers a transaction's fixed cost (begin, fence, head, checkpoints)."""

REALIGNED = None
"""A unit that only moves next_run_ms (a due schedule with no tick to fire)."""


@dataclass
class PreparedBatch:
    """Planned ticks, hooks run, nothing written yet."""

    plans: list[SchedulePlan] = field(default_factory=list)
    deferred: int = 0
    """Schedules left for the next sweep because the tick budget ran out."""


@dataclass
class BatchReport:
    recorded: list[TickRecord] = field(default_factory=list)
    changed_concurrently: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)
    """Schedules whose attempt could not even be recorded (the store is down)."""
    realigned: int = 0
    deferred: int = 0
    """Schedules left for the next sweep because the batch's tick budget ran out."""
    committed_at_ms: int | None = None
    postponed: int = 0
    """Schedules not written because their instant was not reached (stop, or a
    clock that did not get there); they stay due."""

    def absorb(self, written: BatchReport) -> None:
        """Add what one committed transaction recorded."""
        self.recorded.extend(written.recorded)
        self.changed_concurrently.extend(written.changed_concurrently)
        self.realigned += written.realigned

    @property
    def progressed(self) -> bool:
        """Whether sweeping again at once can get anywhere."""
        return bool(self.recorded or self.changed_concurrently or self.realigned or self.deferred)


class TickProcessor:
    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        hooks: Sequence[EnqueueHook] = (),
        limits: AdmissionLimits | None = None,
        max_ticks: int = 1_000,
    ) -> None:
        self._store = store
        self._clock = clock
        self._hooks = tuple(hooks)
        self._limits = limits or AdmissionLimits()
        self._max_ticks = max_ticks
        self._cancel = threading.Event()
        self._write_ms_per_tick = INITIAL_WRITE_MS_PER_TICK

    def fire(
        self, rows: Sequence[ScheduleRow], fence: Fence | None, at_ms: int | None = None
    ) -> BatchReport:
        """Prepare, commit and finish the due ticks of `rows` in one go."""
        prepared = self.prepare(rows, at_ms)
        report = self.commit(prepared, fence, at_ms)
        self.finish(report)
        return report

    def prepare(self, rows: Sequence[ScheduleRow], at_ms: int | None = None) -> PreparedBatch:
        """Plan the ticks due at `at_ms` (default now), at most `max_ticks` of them.

        Ticks beyond the budget stay due for the next sweep: a schedule
        advances only past the ticks it fired.
        """
        now = self._clock.now_ms() if at_ms is None else at_ms
        prepared = PreparedBatch()
        budget = self._max_ticks
        for row in rows:
            if budget <= 0:
                prepared.deferred += 1
                continue
            plan = self._plan_safely(row, now, budget)
            budget -= max(len(plan.ticks), 1)
            prepared.plans.append(plan)
        return prepared

    def commit(
        self, prepared: PreparedBatch, fence: Fence | None, at_ms: int | None = None
    ) -> BatchReport:
        """Write the prepared batch in one transaction; raises LeaseLost if the fence
        fails and ProjectionsRebuilding while a rebuild runs.

        With `at_ms`, nothing commits before the clock reaches it: the
        transaction opens just early enough to be written by then (from the
        write speed measured so far), keeping the write lock as briefly as
        possible.
        """
        report = BatchReport(deferred=prepared.deferred)
        if not prepared.plans:
            return report
        try:
            if at_ms is not None:
                open_at = at_ms - self._write_estimate_ms(_units_in(prepared.plans))
                if not wait_for_instant(self._clock, open_at, self._cancel):
                    raise InstantNotReached
            self._commit_isolating_failures(prepared.plans, fence, report, at_ms)
        except InstantNotReached:
            # Only the first transaction waits for the instant; any retry comes
            # after it has passed. So nothing of this batch was written.
            report.postponed = len(prepared.plans)
            return report
        report.committed_at_ms = self._clock.now_ms()
        if at_ms is not None:
            self._checkpoint()
        return report

    def _checkpoint(self) -> None:
        try:
            self._store.checkpoint()
        except StoreError:
            log.warning("could not checkpoint the store; SQLite will at a later commit")

    def finish(self, report: BatchReport) -> None:
        """Log every recorded attempt and run the after-enqueue hooks."""
        for record in report.recorded:
            self._after(record, report.committed_at_ms)

    def cancel(self) -> None:
        """Abandon any batch waiting for its instant (the runtime is stopping)."""
        self._cancel.set()

    def _write_estimate_ms(self, ticks: int) -> int:
        """How long before its instant a batch of `ticks` should start writing."""
        return math.ceil(self._write_ms_per_tick * ticks * WRITE_ESTIMATE_SAFETY) + WRITE_SLACK_MS

    def _learn_write_speed(self, ticks: int, seconds: float) -> None:
        if ticks < LEARN_FROM_TICKS:
            return
        observed = min(seconds * 1000 / ticks, MAX_WRITE_MS_PER_TICK)
        self._write_ms_per_tick += (observed - self._write_ms_per_tick) * LEARNING_RATE

    def _plan_safely(self, row: ScheduleRow, now_ms: int, budget: int) -> SchedulePlan:
        """A plan for one schedule; a definition that cannot be planned becomes a failed
        attempt (with backoff) instead of failing its neighbours."""
        try:
            return self._plan(row, now_ms, budget)
        except InvalidSpec:
            reason = Reason.INVALID_SPEC
        except Exception:
            log.exception("schedule could not be planned", schedule_id=row.schedule_id)
            reason = Reason.INVALID_REQUEST
        plan = SchedulePlan(row, None, planned_at_ms=now_ms)
        plan.ticks.append(
            self._tick(
                row,
                payload=None,
                tick_ms=row.next_run_ms,
                attempt=row.failures + 1,
                failure=reason,
            )
        )
        return plan

    def _plan(self, row: ScheduleRow, now_ms: int, budget: int) -> SchedulePlan:
        spec = parse_spec(row.spec)
        plan = SchedulePlan(row, spec, planned_at_ms=now_ms)
        policy = MissedRunPolicy(row.on_missed)
        ticks = ticks_to_fire(spec, policy, row.backfill_limit, row.next_run_ms, now_ms)[:budget]
        # Computed before any hook runs: a tick past the calendar's end fails the plan.
        following = [spec.next_tick_ms(tick_ms) for tick_ms in ticks]
        invalid = self._invalid_request(row)
        # Parsed apart from the hooks' snapshot: a hook mutating its copy must not
        # reach the stored job.
        payload = json.loads(row.payload)
        for index, (tick_ms, next_run_ms) in enumerate(zip(ticks, following, strict=True)):
            attempt = row.failures + 1 if index == 0 else 1
            planned = self._tick(
                row,
                payload=payload,
                tick_ms=tick_ms,
                attempt=attempt,
                failure=invalid,
                next_run_ms=next_run_ms,
            )
            if planned.failure is None:
                planned = self._run_before_hooks(planned)
            plan.ticks.append(planned)
            if planned.failure is not None:
                break
        return plan

    @staticmethod
    def _tick(
        row: ScheduleRow,
        *,
        payload: JsonValue,
        tick_ms: int,
        attempt: int,
        failure: Reason | None,
        next_run_ms: int | None = None,
    ) -> PlannedTick:
        job_id = tick_job_id(row.schedule_id, tick_ms)
        job = JobEnqueued(
            job_id,
            row.kind,
            row.queue,
            payload,
            tick_unique_key(row.schedule_id, tick_ms),
            row.schedule_id,
            tick_ms,
        )
        context = TickContext(tick_ms, job_id, attempt, row)
        return PlannedTick(
            job, fingerprint_of_text(row.kind, row.payload), context, failure, next_run_ms
        )

    def _invalid_request(self, row: ScheduleRow) -> Reason | None:
        """The gate's validation, re-checked at fire time: limits may have changed."""
        try:
            require_kind(row.kind)
        except ValidationError:
            return Reason.INVALID_REQUEST
        if len(row.payload.encode()) > self._limits.max_payload_bytes:
            return Reason.INVALID_REQUEST
        return None

    def _run_before_hooks(self, planned: PlannedTick) -> PlannedTick:
        for hook in self._hooks:
            try:
                hook.before_enqueue(planned.context)
            except BaseException:  # the host's code: even SystemExit only fails this attempt
                log.warning(
                    "enqueue hook failed",
                    schedule_id=planned.context.schedule_id,
                    tick_ms=planned.context.tick_ms,
                    hook=type(hook).__name__,
                    exc_info=True,
                )
                return dataclasses.replace(planned, failure=Reason.HOOK_ERROR)
        return planned

    def _commit_isolating_failures(
        self,
        plans: list[SchedulePlan],
        fence: Fence | None,
        report: BatchReport,
        at_ms: int | None = None,
        *,
        retried: bool = False,
    ) -> None:
        written = BatchReport()
        try:
            with self._store.write(fence, not_before_ms=at_ms, cancel=self._cancel) as transaction:
                began = time.perf_counter()
                self._decide_and_append(transaction, plans, written)
                self._learn_write_speed(_units_in(plans), time.perf_counter() - began)
            # Only now, after the commit: a failed commit recorded nothing.
            report.absorb(written)
        except (LeaseLost, ProjectionsRebuilding, InstantNotReached):
            raise
        except StoreUnavailable as error:
            # The whole store is out (locked, unreachable), not one schedule:
            # writing schedule by schedule would wait out the same timeout for
            # each. One retry of the batch rides out a dropped connection; after
            # that the schedules stay due and the scheduler tries again later.
            if len(plans) > 1 and not retried and not self._cancel.is_set():
                log.warning(
                    "store unavailable; retrying the batch once", error=type(error).__name__
                )
                self._commit_isolating_failures(plans, fence, report, at_ms, retried=True)
            elif len(plans) > 1 or self._cancel.is_set():
                report.unrecorded.extend(plan.schedule_id for plan in plans)
            else:
                self._record_store_failure(plans[0], error, fence, report, at_ms)
        except StoreError as error:
            if len(plans) > 1:
                log.warning(
                    "batch failed; retrying schedule by schedule", error=type(error).__name__
                )
                for plan in plans:
                    self._commit_isolating_failures([plan], fence, report, at_ms)
                return
            self._record_store_failure(plans[0], error, fence, report, at_ms)

    def _decide_and_append(
        self, transaction: WriteTransaction, plans: list[SchedulePlan], report: BatchReport
    ) -> None:
        facts = self._gather_facts(transaction, plans)
        units: list[list[StreamAppend]] = []
        owners: list[tuple[SchedulePlan, TickRecord | None]] = []
        for plan in plans:
            for unit, record in self._units_for(plan, facts, transaction.now_ms):
                units.append(unit)
                owners.append((plan, record))
        results = transaction.append_units(units)
        changed: set[str] = set()
        for (plan, record), result in zip(owners, results, strict=True):
            if isinstance(result, ConcurrencyConflict):
                changed.add(plan.schedule_id)
            elif record is REALIGNED:
                report.realigned += 1
            else:
                report.recorded.append(record)
        report.changed_concurrently.extend(sorted(changed))

    def _gather_facts(self, transaction: WriteTransaction, plans: list[SchedulePlan]) -> GateFacts:
        ticks = [tick for plan in plans for tick in plan.ticks if tick.failure is None]
        connection = transaction.connection
        first = transaction.first_events(job_stream(t.job.job_id) for t in ticks)
        existing = {
            event.job_id: event for event in first.values() if isinstance(event, JobEnqueued)
        }
        keys = [t.job.unique_key for t in ticks if t.job.unique_key is not None]
        limited = {t.job.queue for t in ticks if self._limits.limit_for(t.job.queue) is not None}
        return GateFacts(
            existing_jobs=existing,
            unique_key_holders=read_model.live_jobs_by_unique_key(connection, keys) if keys else {},
            quarantined=frozenset(
                read_model.quarantined(connection, {t.fingerprint for t in ticks})
            )
            if ticks
            else frozenset(),
            # Only queues with a limit are counted: counting is O(pending jobs).
            pending=read_model.pending_counts(connection, limited) if limited else {},
        )

    def _units_for(
        self, plan: SchedulePlan, facts: GateFacts, now_ms: int
    ) -> list[tuple[list[StreamAppend], TickRecord | None]]:
        row, stream = plan.row, schedule_stream(plan.schedule_id)
        version, last_enqueued = row.version, row.last_enqueued_ms
        if plan.spec is not None and not plan.ticks:
            realign = NextRunAdvanced(
                plan.schedule_id, plan.spec.next_tick_ms(now_ms), last_enqueued
            )
            return [([StreamAppend(stream, version, (realign,))], REALIGNED)]
        units: list[tuple[list[StreamAppend], TickRecord | None]] = []
        next_run = row.next_run_ms
        for tick in plan.ticks:
            if tick.failure is not None:
                decision = Decision(Outcome.FAILED, tick.failure, tick.job.job_id)
            else:
                limit = self._limits.limit_for(tick.job.queue)
                decision = decide(tick.job, tick.fingerprint, facts, limit)
            if decision.advances:
                assert tick.next_run_ms is not None
                next_run = tick.next_run_ms
                if decision.outcome is Outcome.ENQUEUED:
                    last_enqueued = tick.context.tick_ms
            attempt = _attempt_event(tick, decision, now_ms, next_run, last_enqueued)
            record = TickRecord(tick.context, decision)
            appends = [StreamAppend(stream, version, (attempt,))]
            if decision.append_job:
                appends.insert(0, StreamAppend(job_stream(tick.job.job_id), NO_STREAM, (tick.job,)))
            units.append((appends, record))
            if not decision.advances:
                break
            version += 1
        return units

    def _record_store_failure(
        self,
        plan: SchedulePlan,
        error: StoreError,
        fence: Fence | None,
        report: BatchReport,
        at_ms: int | None,
    ) -> None:
        reason = (
            Reason.STORE_UNAVAILABLE if isinstance(error, StoreUnavailable) else Reason.STORE_ERROR
        )
        if not plan.ticks:
            report.unrecorded.append(plan.schedule_id)
            return
        tick = plan.ticks[0]
        decision = Decision(Outcome.FAILED, reason, tick.job.job_id)
        try:
            with self._store.write(fence, not_before_ms=at_ms, cancel=self._cancel) as transaction:
                row = plan.row
                attempt = _attempt_event(
                    tick, decision, transaction.now_ms, row.next_run_ms, row.last_enqueued_ms
                )
                stream = schedule_stream(plan.schedule_id)
                (result,) = transaction.append_units(
                    [[StreamAppend(stream, plan.row.version, (attempt,))]]
                )
            if isinstance(result, ConcurrencyConflict):
                report.changed_concurrently.append(plan.schedule_id)
            else:
                report.recorded.append(TickRecord(tick.context, decision))
        except (LeaseLost, InstantNotReached):
            raise
        except StoreError:
            log.warning(
                "could not record a failed attempt; the schedule stays due",
                schedule_id=plan.schedule_id,
                tick_ms=tick.context.tick_ms,
                reason=reason.value,
            )
            report.unrecorded.append(plan.schedule_id)

    def _after(self, record: TickRecord, committed_at_ms: int | None) -> None:
        context, decision = record.context, record.decision
        log.info(
            "enqueue attempt",
            schedule_id=context.schedule_id,
            tick_ms=context.tick_ms,
            job_id=decision.job_id,
            outcome=decision.outcome.value,
            reason=decision.reason.value,
            attempt=context.attempt,
        )
        if not self._hooks:
            return
        result = AttemptResult(
            decision.outcome.value, decision.reason.value, decision.job_id, committed_at_ms
        )
        for hook in self._hooks:
            try:
                hook.after_enqueue(context, result)
            except BaseException:  # the host's code: even SystemExit must not stop the actors
                log.warning(
                    "after-enqueue hook failed; ignored",
                    schedule_id=context.schedule_id,
                    tick_ms=context.tick_ms,
                    hook=type(hook).__name__,
                    exc_info=True,
                )


def _units_in(plans: Sequence[SchedulePlan]) -> int:
    """Units a batch writes: one per tick, and one for a schedule that only realigns."""
    return sum(max(len(plan.ticks), 1) for plan in plans)


def _attempt_event(
    tick: PlannedTick,
    decision: Decision,
    now_ms: int,
    next_run_ms: int,
    last_enqueued_ms: int | None,
) -> EnqueueAttempted:
    """The attempt's record; `next_run_ms` and `last_enqueued_ms` are the
    schedule's values once it is recorded."""
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
    )
