"""The SQL store states the claim's rules in SQL (its claim index, its serial
rule's NOT EXISTS, its rate starts table); on generated rows it chooses what
`claim_policy` chooses, in the same order, and counts, frees and forgets rate
starts, finds late jobs and reads fair turns as the pure functions do."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from headgate._domain import claim_policy
from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    JobEnqueued,
    JobFinished,
    JobState,
    QueuePaused,
    QueueResumed,
    RateLimitCleared,
    RateLimitSet,
)
from headgate._domain.limits import EACH_PARTITION, scope_of
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream, limit_stream, queue_stream, rate_stream
from headgate._projections import JobRow
from headgate._store.port import ANY_VERSION, NO_STREAM
from headgate._store.sql import flow_facts
from headgate._store.sql.schema import LIVE, rate_starts
from headgate._store.sql.store import SqlStore

QUEUES = ("q", "q2")
KINDS = ("k", "k2")
TIMEOUTS = {"k": 60_000, "k2": 30_000}
_ids = itertools.count()

JOB = st.fixed_dictionaries(
    {
        "queue": st.sampled_from(QUEUES),
        "kind": st.sampled_from([*KINDS, "other"]),
        "priority": st.sampled_from([-1, 0, 0, 5]),
        "partition_key": st.sampled_from([None, "p0", "p1"]),
        "rate_class": st.sampled_from([None, "r0", "r1"]),
        "fair_turn": st.integers(0, 2),
        "run_in": st.sampled_from([-1_000, 0, 0, 1, 1_000]),
        "start_within": st.sampled_from([None, 0, 500]),
        "tick": st.sampled_from([None, None, ("s0", False), ("s0", True), ("s1", True)]),
    }
)
ROUND = st.fixed_dictionaries(
    {
        "jobs": st.lists(JOB, max_size=8),
        "limits": st.lists(
            st.tuples(
                st.sampled_from([None, *QUEUES]),
                st.sampled_from([None, *KINDS]),
                st.sampled_from([None, EACH_PARTITION, "p0"]),
                st.sampled_from([None, 0, 1, 2]),
            ),
            max_size=2,
        ),
        "rates": st.lists(
            st.tuples(
                st.sampled_from(["r0", "r1"]),
                st.sampled_from([None, 1, 2]),
                st.sampled_from([1_000, 2_000]),
            ),
            max_size=2,
        ),
        "paused": st.sampled_from([None, ("q", True), ("q", False), ("q2", True)]),
        "advance": st.sampled_from([0, 1, 999, 1_000, 1_001]),
        "capacity": st.tuples(st.integers(0, 4), st.integers(0, 4)),
        "ends": st.integers(0, 3),
    }
)
"""One round: jobs to add, limits and rate classes to set or clear, a queue to
pause or resume, the oldest running jobs ended, the clock moved on (to a rate
window's edges), then a claim."""


def _clean_slate(store: SqlStore) -> None:
    """No limit, rate class, pause or unfinished job left by an earlier example."""
    state = store.reads.limits_state(store.clock.now_ms())
    for limit in state.limits:
        cleared = ConcurrencyLimitCleared(limit.queue, limit.kind, limit.partition_key)
        store.log.append(limit_stream(limit.scope), ANY_VERSION, [cleared])
    for rate in state.rates:
        store.log.append(
            rate_stream(rate.rate_class), ANY_VERSION, [RateLimitCleared(rate.rate_class)]
        )
    for queue in store.reads.paused_queues():
        store.log.append(queue_stream(queue), ANY_VERSION, [QueueResumed(queue)])
    _end(store, [job for job in _jobs(store) if job.state in ("pending", "running")])


def _end(store: SqlStore, jobs: list[JobRow]) -> None:
    for job in jobs:
        store.log.append(
            job_stream(job.job_id), ANY_VERSION, [JobFinished(job.job_id, JobState.COMPLETED)]
        )


def _write(store: SqlStore, round_: dict[str, Any]) -> None:
    log, now = store.log, store.clock.now_ms()
    for job in round_["jobs"]:
        job_id = f"j{next(_ids)}"
        tick = job["tick"]
        event = JobEnqueued(
            job_id,
            job["kind"],
            None,
            JobOptions.restored(
                queue=job["queue"],
                priority=job["priority"],
                partition_key=job["partition_key"],
                rate_class=job["rate_class"],
                run_at_ms=now + job["run_in"],
                start_within_ms=job["start_within"],
            ),
            periodic_schedule_id=None if tick is None else tick[0],
            periodic_tick_ms=None if tick is None else next(_ids),
            serial=tick is not None and tick[1],
            fair_turn=job["fair_turn"],
        )
        log.append(job_stream(job_id), NO_STREAM, [event])
    for queue, kind, partition_key, limit in round_["limits"]:
        change = (
            ConcurrencyLimitCleared(queue, kind, partition_key)
            if limit is None
            else ConcurrencyLimitSet(queue, kind, partition_key, limit)
        )
        log.append(limit_stream(scope_of(queue, kind, partition_key)), ANY_VERSION, [change])
    for rate_class, limit, per_ms in round_["rates"]:
        rate = (
            RateLimitCleared(rate_class)
            if limit is None
            else RateLimitSet(rate_class, limit, per_ms)
        )
        log.append(rate_stream(rate_class), ANY_VERSION, [rate])
    if round_["paused"] is not None:
        queue, pause = round_["paused"]
        log.append(
            queue_stream(queue), ANY_VERSION, [QueuePaused(queue) if pause else QueueResumed(queue)]
        )
    running = sorted(
        (job for job in _jobs(store) if job.state == "running"), key=lambda job: job.job_id
    )
    _end(store, running[: round_["ends"]])
    store.clock.advance(round_["advance"])  # type: ignore[attr-defined]


def _jobs(store: SqlStore) -> list[JobRow]:
    jobs = LIVE.jobs
    columns = [jobs.c[name] for name in JobRow.__dataclass_fields__]
    with store.engine.connect() as connection:
        return [JobRow(*row) for row in connection.execute(select(*columns))]


def _starts(store: SqlStore) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    with store.engine.connect() as connection:
        query = select(rate_starts.c.rate_class, rate_starts.c.started_at_ms)
        for rate_class, at in connection.execute(query):
            found.setdefault(rate_class, []).append(int(at))
    return {name: sorted(starts) for name, starts in found.items()}


def _expected_claim(store: SqlStore, capacity: dict[str, int], now: int) -> list[str]:
    jobs = _jobs(store)
    ticks = claim_policy.live_ticks_by_schedule(jobs)
    state = store.reads.limits_state(now)
    limited = bool(state.limits or state.rates)
    chosen = claim_policy.choose_claims(
        lambda queue: [job for job in jobs if job.queue == queue],
        capacity,
        list(TIMEOUTS),
        now,
        set(store.reads.paused_queues()),
        lambda schedule_id: ticks.get(schedule_id, []),
        state.slots() if limited else None,
    )
    return [job.job_id for job in chosen]


def _check_reads(store: SqlStore, now: int) -> None:
    """What a worker and the gate read, against the pure functions on the rows."""
    jobs = _jobs(store)
    ticks = claim_policy.live_ticks_by_schedule(jobs)
    rates = [row.limit() for row in store.reads.limits_state(now).rates]
    starts = _starts(store)
    assert store.reads.limits_state(now).started == claim_policy.recent_starts(rates, starts, now)
    pending = [job for job in jobs if job.state == "pending"]
    paused = set(store.reads.paused_queues())
    scheduled = claim_policy.earliest_claimable(
        pending, TIMEOUTS, paused, lambda s: ticks.get(s, []), now
    )
    frees = claim_policy.rate_slot_frees_at(rates, starts, now)
    expected = min((at for at in (scheduled, frees) if at is not None), default=None)
    assert store.reads.next_claimable_at(QUEUES, TIMEOUTS, now) == expected
    late = sorted(
        (
            job
            for job in pending
            if claim_policy.is_late(job.start_by_ms, now) and job.kind in TIMEOUTS
        ),
        key=lambda job: (job.start_by_ms, job.job_id),
    )
    asked = [
        (queue, priority, key)
        for queue in QUEUES
        for priority in (-1, 0, 5)
        for key in ("p0", "p1")
    ]
    with store.log.write() as transaction:
        assert [row.job_id for row in transaction.late_jobs(QUEUES, TIMEOUTS, now, 100)] == [
            job.job_id for job in late
        ]
        assert transaction.rate_slot_frees_at(now) == frees
    assert claim_policy.latest_live_turns(jobs, asked) == _sql_turns(store, asked)


def _sql_turns(
    store: SqlStore, asked: list[tuple[str, int, str]]
) -> dict[tuple[str, int, str], int]:
    with store.engine.connect() as connection:
        return flow_facts.turns(connection, [], asked).latest


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.lists(ROUND, min_size=1, max_size=6))
def test_the_sql_claim_chooses_what_the_claim_policy_chooses(
    store: SqlStore, rounds: list[dict[str, Any]]
) -> None:
    _clean_slate(store)
    for round_ in rounds:
        _write(store, round_)
        now = store.clock.now_ms()
        capacity = dict(zip(QUEUES, round_["capacity"], strict=True))
        expected = _expected_claim(store, capacity, now)
        starts_before = _starts(store)
        rates = {row.rate_class: row.limit() for row in store.reads.limits_state(now).rates}
        with store.log.write() as transaction:
            claimed = transaction.claim(capacity, TIMEOUTS, "w", now)
        assert [row.job_id for row in claimed] == expected
        if rates and any(capacity.values()):
            new = [row.rate_class for row in claimed if row.rate_class in rates]
            kept = {
                name: sorted(
                    (
                        claim_policy.starts_kept(starts, rates[name].limit, rates[name].per_ms, now)
                        if name in rates
                        else starts
                    )
                    + [now] * new.count(name)
                )
                for name, starts in starts_before.items()
            }
            for name in set(new) - set(kept):
                kept[name] = [now] * new.count(name)
            assert _starts(store) == {name: starts for name, starts in kept.items() if starts}
        _check_reads(store, now)
