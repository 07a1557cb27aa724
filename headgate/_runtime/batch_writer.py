"""Writes a prepared batch of ticks through the store port, isolating failures.

One fenced write transaction per batch (group commit): ask the store what
the gate needs to know about every job in bulk, decide each tick
(`planner.units_for`), append every tick as its own unit, and commit. A
crash anywhere before commit leaves nothing; after it, everything. If the
batch's transaction fails, each schedule is retried alone, so one broken
schedule never fails its neighbours; a schedule that still fails gets a
`failed` record with a stable reason and a backoff. A batch due at an
instant is timed by `InstantTiming`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from headgate._domain.admission import AdmissionLimits
from headgate._domain.decisions import Reason
from headgate._domain.streams import schedule_stream
from headgate._errors import (
    ConcurrencyConflict,
    LeaseLost,
    ProjectionsRebuilding,
    StoreError,
    StoreUnavailable,
)
from headgate._logs import get_logger
from headgate._runtime.instants import InstantNotReached, InstantTiming
from headgate._runtime.planner import (
    REALIGNED,
    Owned,
    PreparedBatch,
    SchedulePlan,
    TickRecord,
    candidates_of,
    failure_unit,
    queues_to_count,
    units_for,
    units_in,
)
from headgate._store.port import EventLog, Fence, WriteTransaction

log = get_logger("headgate.scheduler")


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


class BatchWriter:
    def __init__(self, log: EventLog, limits: AdmissionLimits, timing: InstantTiming) -> None:
        self._log = log
        self._limits = limits
        self._timing = timing

    def write(
        self, prepared: PreparedBatch, fence: Fence | None, at_ms: int | None = None
    ) -> BatchReport:
        """Write the prepared batch; raises LeaseLost if the fence fails and
        ProjectionsRebuilding while a rebuild runs.

        With `at_ms`, nothing commits before the clock reaches it: the
        transaction opens just early enough to be written by then.
        """
        report = BatchReport(deferred=prepared.deferred)
        if not prepared.plans:
            return report
        try:
            if at_ms is not None:
                self._timing.wait_to_open(at_ms, prepared.units())
            self._commit_isolating_failures(prepared.plans, fence, report, at_ms)
        except InstantNotReached:
            # Only the first transaction waits for the instant; any retry comes
            # after it has passed. So nothing of this batch was written.
            report.postponed = len(prepared.plans)
            return report
        report.committed_at_ms = self._timing.clock.now_ms()
        if at_ms is not None:
            self._checkpoint()
        return report

    def _checkpoint(self) -> None:
        try:
            self._log.checkpoint()
        except StoreError:
            log.warning("could not checkpoint the store; SQLite will at a later commit")

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
            with self._log.write(fence, record_at_ms=at_ms) as transaction:
                began = time.perf_counter()
                self._decide_and_append(transaction, plans, written)
                self._timing.learn(units_in(plans), time.perf_counter() - began)
                if at_ms is not None:
                    self._timing.hold_commit_until(at_ms)
            # Only now, after the commit: a failed commit recorded nothing.
            report.absorb(written)
        except (LeaseLost, ProjectionsRebuilding, InstantNotReached):
            raise
        except StoreUnavailable as error:
            # The whole store is out (locked, unreachable), not one schedule:
            # writing schedule by schedule would wait out the same timeout for
            # each. One retry of the batch rides out a dropped connection; after
            # that the schedules stay due and the scheduler tries again later.
            cancelled = self._timing.cancel.is_set()
            if len(plans) > 1 and not retried and not cancelled:
                log.warning(
                    "store unavailable; retrying the batch once", error=type(error).__name__
                )
                self._commit_isolating_failures(plans, fence, report, at_ms, retried=True)
            elif len(plans) > 1 or cancelled:
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
        plans = _still_current(transaction, plans, report)
        facts = transaction.gate_facts(candidates_of(plans), queues_to_count(plans, self._limits))
        units: list[Owned] = []
        owners: list[SchedulePlan] = []
        for plan in plans:
            for owned in units_for(plan, facts, self._limits, transaction.now_ms):
                units.append(owned)
                owners.append(plan)
        results = transaction.append_units([unit for unit, _ in units])
        enqueued = {
            plan.row.queue
            for plan, (_, record), result in zip(owners, units, results, strict=True)
            if record is not None and record.decision.append_job and isinstance(result, list)
        }
        if enqueued:
            transaction.notify_enqueued(enqueued)
        if any(record is not None and record.takes_running_jobs for _, record in units):
            transaction.notify_jobs_taken()
        changed: set[str] = set()
        for plan, (_, record), result in zip(owners, units, results, strict=True):
            if isinstance(result, ConcurrencyConflict):
                changed.add(plan.schedule_id)
            elif record is REALIGNED:
                report.realigned += 1
            else:
                report.recorded.append(record)
        report.changed_concurrently.extend(sorted(changed))

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
        try:
            with self._log.write(fence, record_at_ms=at_ms) as transaction:
                unit, record = failure_unit(plan, reason, transaction.now_ms)
                (result,) = transaction.append_units([unit])
                if at_ms is not None:
                    self._timing.hold_commit_until(at_ms)
            if isinstance(result, ConcurrencyConflict):
                report.changed_concurrently.append(plan.schedule_id)
            elif record is not None:
                report.recorded.append(record)
        except (LeaseLost, InstantNotReached):
            raise
        except StoreError:
            log.warning(
                "could not record a failed attempt; the schedule stays due",
                schedule_id=plan.schedule_id,
                tick_ms=plan.ticks[0].context.tick_ms,
                reason=reason.value,
            )
            report.unrecorded.append(plan.schedule_id)


def _still_current(
    transaction: WriteTransaction, plans: list[SchedulePlan], report: BatchReport
) -> list[SchedulePlan]:
    """The plans whose schedule has not changed since its row was read; the others
    are reported changed, and stay due to be planned again from what they are now.

    A plan's ticks are chained on the schedule stream's version. After a change
    made meanwhile (another process paused, redefined or deleted the schedule)
    only the first tick would conflict: the rest would land one version on, as
    if nothing had changed. The versions read here are those the append checks,
    so this costs no query of its own.
    """
    versions = transaction.stream_versions(schedule_stream(plan.schedule_id) for plan in plans)
    current: list[SchedulePlan] = []
    for plan in plans:
        if versions[schedule_stream(plan.schedule_id)] == plan.row.version:
            current.append(plan)
        else:
            report.changed_concurrently.append(plan.schedule_id)
    return current
