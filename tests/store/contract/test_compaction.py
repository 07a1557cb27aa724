"""Compaction: what each stream family keeps (the domain's retention rules, the
same on every store), with the read models left as they were; and compaction
as a duty of the scheduler lease: run with the lease's fence, each of its
transactions checks the term, so a holder whose lease moved on or expired
deletes nothing. Without a fence it is an operator's run and needs no lease."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from headgate._domain.events import (
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    FingerprintReleased,
    JobClaimed,
    JobFinished,
    JobState,
    JobSucceeded,
    ManualRunRequested,
)
from headgate._domain.streams import schedule_stream
from headgate._errors import LeaseLost
from headgate._projections import EnqueueEventRow
from headgate._store.port import (
    ANY_VERSION,
    DAY_MS,
    NO_STREAM,
    CompactionPolicy,
    CompactionReport,
    Fence,
    LeaseHolder,
    Store,
)
from headgate.testing import FakeClock
from tests.store.builders import claim, create_schedule, defined, enqueue, fire_tick

TTL = 1_000
HOLDER = LeaseHolder("holder", "host-a", 1)
NEXT = LeaseHolder("next", "host-b", 2)


TRIMS_DEFINITIONS = CompactionPolicy(definitions_per_schedule=1)
"""A policy under which compaction trims a schedule to its latest definition."""


def _redefined_schedules(store: Store, count: int = 3) -> None:
    """Schedules defined twice: compaction under TRIMS_DEFINITIONS trims each to
    its latest definition."""
    for n in range(count):
        stream = schedule_stream(f"s{n}")
        store.log.append(stream, NO_STREAM, [defined(f"s{n}")])
        store.log.append(stream, 1, [defined(f"s{n}", payload={"team": 8})])


def _event_count(store: Store) -> int:
    return len(store.log.read_all(0, 10_000))


def test_a_fenced_run_under_a_lease_taken_over_writes_nothing(
    store: Store, clock: FakeClock
) -> None:
    held = store.leases.acquire("scheduler", HOLDER, TTL)
    assert held is not None
    _redefined_schedules(store)
    before = _event_count(store)
    clock.advance(TTL)
    taken = store.leases.acquire("scheduler", NEXT, TTL)
    assert taken is not None and taken.term == held.term + 1
    with pytest.raises(LeaseLost, match="lease 'scheduler' is no longer held at term 1"):
        store.compact(fence=Fence("scheduler", held.term))
    assert _event_count(store) == before
    report = store.compact(TRIMS_DEFINITIONS, fence=Fence("scheduler", taken.term))
    assert (report.streams_examined, report.events_deleted) == (3, 3)


def test_a_fenced_run_past_the_leases_expiry_writes_nothing(store: Store, clock: FakeClock) -> None:
    """Nobody took the lease over, but it expired: the paused holder may no longer
    act on it (a takeover could commit at any moment)."""
    held = store.leases.acquire("scheduler", HOLDER, TTL)
    assert held is not None
    _redefined_schedules(store)
    before = _event_count(store)
    clock.advance(TTL)
    with pytest.raises(LeaseLost):
        store.compact(fence=Fence("scheduler", held.term))
    assert _event_count(store) == before


def test_an_operators_run_needs_no_lease(store: Store, clock: FakeClock) -> None:
    _redefined_schedules(store)
    assert store.leases.acquire("scheduler", HOLDER, TTL) is not None  # held by someone else
    report = store.compact(TRIMS_DEFINITIONS)
    assert (report.streams_examined, report.events_deleted) == (3, 3)
    assert _event_count(store) == 3


def _types(store: Store, stream_id: str) -> Counter[str]:
    return Counter(type(e.event).__name__ for e in store.log.read_stream(stream_id))


def _history(store: Store, schedule_id: str) -> list[EnqueueEventRow]:
    shown: list[EnqueueEventRow] = []
    cursor = None
    while True:
        page = store.reads.enqueue_history(schedule_id, 30, cursor)
        shown.extend(page.items)
        if page.next_cursor is None:
            return shown
        cursor = page.next_cursor


def test_a_schedule_keeps_its_newest_definitions_and_attempts(store: Store) -> None:
    create_schedule(store, "busy")
    for tick in range(1, 106):
        fire_tick(store, "busy", tick * 60_000)
    for payload in ({"team": 8}, {"team": 9}):
        version = store.log.stream_version("schedule-busy")
        store.log.append("schedule-busy", version, [defined("busy", payload=payload)])
    row, shown = store.reads.schedule("busy"), _history(store, "busy")
    assert len(shown) == 100 and shown[0].tick_ms == 105 * 60_000
    report = store.compact(CompactionPolicy(definitions_per_schedule=2))
    assert (report.streams_examined, report.events_deleted, report.jobs_removed) == (1, 6, 0)
    assert _types(store, "schedule-busy") == {"ScheduleDefined": 2, "EnqueueAttempted": 100}
    assert store.log.read_stream("schedule-busy")[-1].event == defined("busy", payload={"team": 9})
    assert store.reads.schedule("busy") == row
    assert _history(store, "busy") == shown
    assert store.log.stream_version("schedule-busy") == 108
    again = store.compact()
    assert (again.streams_examined, again.events_deleted) == (0, 0)


def test_a_schedule_keeps_every_definition_up_to_the_policys_count(store: Store) -> None:
    """The default keeps the newest 100 definitions: its history of changes."""
    create_schedule(store, "edited")
    for team in range(3):
        version = store.log.stream_version("schedule-edited")
        store.log.append("schedule-edited", version, [defined("edited", payload={"team": team})])
    assert store.compact().events_deleted == 0
    assert _types(store, "schedule-edited") == {"ScheduleDefined": 4}


def test_quarantine_keeps_the_newest_event_of_each_type(store: Store) -> None:
    stream = "quarantine-fp"
    for event in (
        FingerprintCrashBlamed("fp", "a", 500),
        FingerprintQuarantined("fp", "first"),
        FingerprintReleased("fp"),
        FingerprintCrashBlamed("fp", "b", 1_000),
        FingerprintQuarantined("fp", "again"),
    ):
        store.log.append(stream, ANY_VERSION, [event])
    entry = store.reads.quarantine_entry("fp")
    assert store.compact().events_deleted == 2
    assert [e.event for e in store.log.read_stream(stream)] == [
        FingerprintReleased("fp"),
        FingerprintCrashBlamed("fp", "b", 1_000),
        FingerprintQuarantined("fp", "again"),
    ]
    assert store.reads.quarantine_entry("fp") == entry


def test_finished_jobs_go_with_their_rows_once_past_retention(
    store: Store, clock: FakeClock
) -> None:
    for job_id in ("done", "failed", "cancelled", "quarantined", "running", "pending", "late"):
        enqueue(store, job_id)
    claim(store, "running")
    store.log.append("job-done", 1, [JobClaimed("done", "w", 1, 10**13)])
    store.log.append("job-done", 2, [JobSucceeded("done", 1, "w", 5, None)])
    for job_id, state in (
        ("failed", JobState.FAILED),
        ("cancelled", JobState.CANCELLED),
        ("quarantined", JobState.QUARANTINED),
    ):
        store.log.append(f"job-{job_id}", 1, [JobFinished(job_id, state)])
    clock.advance(DAY_MS)
    store.log.append("job-late", 1, [JobFinished("late", JobState.COMPLETED)])
    assert store.compact().jobs_removed == 0  # a day old to the millisecond: kept
    clock.advance(1)
    report = store.compact()
    assert (report.jobs_removed, report.events_deleted) == (3, 3 + 2 + 2)
    for gone in ("done", "failed", "cancelled"):
        assert store.reads.job(gone) is None
        assert store.log.read_stream(f"job-{gone}") == []
        assert store.log.stream_version(f"job-{gone}") == 0
    assert store.reads.job_attempts("done", 10) == []
    for kept in ("quarantined", "running", "pending", "late"):
        assert store.reads.job(kept) is not None
    clock.advance(DAY_MS)
    assert store.compact().jobs_removed == 1  # late


def test_each_schedules_newest_hundred_runs_outlive_the_job_retention(
    store: Store, clock: FakeClock
) -> None:
    """A schedule's run history (and the health read from it) folds its runs'
    job events: its newest 100 runs' jobs stay past the retention; older ones,
    and other jobs, go with their rows."""
    create_schedule(store, "busy")
    ticks = [n * 1_000 for n in range(1, 106)]
    for tick in ticks:
        fire_tick(store, "busy", tick, interval_ms=1_000)
        job_id = f"job-for-busy-{tick}"
        store.log.append(f"job-{job_id}", 1, [JobFinished(job_id, JobState.COMPLETED, "busy")])
    enqueue(store, "plain")
    store.log.append("job-plain", 1, [JobFinished("plain", JobState.COMPLETED)])
    clock.advance(2 * DAY_MS)
    assert store.compact().jobs_removed == 6
    assert store.reads.job("plain") is None
    kept = store.reads.schedule_runs("busy", 100, None).items
    assert [read.run.tick_ms for read in kept] == ticks[:4:-1]
    assert all(read.job_state == "completed" for read in kept)
    assert store.reads.job("job-for-busy-5000") is None
    assert store.reads.job("job-for-busy-6000") is not None


def test_manual_run_keys_expire_after_their_retention(store: Store, clock: FakeClock) -> None:
    store.log.append("manual-k1", NO_STREAM, [ManualRunRequested("s", "k1", "j1")])
    clock.advance(7 * DAY_MS)
    store.log.append("manual-k2", NO_STREAM, [ManualRunRequested("s", "k2", "j2")])
    assert store.compact().events_deleted == 0
    clock.advance(1)
    assert store.compact().events_deleted == 1
    assert store.log.read_stream("manual-k1") == []
    assert len(store.log.read_stream("manual-k2")) == 1


def test_a_cancelled_run_leaves_its_streams_to_the_next_run(store: Store) -> None:
    _redefined_schedules(store)
    cancel = threading.Event()
    cancel.set()
    assert store.compact(TRIMS_DEFINITIONS, cancel=cancel) == CompactionReport(3, 0, 0)
    assert _event_count(store) == 6
    assert store.compact(TRIMS_DEFINITIONS) == CompactionReport(3, 3, 0)
    assert store.compact(TRIMS_DEFINITIONS) == CompactionReport(0, 0, 0)
