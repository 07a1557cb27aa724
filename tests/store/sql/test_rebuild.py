"""Rebuild, verify, replay and compaction keep projections equal to the live path."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import MetaData, func, insert, select, update

from headgate._domain.events import (
    JobFinished,
    JobState,
)
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import ProjectionsRebuilding
from headgate._projections import ALL_PROJECTIONS
from headgate._store.port import ANY_VERSION, NO_STREAM, CompactionPolicy
from headgate._store.sql import schedule_reads as read_model
from headgate._store.sql.compaction import compact
from headgate._store.sql.maintenance import REPLAY_PREFIX, rebuild, replay, verify
from headgate._store.sql.projection_tables import projection_tables
from headgate._store.sql.schema import (
    LIVE,
    POSITIONS,
    compaction_state,
    events,
    log_head,
    projection_checkpoints,
    rebuild_claims,
)
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import drop_postgres_schema, fresh_postgres_url
from tests.store.builders import attempted, create_schedule, defined, enqueued, fire_tick
from tests.store.histories import OPERATION, play
from tests.store.snapshots import snapshot

_examples = itertools.count()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(OPERATION, min_size=1, max_size=40))
def test_rebuild_equals_live_for_any_event_sequence(
    store: SqlStore, operations: list[tuple[Any, ...]]
) -> None:
    store.clock.advance(1)  # type: ignore[attr-defined]
    play(store, f"e{next(_examples)}-", operations)
    live = snapshot(store.engine)
    assert verify(store).ok
    rebuild(store)
    assert snapshot(store.engine) == live


def _busy_store(store: SqlStore, schedules: int = 5, ticks: int = 30) -> None:
    for n in range(schedules):
        create_schedule(store, f"s{n}")
    for tick in range(1, ticks + 1):
        for n in range(schedules):
            fire_tick(store, f"s{n}", tick * 60_000)


def test_verify_reports_a_row_that_differs(store: SqlStore) -> None:
    _busy_store(store, schedules=2, ticks=3)
    with store.engine.begin() as connection:
        connection.execute(
            update(LIVE.schedules)
            .where(LIVE.schedules.c.schedule_id == "s1")
            .values(kind="tampered")
        )
    report = verify(store)
    assert not report.ok and report.difference_count == 1
    (difference,) = report.differences
    assert (difference.projection, difference.key) == ("schedules", "s1")
    assert difference.live is not None and difference.live["kind"] == "tampered"
    assert difference.rebuilt is not None and difference.rebuilt["kind"] == "report.build"


def test_interrupted_rebuild_resumes_from_its_checkpoint(store: SqlStore) -> None:
    _busy_store(store)
    live = snapshot(store.engine)
    batches: list[int] = []

    def interrupt_after_three(_: str, reached: int, __: int) -> None:
        batches.append(reached)
        if len(batches) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rebuild(store, batch_size=40, on_progress=interrupt_after_three)
    assert batches == [40, 80, 120]
    with store.engine.connect() as connection:
        states = dict(
            connection.execute(
                select(projection_checkpoints.c.name, projection_checkpoints.c.position)
            ).all()
        )
        assert states == {p.name: 120 for p in ALL_PROJECTIONS}
    partial = snapshot(store.engine)
    assert 0 < len(partial["jobs"]) < len(live["jobs"])
    # While projections are rebuilding, nothing may decide on half-built tables.
    with pytest.raises(
        ProjectionsRebuilding, match=r"schedules at 120 of \d+.*headgate projections rebuild"
    ):
        fire_tick(store, "s0", 31 * 60_000)
    assert snapshot(store.engine) == partial
    # Resuming reaches the head; then writes flow again.
    report = rebuild(store, batch_size=40)
    assert report.resumed == [p.name for p in ALL_PROJECTIONS]
    assert snapshot(store.engine) == live
    assert verify(store).ok
    fire_tick(store, "s1", 31 * 60_000)
    assert len(snapshot(store.engine)["jobs"]) == len(live["jobs"]) + 1
    assert verify(store).ok


def test_a_rebuild_keeps_the_claims_of_running_jobs_through_an_interruption(
    store: SqlStore,
) -> None:
    """A claim is not in the log: the rebuild puts it back, so a job running when
    the rebuild began is still its worker's (not claimable again), and the
    worker's end is recorded. Verify agrees with the live rows before and after."""
    _busy_store(store)
    with store.log.write() as transaction:
        claimed = transaction.claim({"default": 3}, {"report.build": 60_000}, "w1", 10**13)
    assert len(claimed) == 3
    assert verify(store).ok
    live = snapshot(store.engine)

    def interrupt(_: str, __: int, ___: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rebuild(store, batch_size=40, on_progress=interrupt)
    rebuild(store, batch_size=40)
    assert snapshot(store.engine) == live
    assert verify(store).ok
    with store.log.write() as transaction:
        others = transaction.claim({"default": 200}, {"report.build": 60_000}, "w2", 10**13)
    assert not {row.job_id for row in others} & {row.job_id for row in claimed}
    first = claimed[0]
    store.log.append(
        f"job-{first.job_id}", first.version, [JobFinished(first.job_id, JobState.COMPLETED)]
    )
    with store.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(rebuild_claims)).scalar() == 0


def test_no_write_comes_between_the_last_batch_and_the_claims_put_back(
    store: SqlStore,
) -> None:
    """Writes resume with the kept claims back on their rows, in one transaction:
    a worker claiming as soon as the last batch is folded is refused, so it can
    never take a job that still runs elsewhere."""
    _busy_store(store)
    with store.log.write() as transaction:
        (claimed,) = transaction.claim({"default": 1}, {"report.build": 60_000}, "w1", 10**13)
    refused: list[bool] = []

    def claim_at_the_head(_: str, reached: int, head: int) -> None:
        if reached == head:
            with pytest.raises(ProjectionsRebuilding), store.log.write() as transaction:
                transaction.claim({"default": 200}, {"report.build": 60_000}, "w2", 10**13)
            refused.append(True)

    rebuild(store, batch_size=40, on_progress=claim_at_the_head)
    assert refused == [True]
    job = store.reads.job(claimed.job_id)
    assert job is not None and (job.state, job.worker_id) == ("running", "w1")


def test_a_write_waiting_while_a_rebuild_starts_is_refused_and_the_rebuild_completes(
    store: SqlStore, store_url: str
) -> None:
    """A writer queued behind the transaction that starts a rebuild must see the
    rebuild once it gets the lock, not the checkpoints from before it."""
    from headgate._store.sql.maintenance import _set_checkpoint

    other = SqlStore(store_url, FakeClock())
    outcome: list[object] = []

    def write_meanwhile() -> None:
        try:
            other.log.append("job-late", ANY_VERSION, [enqueued("late", "k", "q", None)])
            outcome.append("written")
        except ProjectionsRebuilding as refused:
            outcome.append(refused)

    try:
        with store.log.write(while_rebuilding=True) as transaction:
            transaction.connection.execute(LIVE.jobs.delete())
            _set_checkpoint(transaction.connection, "jobs", 0, rebuilding=True)
            writer = threading.Thread(target=write_meanwhile)
            writer.start()
            writer.join(0.5)
            assert writer.is_alive(), "the writer waits for the rebuild's transaction"
        writer.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], ProjectionsRebuilding)
        rebuild(store, ["jobs"])
        assert verify(store).ok
    finally:
        other.close()


def test_rebuild_of_one_projection_leaves_the_others(store: SqlStore) -> None:
    _busy_store(store, schedules=2, ticks=2)
    live = snapshot(store.engine)
    report = rebuild(store, ["enqueue_history"])
    assert set(report.applied) == {"enqueue_history"}
    assert snapshot(store.engine) == live
    with pytest.raises(
        ValueError, match="--projection: unknown 'nope'; choose from schedules, jobs"
    ):
        rebuild(store, ["nope"])


@pytest.mark.parametrize("batch_size", [0, 10**23])
def test_a_bad_batch_size_is_refused_before_anything_is_emptied(
    store: SqlStore, batch_size: int
) -> None:
    _busy_store(store, schedules=2, ticks=2)
    live = snapshot(store.engine)
    for command in (rebuild, verify, replay):
        with pytest.raises(ValueError, match=f"--batch-size: must be 1-100000, got {batch_size}"):
            command(store, batch_size=batch_size)  # type: ignore[operator]
    assert snapshot(store.engine) == live
    with store.log.write():  # nothing left half rebuilt: writes go on
        pass


def test_replay_until_a_position_shows_the_past(
    store: SqlStore, store_url: str, tmp_path: Any, request: Any
) -> None:
    _busy_store(store, schedules=3, ticks=5)
    position = store.log.head()
    past = snapshot(store.engine)
    for n in range(3):
        fire_tick(store, f"s{n}", 6 * 60_000)
    if store_url.startswith("sqlite"):
        target_url, cleanup = f"sqlite:///{tmp_path / 'replay.db'}", None
    else:
        target_url, schema = fresh_postgres_url(request.getfixturevalue("postgres_server_url"))
        cleanup = schema
    try:
        report = replay(store, target_url, until=position)
        assert report.until == position
        assert report.applied["EnqueueAttempted"] == 15
        target = SqlStore(target_url, FakeClock())
        assert snapshot(target.engine) == past
        target.close()
        with pytest.raises(ValueError, match="replay needs a fresh database"):
            replay(store, target_url)
    finally:
        if cleanup is not None:
            drop_postgres_schema(request.getfixturevalue("postgres_server_url"), cleanup)


def test_replay_into_scratch_tables(store: SqlStore) -> None:
    _busy_store(store, schedules=2, ticks=2)
    report = replay(store, None, until=3)
    assert report.rows["headgate_replay_schedules"] == 2
    assert report.rows["headgate_replay_jobs"] == 1


def _busy_for_two_days(store: SqlStore, ticks: int, finished: int) -> None:
    """One schedule fired `ticks` times, its first `finished` jobs done, two days ago."""
    create_schedule(store, "busy")
    for tick in range(1, ticks + 1):
        fire_tick(store, "busy", tick * 1000, interval_ms=1000)
    for tick in range(1, finished + 1):
        job_id = f"job-for-busy-{tick * 1000}"
        store.log.append(f"job-{job_id}", 1, [JobFinished(job_id, JobState.COMPLETED)])
    store.clock.advance(2 * 86_400_000)  # type: ignore[attr-defined]


def test_compaction_bounds_the_log_and_preserves_projections(store: SqlStore) -> None:
    _busy_for_two_days(store, ticks=250, finished=200)
    shown = _history_shown(store, "busy")
    assert [tick for tick, _ in shown] == [tick * 1000 for tick in range(250, 150, -1)]
    before = snapshot(store.engine)
    report = compact(store.database, store.log)
    after = snapshot(store.engine)
    assert report.jobs_removed == 150, "the schedule's newest 100 runs' jobs stay"
    unchanged = ("schedules", "quarantine")
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    assert len(after["jobs"]) == 100
    assert sorted(row[0] for row in after["schedule_runs"]) == sorted(
        f"job-for-busy-{tick * 1000}" for tick in range(151, 251)
    )
    assert len(before["enqueue_history"]) == 250, "the table keeps rows until compaction"
    kept = sorted(row[0] for row in after["enqueue_history"])
    assert kept == sorted(position for _, position in shown), "compaction keeps the rows shown"
    assert _history_shown(store, "busy") == shown
    with store.engine.connect() as connection:
        schedule_events = connection.execute(
            select(events.c.type, func.count())
            .where(events.c.stream_id == "schedule-busy")
            .group_by(events.c.type)
        ).all()
    assert dict(schedule_events) == {"ScheduleDefined": 1, "EnqueueAttempted": 100}
    assert verify(store).ok
    rebuild(store)
    assert snapshot(store.engine) == after


def _history_shown(store: SqlStore, schedule_id: str) -> list[tuple[int, int]]:
    """(tick, event id) of every attempt the history shows, newest first, page by page."""
    shown: list[tuple[int, int]] = []
    cursor = None
    with store.engine.connect() as connection:
        while True:
            page = read_model.enqueue_history_page(connection, schedule_id, 30, cursor)
            shown.extend((row.tick_ms, row.event_id) for row in page.items)
            if page.next_cursor is None:
                return shown
            cursor = page.next_cursor


class _StopsDuringTheFirstTransaction(threading.Event):
    """A stop that comes while the first transaction runs (its first check says go)."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks > 1


def test_compaction_runs_in_small_transactions_and_a_stopped_run_resumes(
    store: SqlStore,
) -> None:
    """Each transaction takes a few streams or jobs, so ticks can interleave; a run
    stopped part-way keeps what it did and leaves the rest to the next run."""
    small = {"streams_per_transaction": 2, "jobs_per_transaction": 3}
    _busy_store(store, schedules=5, ticks=3)
    for n in range(5):
        for _ in range(2):  # two redefinitions: older definitions compaction trims
            store.log.append(schedule_stream(f"s{n}"), ANY_VERSION, [defined(f"s{n}", 240_000)])
        job_id = f"plain-{n}"  # not a schedule's run: those stay with its newest 100
        store.log.append(job_stream(job_id), NO_STREAM, [enqueued(job_id, "k", "q", None)])
        store.log.append(job_stream(job_id), 1, [JobFinished(job_id, JobState.COMPLETED)])
    store.clock.advance(2 * 86_400_000)  # type: ignore[attr-defined]
    policy = CompactionPolicy(definitions_per_schedule=1)
    partial = compact(store.database, store.log, policy, _StopsDuringTheFirstTransaction(), **small)
    assert partial.events_deleted == 4  # two streams' older definitions, one transaction
    assert _compacted_up_to(store) == 0 and verify(store).ok
    report = compact(store.database, store.log, policy, **small)
    assert (report.events_deleted, report.jobs_removed) == (6 + 2 * 5, 5)  # a job: 2 events
    assert _compacted_up_to(store) == store.log.head() and verify(store).ok
    definitions = [e for e in store.log.read_all(0, 10_000) if e.type == "ScheduleDefined"]
    assert len(definitions) == 5


def _compacted_up_to(store: SqlStore) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(select(compaction_state.c.position)).scalar_one())


def test_rebuild_handles_a_unique_key_handed_over_within_one_batch(store: SqlStore) -> None:
    store.log.append("job-a", 0, [enqueued("a", "k", "q", {}, "key-1")])
    create_schedule(store, "unrelated")
    store.log.append("job-a", 1, [JobFinished("a", JobState.COMPLETED)])
    store.log.append("job-b", 0, [enqueued("b", "k", "q", {}, "key-1")])
    live = snapshot(store.engine)
    rebuild(store, batch_size=2)  # batches: [a enqueued, unrelated], [a finished, b enqueued]
    assert snapshot(store.engine) == live


def test_a_log_from_before_attempts_carried_the_advance_rebuilds_alike(store: SqlStore) -> None:
    """Before EnqueueAttempted v2 a settled attempt was followed by its own
    NextRunAdvanced; such a log must still rebuild to the schedule it describes."""
    create_schedule(store, "old")
    head = store.log.head()
    v1_attempt = (
        '{"attempt":1,"job_id":"job-for-old-60000","outcome":"enqueued","reason":"accepted",'
        '"retry_at_ms":null,"schedule_id":"old","tick_ms":60000}'
    )
    advance = '{"last_enqueued_ms":60000,"next_run_ms":120000,"schedule_id":"old"}'
    with store.engine.begin() as connection:
        connection.execute(
            insert(events),
            [
                {
                    "position": head + offset,
                    "stream_id": "schedule-old",
                    "version": 1 + offset,
                    "type": type_name,
                    "schema_version": 1,
                    "body": body,
                    "recorded_at_ms": 60_000,
                }
                for offset, type_name, body in (
                    (1, "EnqueueAttempted", v1_attempt),
                    (2, "NextRunAdvanced", advance),
                )
            ],
        )
        connection.execute(update(log_head).values(position=head + 2))
        if connection.dialect.name == "postgresql":  # where positions come from now
            connection.execute(select(func.setval(POSITIONS.name, head + 2)))
    assert store.log.read_stream("schedule-old")[1].event == attempted("old", 60_000)
    rebuild(store)
    assert verify(store).ok
    with store.engine.connect() as connection:
        row = read_model.schedule(connection, "old")
        history = read_model.enqueue_history_page(connection, "old", 10, None).items
    assert row is not None
    assert (row.next_run_ms, row.due_at_ms, row.failures, row.last_enqueued_ms, row.version) == (
        120_000,
        120_000,
        0,
        60_000,
        3,
    )
    assert [(h.tick_ms, h.outcome) for h in history] == [(60_000, "enqueued")]


def _compacting_after_the_fold(
    store: SqlStore,
) -> tuple[Callable[[str, int, int], None], list[int]]:
    """A busy store, and a progress callback for verify or replay that compacts as
    soon as their unlocked fold reaches its target; returns it and the events
    each compaction deleted."""
    _busy_for_two_days(store, ticks=150, finished=10)
    compacted: list[int] = []

    def compact_once_folded(phase: str, reached: int, target: int) -> None:
        if phase == "events" and reached == target and not compacted:
            compacted.append(compact(store.database, store.log).events_deleted)

    return compact_once_folded, compacted


def test_verify_agrees_when_compaction_runs_while_it_folds(store: SqlStore) -> None:
    """verify folds most of the log without a lock; a compaction in between removes
    old attempts and finished jobs, and their live rows, which the scratch fold
    had already made."""
    on_progress, compacted = _compacting_after_the_fold(store)
    report = verify(store, on_progress=on_progress)
    assert compacted and compacted[0] > 0
    assert report.ok, report.differences


@pytest.mark.parametrize("into", ["another database", "scratch tables"])
def test_replay_agrees_when_compaction_runs_while_it_folds(
    store: SqlStore,
    *,
    store_url: str,
    tmp_path: Any,
    request: Any,
    into: str,
) -> None:
    """replay folds without a lock; a compaction meanwhile removes old attempts and
    finished jobs from the log. The target ends a fold of the log as it now is:
    what the live projections show."""
    on_progress, compacted = _compacting_after_the_fold(store)
    server = request.getfixturevalue("postgres_server_url") if "postgresql" in store_url else None
    if into == "scratch tables":
        replay(store, None, on_progress=on_progress)
        replayed = snapshot(store.engine, projection_tables(MetaData(), REPLAY_PREFIX))
    elif server is None:
        target_url = f"sqlite:///{tmp_path / 'replay.db'}"
        replay(store, target_url, on_progress=on_progress)
        replayed = _snapshot_of(target_url)
    else:
        target_url, schema = fresh_postgres_url(server)
        try:
            replay(store, target_url, on_progress=on_progress)
            replayed = _snapshot_of(target_url)
        finally:
            drop_postgres_schema(server, schema)
    assert compacted and compacted[0] > 0
    live = snapshot(store.engine)
    assert len(live["enqueue_history"]) == 100 and len(live["jobs"]) == 140
    assert replayed == live


def _snapshot_of(url: str) -> dict[str, list[tuple[Any, ...]]]:
    target = SqlStore(url, FakeClock())
    try:
        return snapshot(target.engine)
    finally:
        target.close()
