"""What a write transaction answers and guarantees: reads of the state it
changes, the gate's facts, the instant its events are recorded at, and
all-or-nothing commits."""

from __future__ import annotations

import pytest

from headgate._domain.decisions import Candidate
from headgate._domain.events import (
    FingerprintQuarantined,
    JobEnqueued,
    JobFinished,
    JobState,
    ManualRunRequested,
    ScheduleDeleted,
)
from headgate._errors import ConcurrencyConflict
from headgate._store.port import NO_STREAM, Store, StreamAppend
from headgate.testing import FakeClock
from tests.store.builders import create_schedule, defined, enqueued, fire_tick


def _job(job_id: str, unique_key: str | None = None, queue: str = "q") -> JobEnqueued:
    return enqueued(job_id, "k", queue, {"n": 1}, unique_key)


def test_reads_inside_see_the_transactions_own_appends(store: Store) -> None:
    with store.log.write() as transaction:
        assert transaction.schedule("a") is None
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        row = transaction.schedule("a")
        assert row is not None and row.version == 1
        transaction.append_units([[StreamAppend("job-j", NO_STREAM, (_job("j"),))]])
        job = transaction.job("j")
        assert job is not None and job.state == "pending"
        assert transaction.stream_versions(["schedule-a", "job-j", "job-none"]) == {
            "schedule-a": 1,
            "job-j": 1,
            "job-none": 0,
        }
        assert transaction.head == 2


def test_an_exception_inside_commits_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError), store.log.write() as transaction:
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        raise RuntimeError("the caller changed its mind")
    assert store.log.head() == 0
    assert store.reads.schedule("a") is None


def test_first_events_find_existing_streams_only(store: Store) -> None:
    store.log.append("job-j", NO_STREAM, [_job("j")])
    store.log.append("job-j", 1, [JobFinished("j", JobState.COMPLETED)])
    store.log.append("manual-x", NO_STREAM, [ManualRunRequested("s", "key", "j2")])
    with store.log.write() as transaction:
        found = transaction.first_events(["job-j", "manual-x", "job-missing"])
        assert found == {"job-j": _job("j"), "manual-x": ManualRunRequested("s", "key", "j2")}
        # A missing stream is known to be at version 0 for what follows.
        (result,) = transaction.append_units(
            [[StreamAppend("job-missing", NO_STREAM, (_job("missing"),))]]
        )
        assert isinstance(result, list)


def test_gate_facts_answer_for_every_candidate_in_bulk(store: Store) -> None:
    store.log.append("job-held", NO_STREAM, [_job("held", unique_key="key-1")])
    store.log.append("job-done", NO_STREAM, [_job("done", unique_key="key-2")])
    store.log.append("job-done", 1, [JobFinished("done", JobState.COMPLETED)])
    store.log.append("job-other", NO_STREAM, [_job("other", queue="busy")])
    store.log.append("quarantine-bad", NO_STREAM, [FingerprintQuarantined("bad", "poison")])
    candidates = [
        Candidate(_job("held", unique_key="key-1"), "fine", 7),  # the same job, again
        Candidate(_job("new-1", unique_key="key-1"), "fine", 7),  # its key is held
        Candidate(_job("new-2", unique_key="key-2"), "bad", 7),  # key free, quarantined
    ]
    with store.log.write() as transaction:
        facts = transaction.gate_facts(candidates, ["busy", "idle"])
    assert facts.existing_jobs == {"held": _job("held", unique_key="key-1")}
    assert facts.unique_key_holders == {"key-1": "held"}
    assert facts.quarantined == frozenset({"bad"})
    assert facts.pending == {"busy": 1, "idle": 0}


def test_gate_facts_of_nothing_are_empty(store: Store) -> None:
    with store.log.write() as transaction:
        facts = transaction.gate_facts([], [])
    assert (facts.existing_jobs, facts.unique_key_holders, facts.quarantined, facts.pending) == (
        {},
        {},
        frozenset(),
        {},
    )


def test_events_are_recorded_at_the_instant_asked_or_now_if_later(
    store: Store, clock: FakeClock
) -> None:
    ahead, behind = clock.now_ms() + 500, clock.now_ms() - 500
    with store.log.write(record_at_ms=ahead) as transaction:
        assert transaction.now_ms == ahead
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
    with store.log.write(record_at_ms=behind) as transaction:
        assert transaction.now_ms == clock.now_ms()
        transaction.append_units([[StreamAppend("schedule-b", NO_STREAM, (defined("b"),))]])
    assert [e.recorded_at_ms for e in store.log.read_all()] == [ahead, clock.now_ms()]


def test_a_tick_unit_lands_whole_and_a_stale_one_not_at_all(store: Store) -> None:
    create_schedule(store, "s")
    fire_tick(store, "s", 60_000)
    assert store.log.stream_version("schedule-s") == 2
    with pytest.raises(ConcurrencyConflict):
        fire_tick(store, "s", 60_000)  # the same tick again: the job stream exists
    assert store.log.stream_version("schedule-s") == 2
    assert len(store.reads.enqueue_history("s", 10, None).items) == 1


def test_schedules_are_read_in_bulk_deleted_ones_included(store: Store) -> None:
    for n in range(1_100):  # more than one query's worth of ids
        create_schedule(store, f"s{n}", next_run_ms=60_000 + n)
    fire_tick(store, "s7", 60_007)
    store.log.append("schedule-s9", 1, [ScheduleDeleted("s9")])
    wanted = [f"s{n}" for n in range(1_100)] + ["missing", "bad\x00id", "x" * 300]
    with store.log.write() as transaction:
        rows = transaction.schedules(wanted)
        assert sorted(rows) == sorted(f"s{n}" for n in range(1_100))
        assert rows["s1099"].next_run_ms == 61_099
        assert rows["s9"].deleted and rows["s9"].version == 2
        assert rows["s7"] == transaction.schedule("s7") and rows["s7"].version == 2
        assert transaction.schedules([]) == {}
        # What it read is what an append is checked against: each stream's version.
        results = transaction.append_units(
            [
                [StreamAppend("schedule-s7", rows["s7"].version, (defined("s7"),))],
                [StreamAppend("schedule-missing", NO_STREAM, (defined("missing"),))],
                [StreamAppend("schedule-s1", NO_STREAM, (defined("s1"),))],
            ]
        )
        assert isinstance(results[0], list) and isinstance(results[1], list)
        assert isinstance(results[2], ConcurrencyConflict)
        # It sees the transaction's own appends.
        after = transaction.schedules(["s7", "missing"])
        assert after["s7"].version == 3 and after["missing"].version == 1
    assert store.reads.schedule("missing") is not None
