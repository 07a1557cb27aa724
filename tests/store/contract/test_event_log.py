"""The event log contract, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from headgate._domain.events import NextRunAdvanced, ScheduleDeleted
from headgate._errors import ConcurrencyConflict
from headgate._runtime.instants import InstantNotReached, InstantTiming
from headgate._store.port import ANY_VERSION, NO_STREAM, Store, StreamAppend
from headgate.testing import FakeClock
from tests.store.builders import defined, enqueued


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


def test_positions_stay_gap_free_after_failed_writes(store: Store) -> None:
    store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(ConcurrencyConflict):
        store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(RuntimeError), store.log.write() as transaction:
        transaction.append_units([[StreamAppend("schedule-b", NO_STREAM, (defined("b"),))]])
        raise RuntimeError("the process gave up mid-transaction")
    store.log.append("schedule-c", NO_STREAM, [defined("c")])
    assert [e.position for e in store.log.read_all()] == [1, 2]
    assert store.log.read_stream("schedule-b") == []


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
    assert store.log.head() == 0
    # A clock that never reaches the instant gives up too, after a bounded wait.
    # (Cancelling once the instant has passed changes nothing: see below.)
    instant = clock.now_ms() + 50
    with (
        pytest.raises(InstantNotReached),
        store.log.write(record_at_ms=instant) as transaction,
    ):
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, instant)()
    assert store.log.head() == 0


def test_cancelling_after_the_instant_has_passed_still_commits(
    store: Store, clock: FakeClock
) -> None:
    cancel = threading.Event()
    cancel.set()
    with store.log.write(record_at_ms=clock.now_ms()) as transaction:
        transaction.append_units([[StreamAppend("schedule-a", NO_STREAM, (defined("a"),))]])
        _held_until(clock, clock.now_ms(), cancel)()
    assert store.log.stream_version("schedule-a") == 1
