"""Random histories of what a store is asked to keep, for property tests that
compare two ways of keeping it (live and rebuilt, SQL and memory)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

from headgate._domain.events import (
    DomainEvent,
    FingerprintQuarantined,
    FingerprintReleased,
    JobAbandoned,
    JobAttemptFailed,
    JobClaimed,
    JobFinished,
    JobQuarantined,
    JobReleased,
    JobRetried,
    JobState,
    JobSucceeded,
    Outcome,
    ScheduleDeleted,
)
from headgate._store.port import ANY_VERSION, CompactionPolicy, Store
from tests.store.builders import attempted, defined, enqueued, fire_tick

OPERATION = st.one_of(
    st.tuples(st.just("define"), st.integers(0, 3), st.booleans(), st.integers(0, 5)),
    st.tuples(st.just("tick"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.integers(0, 3), st.sampled_from(["backpressure", "hook_error"])),
    st.tuples(st.just("skip"), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 3)),
    st.tuples(st.just("finish"), st.integers(0, 20)),
    st.tuples(st.just("job"), st.integers(0, 5)),
    st.tuples(st.just("quarantine"), st.integers(0, 2), st.booleans()),
    st.tuples(
        st.just("attempt"),
        st.integers(0, 20),
        st.sampled_from(["succeed", "fail", "crash", "crash-limit", "release"]),
    ),
    st.tuples(st.just("retry"), st.integers(0, 20)),
    st.tuples(st.just("claim"), st.integers(1, 3)),
    st.tuples(
        st.just("end"),
        st.integers(0, 20),
        st.sampled_from(["succeed", "fail", "crash", "crash-limit", "release"]),
    ),
    st.tuples(st.just("compact")),
)
"""What a store is asked to keep. `attempt` is a claim and its end as builds up to
0.2.0 logged them (a JobClaimed event); `claim` is a worker's claim as it is
made now (the rows' state, `JobQueue.claim`), and `end` the end of a job so
claimed, at the version it was claimed at."""

_TIMEOUTS = {"k": 60_000, "report.build": 60_000}


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


def play(store: Store, prefix: str, operations: list[tuple[Any, ...]]) -> None:
    """Append what each operation stands for (ids under `prefix`)."""
    ticks = itertools.count(1)
    jobs: list[str] = []
    for op in operations:
        kind = op[0]
        sid = f"{prefix}s{op[1]}" if kind in ("define", "tick", "fail", "skip", "delete") else ""
        exists = store.log.stream_version(f"schedule-{sid}") > 0 if sid else False
        if kind == "define":
            store.log.append(
                f"schedule-{sid}", ANY_VERSION, [defined(sid, 1000 * op[3], paused=op[2])]
            )
        elif kind == "tick" and exists:
            tick = next(ticks) * 1000
            fire_tick(store, sid, tick)
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
                capacity = {"q": op[1], "default": op[1]}
                transaction.claim(capacity, _TIMEOUTS, "w", transaction.now_ms)
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
