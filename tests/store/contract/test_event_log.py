"""The event log: appends in units at expected versions, stream versions, reads of
the log, and what a write transaction guarantees (all or nothing, its own
appends visible to it, the instant its events are recorded at)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from headgate._domain.events import (
    FingerprintBlameCleared,
    JobAttemptFailed,
    JobEnqueued,
    JobFinished,
    JobState,
    JobSucceeded,
    ManualRunRequested,
    NextRunAdvanced,
    ScheduleDeleted,
)
from headgate._errors import ConcurrencyConflict
from headgate._runtime.instants import InstantNotReached, InstantTiming
from headgate._store.port import ANY_VERSION, NO_STREAM, Store, StreamAppend
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.store.builders import create_schedule, defined, enqueued, fire_tick


def _job(job_id: str, unique_key: str | None = None, queue: str = "q") -> JobEnqueued:
    return enqueued(job_id, "k", queue, {"n": 1}, unique_key)


def test_append_then_read_stream_in_order(store: Store) -> None:
    first = store.log.append("schedule-a", NO_STREAM, [defined("a")])
    second = store.log.append(
        "schedule-a", 1, [NextRunAdvanced("a", 120_000, 60_000), ScheduleDeleted("a")]
    )
    assert [e.version for e in first + second] == [1, 2, 3]
    read = store.log.read_stream("schedule-a")
    assert [e.event for e in read] == [
        defined("a"),
        NextRunAdvanced("a", 120_000, 60_000),
        ScheduleDeleted("a"),
    ]
    assert all(e.recorded_at_ms == store.clock.now_ms() for e in read)
    assert store.log.stream_version("schedule-a") == 3
    assert store.log.stream_version("schedule-missing") == 0


def test_stale_expected_version_conflicts_and_writes_nothing(store: Store) -> None:
    store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(ConcurrencyConflict) as caught:
        store.log.append("schedule-a", NO_STREAM, [ScheduleDeleted("a")])
    assert (caught.value.stream_id, caught.value.expected, caught.value.actual) == (
        "schedule-a",
        0,
        1,
    )
    with pytest.raises(ConcurrencyConflict):
        store.log.append("schedule-a", 5, [ScheduleDeleted("a")])
    assert len(store.log.read_stream("schedule-a")) == 1
    assert store.log.head() == 1


def test_any_version_appends_regardless(store: Store) -> None:
    store.log.append("schedule-a", ANY_VERSION, [defined("a")])
    store.log.append("schedule-a", ANY_VERSION, [ScheduleDeleted("a")])
    assert store.log.stream_version("schedule-a") == 2


def test_multi_stream_unit_is_all_or_nothing(store: Store) -> None:
    store.log.append("schedule-a", NO_STREAM, [defined("a")])
    job = enqueued("j1", "k", "default", {}, None, "a", 60_000)
    unit = [
        StreamAppend("job-j1", NO_STREAM, (job,)),
        StreamAppend("schedule-a", 0, (NextRunAdvanced("a", 120_000, 60_000),)),  # stale
    ]
    with pytest.raises(ConcurrencyConflict):
        store.log.append_unit(unit)
    assert store.log.read_stream("job-j1") == []
    assert store.log.head() == 1
    unit[1] = StreamAppend("schedule-a", 1, (NextRunAdvanced("a", 120_000, 60_000),))
    recorded = store.log.append_unit(unit)
    assert [(e.stream_id, e.version, e.position) for e in recorded] == [
        ("job-j1", 1, 2),
        ("schedule-a", 2, 3),
    ]


def test_one_conflicting_unit_does_not_fail_its_neighbours(store: Store) -> None:
    store.log.append("schedule-b", NO_STREAM, [defined("b")])
    results = store.log.append_units(
        [
            [StreamAppend("schedule-a", NO_STREAM, (defined("a"),))],
            [StreamAppend("schedule-b", NO_STREAM, (defined("b"),))],  # exists already
            [StreamAppend("schedule-c", NO_STREAM, (defined("c"),))],
        ]
    )
    assert isinstance(results[1], ConcurrencyConflict)
    assert [e.stream_id for e in results[0]] == ["schedule-a"]  # type: ignore[union-attr]
    assert [e.position for e in results[2]] == [3]  # type: ignore[union-attr]
    assert store.log.head() == 3


def test_units_in_one_batch_see_each_others_versions(store: Store) -> None:
    results = store.log.append_units(
        [
            [StreamAppend("schedule-a", NO_STREAM, (defined("a"),))],
            [StreamAppend("schedule-a", 1, (ScheduleDeleted("a"),))],
        ]
    )
    assert not any(isinstance(r, ConcurrencyConflict) for r in results)
    assert store.log.stream_version("schedule-a") == 2


def test_a_batch_of_attempt_ends_lands_in_its_order_each_at_its_version(store: Store) -> None:
    """Ends of attempts (each checked on its job row where the backend can)
    beside other units: each recorded or refused as its expected version says,
    the log and the rows agreeing, positions in the batch's order."""
    for job_id in ("a", "b", "c", "d"):
        store.log.append(f"job-{job_id}", NO_STREAM, [_job(job_id)])
    results = store.log.append_units(
        [
            [StreamAppend("job-a", 1, (JobSucceeded("a", 1, "w1", 0, {"ok": 1}),))],
            [StreamAppend("schedule-x", NO_STREAM, (defined("x"),))],
            [StreamAppend("job-b", 5, (JobSucceeded("b", 1, "w1", 0),))],
            [StreamAppend("job-c", 1, (JobAttemptFailed("c", 1, "w1", 0, "E", "m", 9_000),))],
            [
                StreamAppend("job-d", 1, (JobSucceeded("d", 1, "w1", 0),)),
                StreamAppend("quarantine-f", ANY_VERSION, (FingerprintBlameCleared("f", "d"),)),
            ],
        ]
    )
    refused = results[2]
    assert isinstance(refused, ConcurrencyConflict)
    assert (refused.expected, refused.actual) == (5, 1)
    recorded = [e for r in results if not isinstance(r, ConcurrencyConflict) for e in r]
    assert [(e.stream_id, e.version) for e in recorded] == [
        ("job-a", 2),
        ("schedule-x", 1),
        ("job-c", 2),
        ("job-d", 2),
        ("quarantine-f", 1),
    ]
    positions = [e.position for e in recorded]
    assert positions == sorted(set(positions))
    assert [e.position for e in store.log.read_all(after_position=positions[0] - 1)] == positions
    states = {j: store.reads.job(j) for j in ("a", "b", "c", "d")}
    assert {j: (r.state, r.version) for j, r in states.items() if r is not None} == {
        "a": ("completed", 2),
        "b": ("pending", 1),
        "c": ("pending", 2),
        "d": ("completed", 2),
    }
    assert [e.version for e in store.log.read_stream("job-b")] == [1]


def _positions_are_gap_free(store: Store) -> bool:
    """Whether a write that fails leaves no hole in the positions: every store
    but PostgreSQL's, whose positions come from a sequence a rolled-back write
    has drawn from too (docs/explanation/log-positions.md)."""
    return not (isinstance(store, SqlStore) and store.engine.dialect.name == "postgresql")


def test_failed_writes_leave_nothing_and_later_events_come_after(store: Store) -> None:
    store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(ConcurrencyConflict):
        store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(RuntimeError), store.log.write() as transaction:
        transaction.append_units([[StreamAppend("schedule-b", NO_STREAM, (defined("b"),))]])
        raise RuntimeError("the process gave up mid-transaction")
    (later,) = store.log.append("schedule-c", NO_STREAM, [defined("c")])
    logged = store.log.read_all()
    assert [e.stream_id for e in logged] == ["schedule-a", "schedule-c"]
    assert logged[0].position < later.position == logged[1].position
    assert store.log.read_stream("schedule-b") == []
    assert store.reads.schedule("b") is None
    if _positions_are_gap_free(store):
        assert [e.position for e in logged] == [1, 2]


def test_read_all_pages_by_position(store: Store) -> None:
    for name in "abcde":
        store.log.append(f"schedule-{name}", NO_STREAM, [defined(name)])
    assert [e.position for e in store.log.read_all(0, 2)] == [1, 2]
    assert [e.position for e in store.log.read_all(2, 10)] == [3, 4, 5]
    assert [e.position for e in store.log.read_all(1, 10, until_position=3)] == [2, 3]
    assert store.log.read_all(5) == []


def test_tailing_reader_never_misses_an_event_under_concurrent_writers(store: Store) -> None:
    writers, per_writer = 4, 60
    seen: list[int] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def write(index: int) -> None:
        try:
            for n in range(per_writer):
                store.log.append(f"schedule-w{index}-{n}", NO_STREAM, [defined(f"w{index}-{n}")])
        except BaseException as error:  # surfaced below
            failures.append(error)

    def tail() -> None:
        last = 0
        while True:
            finished = done.is_set()
            batch = store.log.read_all(last, 1000)
            for entry in batch:
                assert entry.position == last + 1, f"reader skipped from {last} to {entry.position}"
                last = entry.position
                seen.append(last)
            if finished and not batch:
                return

    reader = threading.Thread(target=tail)
    reader.start()
    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    done.set()
    reader.join(timeout=120)
    assert not failures
    assert seen == list(range(1, writers * per_writer + 1))


def _held_until(
    clock: FakeClock, instant: int, cancel: threading.Event | None = None
) -> Callable[[], None]:
    """What the scheduler does before a held write commits: wait for the instant."""
    timing = InstantTiming(clock, cancel or threading.Event())
    return lambda: timing.hold_commit_until(instant)


def test_a_write_held_for_an_instant_commits_when_the_clock_gets_there(
    store: Store, clock: FakeClock
) -> None:
    instant = clock.now_ms() + 100
    mover = threading.Timer(0.05, clock.set, args=(instant,))
    mover.start()
    with store.log.write(record_at_ms=instant) as transaction:
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, instant)()
    mover.join()
    (recorded,) = store.log.read_stream("schedule-a")
    assert recorded.recorded_at_ms == instant
    assert clock.now_ms() >= instant


def test_an_abandoned_hold_commits_nothing(store: Store, clock: FakeClock) -> None:
    cancel = threading.Event()
    cancel.set()
    instant = clock.now_ms() + 100
    with (
        pytest.raises(InstantNotReached),
        store.log.write(record_at_ms=instant) as transaction,
    ):
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, instant, cancel)()
    assert store.log.stream_version("schedule-a") == 0
    assert store.log.read_all() == []
    # A clock that never reaches the instant gives up too, after a bounded wait.
    # (Cancelling once the instant has passed changes nothing: see below.)
    instant = clock.now_ms() + 50
    with (
        pytest.raises(InstantNotReached),
        store.log.write(record_at_ms=instant) as transaction,
    ):
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, instant)()
    assert store.log.read_all() == []
    assert store.reads.schedule("a") is None
    _the_next_write_comes_after_everything_read(store)


def test_cancelling_after_the_instant_has_passed_still_commits(
    store: Store, clock: FakeClock
) -> None:
    cancel = threading.Event()
    cancel.set()
    with store.log.write(record_at_ms=clock.now_ms()) as transaction:
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, clock.now_ms(), cancel)()
    assert store.log.stream_version("schedule-a") == 1


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
    assert store.log.read_all() == []
    assert store.log.read_stream("schedule-a") == []
    assert store.reads.schedule("a") is None
    _the_next_write_comes_after_everything_read(store)


def _the_next_write_comes_after_everything_read(store: Store) -> None:
    """After a failed write, the next one is readable from the head a reader saw
    before it (a tailing reader does not miss it), after every committed event."""
    head = store.log.head()
    earlier = store.log.read_all()
    (recorded,) = store.log.append("schedule-next", NO_STREAM, [defined("next")])
    assert all(event.position < recorded.position for event in earlier)
    assert store.log.read_all(head) == [recorded]


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


def test_an_event_the_mapper_refuses_fails_the_write_and_commits_nothing(store: Store) -> None:
    """Payload rules are the mapper's, the same on every store: what it cannot encode
    as canonical JSON is refused as it is appended, and the write's other units
    go with it."""
    not_json = enqueued("j", "k", "q", {"ids": {1, 2}}, None)  # type: ignore[dict-item]
    with pytest.raises(TypeError), store.log.write() as transaction:
        transaction.append_units(
            [
                [StreamAppend("schedule-a", NO_STREAM, (defined("a"),))],
                [StreamAppend("job-j", NO_STREAM, (not_json,))],
            ]
        )
    assert store.log.read_all() == []
    assert store.reads.schedule("a") is None
    _the_next_write_comes_after_everything_read(store)


def test_others_see_a_write_only_once_it_commits(store: Store) -> None:
    create_schedule(store, "a")
    with store.log.write() as transaction:
        transaction.append_units([[StreamAppend("schedule-a", 1, (ScheduleDeleted("a"),))]])
        transaction.append_units([[StreamAppend("job-j", NO_STREAM, (_job("j"),))]])
        assert (store.log.head(), store.log.stream_version("schedule-a")) == (1, 1)
        assert len(store.log.read_all()) == 1 and len(store.log.read_stream("schedule-a")) == 1
        row = store.reads.schedule("a")
        assert row is not None and not row.deleted
        assert store.reads.job("j") is None
    assert store.log.head() == 3
    row = store.reads.schedule("a")
    assert row is not None and row.deleted
    assert store.reads.job("j") is not None


def test_a_read_never_waits_for_a_write_in_progress(store: Store) -> None:
    """A write held open (as a tick batch holds its commit for the tick's instant)
    never blocks readers: they see the state before it."""
    create_schedule(store, "a")
    appended, release = threading.Event(), threading.Event()

    def hold_a_write() -> None:
        with store.log.write() as transaction:
            transaction.append_units([[StreamAppend("schedule-a", 1, (ScheduleDeleted("a"),))]])
            appended.set()
            release.wait(30)

    writer = threading.Thread(target=hold_a_write)
    writer.start()
    try:
        assert appended.wait(10), "the write did not start"
        row = store.reads.schedule("a")
        assert row is not None and not row.deleted
        assert store.log.head() == 1
    finally:
        release.set()
        writer.join(30)
    row = store.reads.schedule("a")
    assert row is not None and row.deleted
