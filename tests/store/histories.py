"""Random histories of what a store is asked to keep, for property tests that
compare two ways of keeping it (live and rebuilt, SQL and memory)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from headgate._domain.decisions import Candidate
from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    DomainEvent,
    FingerprintQuarantined,
    FingerprintReleased,
    JobAbandoned,
    JobAttemptFailed,
    JobClaimed,
    JobEnqueued,
    JobFinished,
    JobQuarantined,
    JobReleased,
    JobRetried,
    JobState,
    JobSucceeded,
    Outcome,
    QueuePaused,
    QueueResumed,
    RateLimitCleared,
    RateLimitSet,
    ScheduleDeleted,
)
from headgate._domain.limits import EACH_PARTITION, scope_of
from headgate._domain.options import JobOptions
from headgate._domain.overlap import OverlapPolicy, is_serial
from headgate._domain.streams import job_stream, limit_stream, queue_stream, rate_stream
from headgate._store.port import ANY_VERSION, NO_STREAM, CompactionPolicy, Store, StreamAppend
from tests.store.builders import attempted, defined, enqueued

_QUEUES = ("q", "q2", "default")
_KINDS = ("k", "k2")
_ENDS = st.sampled_from(["succeed", "fail", "crash", "crash-limit", "release"])
_DEFINE = st.tuples(
    st.just("define"),
    st.integers(0, 3),
    st.booleans(),
    st.integers(0, 5),
    st.sampled_from(list(OverlapPolicy)),
)
_TICK = st.tuples(st.just("tick"), st.integers(0, 3))
_FINISH = st.tuples(st.just("finish"), st.integers(0, 20))
_SHAPED_JOB = st.tuples(
    st.just("shaped job"),
    st.sampled_from(_QUEUES),
    st.sampled_from(_KINDS),
    st.sampled_from([None, -1, 0, 5]),
    st.sampled_from([None, "p0", "p1"]),
    st.sampled_from([None, "r0", "r1"]),
    st.integers(0, 3),
    st.sampled_from([None, -1_000, 0, 1_000, 2_000]),
    st.sampled_from([None, 0, 1_000]),
)
_PAUSE = st.tuples(st.just("pause"), st.sampled_from(_QUEUES), st.booleans())
_LIMIT = st.tuples(
    st.just("limit"),
    st.sampled_from([None, *_QUEUES]),
    st.sampled_from([None, *_KINDS]),
    st.sampled_from([None, EACH_PARTITION, "p0"]),
    st.sampled_from([None, 0, 1, 2]),
)
_RATE = st.tuples(
    st.just("rate"),
    st.sampled_from(["r0", "r1"]),
    st.sampled_from([None, 1, 2, 3]),
    st.sampled_from([1_000, 3_000]),
)
_ADVANCE = st.tuples(st.just("advance"), st.sampled_from([0, 1, 999, 1_000, 1_001, 2_500]))
_LOOK = st.tuples(st.just("look"), st.sampled_from(_QUEUES))
_CLAIM = st.tuples(st.just("claim"), st.integers(0, 3))
_END = st.tuples(st.just("end"), st.integers(0, 20), _ENDS)

OPERATION = st.one_of(
    _DEFINE,
    _TICK,
    st.tuples(st.just("fail"), st.integers(0, 3), st.sampled_from(["backpressure", "hook_error"])),
    st.tuples(st.just("skip"), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 3)),
    _FINISH,
    st.tuples(st.just("job"), st.integers(0, 5)),
    _SHAPED_JOB,
    _PAUSE,
    _LIMIT,
    _RATE,
    _ADVANCE,
    _LOOK,
    st.tuples(st.just("quarantine"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("attempt"), st.integers(0, 20), _ENDS),
    st.tuples(st.just("retry"), st.integers(0, 20)),
    _CLAIM,
    _END,
    st.tuples(st.just("compact")),
)
"""What a store is asked to keep. Jobs come in shapes the claim treats apart
(priorities, partition keys and their fair turns, rate classes, run_at in the
past and future, start deadlines; tick jobs of serial schedules), beside queue
pauses, concurrency limits (None: cleared), rate classes (None: cleared) and
the clock moving on to a rate window's edges. `look` reads what the claim and
the gate read without writing. `attempt` is a claim and its end as builds up to
0.2.0 logged them (a JobClaimed event); `claim` is a worker's claim as it is
made now (the rows' state, `JobQueue.claim`), and `end` the end of a job so
claimed, at the version it was claimed at."""

FLOW_OPERATION = st.one_of(
    _SHAPED_JOB,
    _SHAPED_JOB,
    _SHAPED_JOB,
    _CLAIM,
    _CLAIM,
    _END,
    _ADVANCE,
    _LOOK,
    _LIMIT,
    _RATE,
    _PAUSE,
    _DEFINE,
    _TICK,
    _TICK,
    _FINISH,
)
"""What a claim decides on, most often: shaped jobs, claims and their ends, the
clock, limits, rate classes, pauses and serial schedules' ticks."""


_TIMEOUTS = {"k": 60_000, "k2": 30_000, "report.build": 60_000}


def _attempt_end(job_id: str, attempt: int, claimed_at: int, how: str) -> DomainEvent:
    if how == "succeed":
        return JobSucceeded(job_id, attempt, "w", claimed_at, {"n": attempt})
    if how == "fail":
        return JobAttemptFailed(job_id, attempt, "w", claimed_at, "E", "m", claimed_at + 5)
    if how == "crash":
        return JobAbandoned(job_id, "w", 1, attempt, claimed_at)
    if how == "crash-limit":
        return JobQuarantined(job_id, "fp", 3, attempt, claimed_at)
    return JobReleased(job_id, "w")


Observation = tuple[Any, ...]


def play(store: Store, prefix: str, operations: list[tuple[Any, ...]]) -> list[Observation]:
    """Append what each operation stands for (ids under `prefix`); what the store
    answered each claim and each `look`, in order."""
    ticks = itertools.count(1)
    jobs: list[str] = []
    overlap: dict[str, OverlapPolicy] = {}
    seen: list[Observation] = []
    for op in operations:
        kind = op[0]
        sid = f"{prefix}s{op[1]}" if kind in ("define", "tick", "fail", "skip", "delete") else ""
        exists = store.log.stream_version(f"schedule-{sid}") > 0 if sid else False
        if kind == "define":
            overlap[sid] = op[4]
            event = defined(sid, 1000 * op[3], paused=op[2], overlap=op[4].value)
            store.log.append(f"schedule-{sid}", ANY_VERSION, [event])
        elif kind == "tick" and exists:
            tick = next(ticks) * 1000
            _fire_tick(store, sid, tick, serial=is_serial(overlap.get(sid, OverlapPolicy.ALLOW)))
            jobs.append(f"job-for-{sid}-{tick}")
        elif kind == "fail" and exists:
            event = attempted(sid, next(ticks), Outcome.FAILED, op[2], attempt=2, retry_at_ms=77)
            store.log.append(f"schedule-{sid}", ANY_VERSION, [event])
        elif kind == "skip" and exists:
            store.log.append(
                f"schedule-{sid}",
                ANY_VERSION,
                [attempted(sid, next(ticks), Outcome.SKIPPED, "quarantined")],
            )
        elif kind == "delete" and exists:
            store.log.append(f"schedule-{sid}", ANY_VERSION, [ScheduleDeleted(sid)])
        elif kind == "finish" and jobs:
            job_id = jobs[op[1] % len(jobs)]
            store.log.append(
                f"job-{job_id}", ANY_VERSION, [JobFinished(job_id, JobState.COMPLETED)]
            )
        elif kind == "job":
            job_id = f"{prefix}plain{next(ticks)}"
            store.log.append(f"job-{job_id}", 0, [enqueued(job_id, "k", "q", {"n": op[1]}, None)])
            jobs.append(job_id)
        elif kind == "shaped job":
            job_id = f"{prefix}shaped{next(ticks)}"
            store.log.append(job_stream(job_id), 0, [_shaped(store, job_id, op)])
            jobs.append(job_id)
        elif kind in ("pause", "limit", "rate"):
            stream, event = _flow_change(op)
            store.log.append(stream, ANY_VERSION, [event])
        elif kind == "advance":
            store.clock.advance(op[1])  # type: ignore[attr-defined]
        elif kind == "look":
            seen.append(_look(store, op[1]))
        elif kind == "quarantine":
            fingerprint = f"{prefix}f{op[1]}"
            event = (
                FingerprintQuarantined(fingerprint) if op[2] else FingerprintReleased(fingerprint)
            )
            store.log.append(f"quarantine-{fingerprint}", ANY_VERSION, [event])
        elif kind == "attempt" and jobs:
            job_id = jobs[op[1] % len(jobs)]
            row = store.reads.job(job_id)
            if row is not None:
                attempt, claimed_at = row.attempts + 1, store.clock.now_ms()
                claim = JobClaimed(job_id, "w", attempt, claimed_at + 1_000)
                end = _attempt_end(job_id, attempt, claimed_at, op[2])
                store.log.append(f"job-{job_id}", ANY_VERSION, [claim, end])
        elif kind == "claim":
            with store.log.write() as transaction:
                capacity = {"q": op[1], "q2": op[1], "default": op[1]}
                claimed = transaction.claim(capacity, _TIMEOUTS, "w", transaction.now_ms)
                frees = transaction.rate_slot_frees_at(transaction.now_ms)
            seen.append(("claim", [row.job_id for row in claimed], frees))
        elif kind == "end" and jobs:
            job_id = jobs[op[1] % len(jobs)]
            row = store.reads.job(job_id)
            if row is not None and row.state == JobState.RUNNING and row.worker_id == "w":
                end = _attempt_end(job_id, row.attempts + 1, row.updated_at_ms, op[2])
                store.log.append(f"job-{job_id}", row.version, [end])
        elif kind == "retry" and jobs:
            job_id = jobs[op[1] % len(jobs)]
            if store.reads.job(job_id) is not None:
                store.log.append(f"job-{job_id}", ANY_VERSION, [JobRetried(job_id)])
        elif kind == "compact":
            store.compact(CompactionPolicy(finished_job_retention_ms=0))
    return seen


def _fire_tick(store: Store, schedule_id: str, tick_ms: int, *, serial: bool) -> None:
    """What the scheduler writes for one tick: the job (serial as its schedule's
    overlap policy makes it), and the record carrying the advance."""
    version = store.log.stream_version(f"schedule-{schedule_id}")
    job_id = f"job-for-{schedule_id}-{tick_ms}"
    job = enqueued(job_id, "report.build", "default", {"team": 7}, None, schedule_id, tick_ms)
    record = attempted(schedule_id, tick_ms, next_run_ms=tick_ms + 60_000, last_enqueued_ms=tick_ms)
    store.log.append_unit(
        [
            StreamAppend(job_stream(job_id), NO_STREAM, (replace(job, serial=serial),)),
            StreamAppend(f"schedule-{schedule_id}", version, (record,)),
        ]
    )


def _shaped(store: Store, job_id: str, op: tuple[Any, ...]) -> JobEnqueued:
    """A job of a queue and kind with a priority, partition key and fair turn,
    rate class, run_at relative to now and start deadline as `op` says."""
    _, queue, kind, priority, partition_key, rate_class, turn, run_in, start_within = op
    options = JobOptions.restored(
        queue=queue,
        priority=priority,
        partition_key=partition_key,
        rate_class=rate_class,
        run_at_ms=None if run_in is None else store.clock.now_ms() + run_in,
        start_within_ms=start_within,
    )
    return JobEnqueued(job_id, kind, {"n": job_id}, options, fair_turn=turn)


def _flow_change(op: tuple[Any, ...]) -> tuple[str, DomainEvent]:
    """A queue paused or resumed, a concurrency limit or rate class set or cleared."""
    if op[0] == "pause":
        queue = op[1]
        return queue_stream(queue), QueuePaused(queue) if op[2] else QueueResumed(queue)
    if op[0] == "limit":
        _, queue, kind, partition_key, limit = op
        stream = limit_stream(scope_of(queue, kind, partition_key))
        if limit is None:
            return stream, ConcurrencyLimitCleared(queue, kind, partition_key)
        return stream, ConcurrencyLimitSet(queue, kind, partition_key, limit)
    _, rate_class, limit, per_ms = op
    if limit is None:
        return rate_stream(rate_class), RateLimitCleared(rate_class)
    return rate_stream(rate_class), RateLimitSet(rate_class, limit, per_ms)


def _look(store: Store, queue: str) -> Observation:
    """What a worker and the gate read, written nowhere: when a job of theirs is
    next claimable, where the limits stand, the late jobs, and the gate's facts
    for a job of each partition key in each lane of `queue`."""
    now = store.clock.now_ms()
    kinds = [*_TIMEOUTS]
    candidates = [
        Candidate(
            JobEnqueued(
                f"look-{priority}-{key}",
                "k",
                None,
                JobOptions.restored(queue=queue, priority=priority, partition_key=key),
                periodic_schedule_id=schedule_id,
                periodic_tick_ms=10**9,
            ),
            "fp",
            4,
            OverlapPolicy.SKIP,
        )
        for priority in (-1, 0, 5)
        for key in ("p0", "p1")
        for schedule_id in [f"s{priority % 4}"]
    ]
    with store.log.write() as transaction:
        facts = transaction.gate_facts(candidates, [queue])
        late = [row.job_id for row in transaction.late_jobs(_QUEUES, kinds, now, 50)]
    return (
        "look",
        store.reads.earliest_claimable(_QUEUES, kinds),
        store.reads.next_claimable_at(_QUEUES, kinds, now),
        store.reads.limits_state(now),
        late,
        facts.pending,
        facts.live_ticks,
        facts.turns,
    )
