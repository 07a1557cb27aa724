"""Firing a batch of due schedules: plan, hooks, one fenced write, report.

This is the work the schedule actors do with a TickDue message, composed of
its parts so it can be driven and tested directly:

1. `prepare`: plan each schedule's ticks from its policy (`planner`, pure)
   and run the before-enqueue hooks (`hook_runner`), outside any transaction;
2. `commit`: write the batch in one transaction fenced by the scheduler
   lease's term (`batch_writer`), at the instant the ticks are due when one
   is given (`instants`);
3. `finish`: log each recorded attempt and run the after-enqueue hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from headgate import _tracing as tracing
from headgate._clock import Clock
from headgate._domain.admission import AdmissionLimits
from headgate._domain.events import Outcome
from headgate._logs import get_logger
from headgate._projections import ScheduleRow
from headgate._runtime.batch_writer import BatchReport, BatchWriter
from headgate._runtime.hook_runner import DEFAULT_HOOK_TIMEOUT_MS, HookRunner
from headgate._runtime.hooks import EnqueueHook
from headgate._runtime.instants import InstantTiming
from headgate._runtime.planner import PreparedBatch, TickRecord, plan_batch
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._store.port import EventLog, Fence

log = get_logger("headgate.scheduler")


class TickProcessor:
    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        hooks: Sequence[EnqueueHook] = (),
        limits: AdmissionLimits | None = None,
        max_ticks: int = 1_000,
        *,
        on_enqueued: Callable[[], None] | None = None,
        on_jobs_taken: Callable[[], None] | None = None,
        recorder: Recorder = NO_METRICS,
        hook_timeout_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
    ) -> None:
        """`on_enqueued` is told after a batch enqueued jobs (wakes this process's
        workers), `on_jobs_taken` after it cancelled running jobs (this process's
        workers tell their handlers at once); `recorder` of every attempt
        recorded; `hook_timeout_ms` is each hook call's budget."""
        self._on_enqueued = on_enqueued
        self._on_jobs_taken = on_jobs_taken
        self._recorder = recorder
        self._clock = clock
        self._limits = limits or AdmissionLimits()
        self._max_ticks = max_ticks
        self._cancel = threading.Event()
        self._hooks = HookRunner(hooks, hook_timeout_ms, self._cancel)
        self._writer = BatchWriter(log, self._limits, InstantTiming(clock, self._cancel))
        self._spans: dict[str, Any] = {}
        """The ticks' spans, by job id, from their planning to their record."""
        self._spans_lock = threading.Lock()

    def fire(
        self, rows: Sequence[ScheduleRow], fence: Fence | None, at_ms: int | None = None
    ) -> BatchReport:
        """Prepare, commit and finish the due ticks of `rows` in one go."""
        prepared = self.prepare(rows, at_ms)
        report = self.commit(prepared, fence, at_ms)
        self.finish(report)
        return report

    def prepare(self, rows: Sequence[ScheduleRow], at_ms: int | None = None) -> PreparedBatch:
        """Plan the ticks due at `at_ms` (default now), at most `max_ticks` of them,
        and run the before-enqueue hooks on them.

        A batch sent ahead of its instant (`at_ms`) plans a tick for each of its
        schedules however many there are: they are due at that instant, each
        once, and a tick left for a later sweep would fire one write late. The
        budget bounds what catching up makes (a schedule's missed ticks)."""
        now = self._clock.now_ms() if at_ms is None else at_ms
        budget = self._max_ticks if at_ms is None else max(self._max_ticks, len(rows))
        prepared = plan_batch(rows, now, budget, self._limits, then=self._hooks.before)
        if tracing.recording():
            self._trace(prepared)
        return prepared

    def commit(
        self, prepared: PreparedBatch, fence: Fence | None, at_ms: int | None = None
    ) -> BatchReport:
        """Write the prepared batch (see BatchWriter.write); the ticks' spans end
        with what was recorded of each."""
        try:
            report = self._writer.write(prepared, fence, at_ms)
        except BaseException as error:
            self._end_spans(prepared, {}, failed=type(error).__name__)
            raise
        if self._spans:
            self._end_spans(prepared, {r.context.job_id: r for r in report.recorded})
        return report

    def _trace(self, prepared: PreparedBatch) -> None:
        """Start each tick's span; its job carries the span's trace context."""
        for plan in prepared.plans:
            for index, tick in enumerate(plan.ticks):
                span = tracing.start_tick_span(
                    plan.schedule_id, tick.context.tick_ms, tick.context.job_id, tick.job.kind
                )
                with self._spans_lock:
                    self._spans[tick.context.job_id] = span
                job = replace(tick.job, trace_context=tracing.context_of(span))
                plan.ticks[index] = replace(tick, candidate=replace(tick.candidate, job=job))

    def _end_spans(
        self, prepared: PreparedBatch, recorded: dict[str, TickRecord], failed: str = ""
    ) -> None:
        if not self._spans:
            return
        for plan in prepared.plans:
            for tick in plan.ticks:
                with self._spans_lock:
                    span = self._spans.pop(tick.context.job_id, None)
                record = recorded.get(tick.context.job_id)
                if record is not None:
                    decision = record.decision
                    tracing.end_tick_span(
                        span,
                        decision.outcome.value,
                        decision.reason.value,
                        failed=decision.outcome is Outcome.FAILED,
                    )
                else:
                    tracing.end_tick_span(
                        span, "not recorded", failed or "not written", failed=bool(failed)
                    )

    def finish(self, report: BatchReport) -> None:
        """Log every recorded attempt and queue its after-enqueue hooks (they run
        on a thread of their own: see `settle`)."""
        if self._on_enqueued is not None and any(r.decision.append_job for r in report.recorded):
            self._on_enqueued()
        if self._on_jobs_taken is not None and any(
            record.takes_running_jobs for record in report.recorded
        ):
            self._on_jobs_taken()
        for record in report.recorded:
            _log_attempt(record, report.committed_at_ms)
            self._count(record, report.committed_at_ms)
            self._hooks.after(record, report.committed_at_ms)

    def _count(self, record: TickRecord, committed_at_ms: int | None) -> None:
        decision = record.decision
        lateness = None
        if decision.outcome is Outcome.ENQUEUED and committed_at_ms is not None:
            # From the instant the tick was due: its jitter is intended, not late.
            due_at = record.context.tick_ms if record.due_at_ms is None else record.due_at_ms
            lateness = max(committed_at_ms - due_at, 0)
        self._recorder.tick_recorded(decision.outcome.value, decision.reason.value, lateness)

    def settle(self, timeout_s: float) -> bool:
        """Wait until the after-enqueue hooks of what was recorded so far have run
        (each within its budget); False at the timeout."""
        return self._hooks.settle(timeout_s)

    def cancel(self) -> None:
        """Abandon any batch waiting for its instant (the runtime is stopping)."""
        self._cancel.set()

    def close(self) -> None:
        """Stop the hooks' threads (the runtime stopped; no hung hook is waited for)."""
        self._hooks.close()


def _log_attempt(record: TickRecord, committed_at_ms: int | None) -> None:
    context, decision = record.context, record.decision
    # A jittered tick says when it was due, and how late it is from then.
    timing: dict[str, int] = {}
    if record.due_at_ms is not None and record.due_at_ms != context.tick_ms:
        timing["due_at_ms"] = record.due_at_ms
        if committed_at_ms is not None:
            timing["lateness_ms"] = max(committed_at_ms - record.due_at_ms, 0)
    log.info(
        "enqueue attempt",
        schedule_id=context.schedule_id,
        tick_ms=context.tick_ms,
        job_id=decision.job_id,
        outcome=decision.outcome.value,
        reason=decision.reason.value,
        attempt=context.attempt,
        **timing,
    )
