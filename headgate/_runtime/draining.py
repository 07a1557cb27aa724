"""`drain()`: every due job run in the calling thread, as a worker would run it."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Sequence

from headgate._clock import Clock
from headgate._domain.events import JobAttemptFailed, JobSnoozed
from headgate._domain.job_rules import Redactor, unredacted
from headgate._errors import StoreError
from headgate._model import DrainSummary
from headgate._runtime import job_units
from headgate._runtime.attempt_log import RunSettled, log_attempt_end, nobody_told
from headgate._runtime.attempts import Attempt, AttemptRules, AttemptRunner, Outcome, end_append
from headgate._runtime.child_processes import CHILD_START_WAIT_S, ChildPool
from headgate._runtime.claiming import claim_due
from headgate._runtime.config import WorkerConfig
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.job_units import Claim
from headgate._runtime.local_processes import LocalProcesses
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import JOBS_ENDED, Store, WorkerBeat

DRAIN_BATCH = 100


def drain(
    store: Store,
    clock: Clock,
    handlers: HandlerRegistry,
    queues: Sequence[str],
    timeout_s: float,
    *,
    config: WorkerConfig | None = None,
    recorder: Recorder = NO_METRICS,
    redact: Redactor = unredacted,
    settled: RunSettled = nobody_told,
) -> DrainSummary:
    """Run every due job of these kinds and queues in the calling thread until none
    is left or `timeout_s` passes; every end recorded (and told `recorder`) as a
    worker would, by the same attempt runner: a handler past its deadline is
    timed out (told to stop, an async one cancelled) as in the pool.

    It holds a heartbeat of its own while it runs, so a process dying mid-drain
    has its jobs rescued like any worker's.
    """
    settings = config or WorkerConfig(queues=dict.fromkeys(queues, DRAIN_BATCH))
    identity = worker_identity()
    give_up = time.monotonic() + timeout_s
    totals = Counter[str]()
    beat = WorkerBeat(
        identity.holder,
        identity.host,
        identity.pid,
        dict.fromkeys(queues, 1),
        clock.now_ms(),
        0,
        0,
        process=LocalProcesses().here,
        kinds=tuple(sorted(handlers.kinds())),
    )
    next_beat = 0.0
    children = ChildPool(settings.child_limits, handlers.child_modules())
    if handlers.child_modules():
        children.warm(1, wait_s=CHILD_START_WAIT_S)  # one runs at a time: ready after a kill
    attempts = AttemptRunner(
        clock,
        AttemptRules.of(settings, redact),
        recorder=recorder,
        name="headgate-drain-deadlines",
        children=children,
    )
    rescuer = Rescuer(store, clock, identity, settings, recorder=recorder)
    attempts.start()
    try:
        while time.monotonic() < give_up:
            if time.monotonic() >= next_beat:
                store.workers.beat(beat, settings.heartbeat_ttl_ms)
                next_beat = time.monotonic() + settings.heartbeat_every_ms / 1000
            with store.log.write() as transaction:
                taken = claim_due(
                    transaction,
                    dict.fromkeys(queues, DRAIN_BATCH),
                    handlers,
                    identity.holder,
                    recorder,
                )
            if not taken:
                break
            ran = _run_each(attempts, taken)
            _record_drained(
                store,
                rescuer,
                identity.holder,
                ran,
                now=clock.now_ms(),
                totals=totals,
                recorder=recorder,
                log_successes=settings.log_successes,
                settled=settled,
            )
    finally:
        attempts.stop()
        with contextlib.suppress(StoreError):
            store.workers.stop(identity.holder)
    return DrainSummary(
        totals["ran"],
        totals["succeeded"],
        totals["failed"],
        totals["retrying"],
        totals["snoozed"],
        totals["crashed"],
    )


def _record_drained(
    store: Store,
    rescuer: Rescuer,
    holder: str,
    ran: Sequence[tuple[Attempt, Outcome]],
    *,
    now: int,
    totals: Counter[str],
    recorder: Recorder,
    log_successes: bool = False,
    settled: RunSettled = nobody_told,
) -> None:
    """Record the ends of what one drain turn ran, in one write (a crashed child's
    job as a crash), and count them in `totals`."""
    crashed = {a.claim.job_id for a, outcome in ran if outcome.crashed is not None}
    ends = [
        (
            attempt.claim,
            end_append(attempt, outcome, holder, now),
            outcome.ended_at_ms - attempt.started_at_ms,
        )
        for attempt, outcome in ran
        if outcome.crashed is None
    ]
    awaited = {attempt.claim.job_id for attempt, _ in ran if attempt.spec.awaitable}
    with store.log.write() as transaction:
        results = transaction.append_units(
            [job_units.end_unit(claimed, end) for claimed, end, _ in ends]
        )
        if any(claimed.job_id in awaited and job_units.ends_job(end) for claimed, end, _ in ends):
            transaction.notify_enqueued([JOBS_ENDED])
        if crashed:
            running = transaction.running_on([holder])
            rescuer.take_back_crashed(
                transaction, [row for row in running if row.job_id in crashed]
            )
    rescuer.report_crashes()
    totals["ran"] += len(crashed)
    totals["crashed"] += len(crashed)
    for (claimed, end, duration_ms), result in zip(ends, results, strict=True):
        if not isinstance(result, list):
            recorder.attempt_ended(claimed.queue, claimed.kind, "refused", None)
            continue
        outcome = job_units.attempt_outcome(end)
        recorder.attempt_ended(claimed.queue, claimed.kind, outcome, duration_ms)
        event = end.events[0]
        log_attempt_end(claimed, event, outcome, duration_ms, log_successes=log_successes)
        settled(claimed, event)
        totals["ran"] += 1
        if isinstance(event, JobAttemptFailed):
            totals["retrying" if event.retry_at_ms is not None else "failed"] += 1
        elif isinstance(event, JobSnoozed):
            totals["snoozed"] += 1
        else:
            totals["succeeded"] += 1


def _run_each(
    attempts: AttemptRunner, taken: Sequence[tuple[Claim, HandlerSpec]]
) -> list[tuple[Attempt, Outcome]]:
    """Run the claimed jobs one after another in this thread; how each ended."""
    ran: list[tuple[Attempt, Outcome]] = []
    for claimed, spec in taken:
        attempt = attempts.begin(claimed, spec)
        outcome = attempts.run_here(attempt)
        if outcome is not None:
            ran.append((attempt, outcome))
    return ran
