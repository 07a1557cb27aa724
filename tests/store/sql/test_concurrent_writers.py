"""PostgreSQL's writers run side by side (`postgresql.SequenceOrder`): no lock
every writer takes, yet per-stream versions, admission facts and limited
claims hold, a reader tailing the log never passes a position still in
flight, and a rebuild waits for the writers in flight and holds off the rest.

Each test opens two stores on one database, as two processes would (one store
shares its transactions among its own writers: group commit), and holds one
write open in a thread while the other acts. Waits are bounded, so a writer
that waits where it should not fails the test rather than hanging it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from headgate import DuplicateJob, Headgate
from headgate._domain.events import (
    ConcurrencyLimitSet,
    JobAttemptFailed,
    JobCancelled,
    JobReleased,
    JobSucceeded,
    RecordedEvent,
)
from headgate._domain.limits import scope_of
from headgate._domain.streams import job_stream, limit_stream
from headgate._errors import ConcurrencyConflict, ProjectionsRebuilding
from headgate._projections import JobRow
from headgate._store.port import NO_STREAM, StreamAppend, WriteTransaction
from headgate._store.sql.maintenance import rebuild, verify
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import empty_store_url
from tests.store.builders import claim, defined, enqueue

WAIT_S = 10.0
"""How long a step that should go ahead may take (a busy machine included)."""
BLOCKED_S = 0.5
"""How long a step that should wait is watched still waiting."""


@pytest.fixture
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from empty_store_url("postgresql", request, tmp_path)


@pytest.fixture
def stores(url: str, clock: FakeClock) -> Iterator[tuple[SqlStore, SqlStore]]:
    one, other = SqlStore(url, clock), SqlStore(url, clock)
    yield one, other
    one.close()
    other.close()


class Background:
    """A call run in a thread; its result or error asked for with a bounded wait."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._outcome: list[Any] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(("returned", self._call()))
        except BaseException as error:  # each outcome is asserted
            self._outcome.append(("raised", error))

    def still_running_after(self, seconds: float) -> bool:
        self._thread.join(seconds)
        return self._thread.is_alive()

    def outcome(self) -> tuple[str, Any]:
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), f"still waiting after {WAIT_S}s"
        return self._outcome[0]

    def result(self) -> Any:
        kind, value = self.outcome()
        if kind == "raised":
            raise value
        return value


class HeldWrite:
    """A write transaction on `store`, held open after `act` until released."""

    def __init__(
        self,
        store: SqlStore,
        act: Callable[[WriteTransaction], Any],
        then: Callable[[WriteTransaction, Any], Any] | None = None,
    ) -> None:
        """`then`, given what `act` returned, runs once released, before the commit."""
        self._acted = threading.Event()
        self._release = threading.Event()
        self.value: Any = None

        def write() -> None:
            with store.log.write() as transaction:
                self.value = act(transaction)
                self._acted.set()
                assert self._release.wait(WAIT_S * 3), "never released"
                if then is not None:
                    then(transaction, self.value)

        self._background = Background(write)
        assert self._acted.wait(WAIT_S), "the held write did not get to act"

    def commit(self) -> None:
        self._release.set()
        self._background.result()


def _define(schedule_id: str, expected: int = NO_STREAM) -> Callable[[WriteTransaction], Any]:
    def act(transaction: WriteTransaction) -> list[RecordedEvent]:
        (result,) = transaction.append_units(
            [[StreamAppend(f"schedule-{schedule_id}", expected, (defined(schedule_id),))]]
        )
        assert isinstance(result, list)
        return result

    return act


def test_a_write_to_another_stream_commits_while_a_write_is_held_open(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    one, other = stores
    held = HeldWrite(one, _define("a"))
    try:
        beside = Background(lambda: other.log.append("schedule-b", NO_STREAM, [defined("b")]))
        (recorded,) = beside.result()
        assert other.reads.schedule("b") is not None
        assert other.reads.schedule("a") is None, "the held write is not committed yet"
    finally:
        held.commit()
    assert [event.stream_id for event in other.log.read_all()] == ["schedule-a", "schedule-b"]
    assert recorded.position > held.value[0].position


def test_two_writers_at_one_expected_version_one_conflicts(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    one, other = stores
    one.log.append("schedule-s", NO_STREAM, [defined("s")])
    held = HeldWrite(one, _define("s", expected=1))
    second = Background(lambda: other.log.append("schedule-s", 1, [defined("s")]))
    try:
        assert second.still_running_after(BLOCKED_S), "it waits for the stream's writer"
    finally:
        held.commit()
    kind, error = second.outcome()
    assert kind == "raised" and isinstance(error, ConcurrencyConflict), error
    assert (error.expected, error.actual) == (1, 2)
    assert [event.version for event in other.log.read_stream("schedule-s")] == [1, 2]


def test_racing_writers_at_one_expected_version_append_once(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    """Without a held write: both start together, as two processes would."""
    for round_ in range(5):
        stream = f"schedule-r{round_}"
        start = threading.Barrier(2)

        def write(store: SqlStore, stream: str = stream, start: Any = start) -> object:
            start.wait(WAIT_S)
            return store.log.append(stream, NO_STREAM, [defined(stream.removeprefix("schedule-"))])

        racers = [Background(lambda store=store: write(store)) for store in stores]
        outcomes = [racer.outcome() for racer in racers]
        conflicts = [v for k, v in outcomes if k == "raised" and isinstance(v, ConcurrencyConflict)]
        assert sorted(kind for kind, _ in outcomes) == ["raised", "returned"], outcomes
        assert len(conflicts) == 1
        assert [event.version for event in stores[0].log.read_stream(stream)] == [1]


def _end(job_id: str, expected: int, event: Any) -> Callable[[WriteTransaction], Any]:
    def act(transaction: WriteTransaction) -> object:
        (result,) = transaction.append_units(
            [[StreamAppend(job_stream(job_id), expected, (event,))]]
        )
        return result

    return act


def test_an_attempts_end_beside_a_cancel_of_its_job_waits_and_is_refused(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    """An attempt's end is checked on its job row (UPDATE ... WHERE version =
    the claimed one), not by a read of the log: one held open by another
    writer's cancel at the same version makes it wait, then refuses it with
    the version the cancel left."""
    one, other = stores
    enqueue(one, "j")
    claim(one, "j", worker="w1")
    claimed = one.log.stream_version(job_stream("j"))
    held = HeldWrite(one, _end("j", claimed, JobCancelled("j")))
    ending = Background(
        lambda: other.log.append(job_stream("j"), claimed, [JobSucceeded("j", 1, "w1", 0)])
    )
    try:
        assert ending.still_running_after(BLOCKED_S), "it waits for the cancel"
    finally:
        held.commit()
    kind, error = ending.outcome()
    assert kind == "raised" and isinstance(error, ConcurrencyConflict), error
    assert (error.expected, error.actual) == (claimed, claimed + 1)
    row = other.reads.job("j")
    assert row is not None and (row.state, row.version) == ("cancelled", claimed + 1)
    assert [e.version for e in other.log.read_stream(job_stream("j"))] == [1, 2, 3]


def test_racing_ends_of_one_attempt_record_one(stores: tuple[SqlStore, SqlStore]) -> None:
    """Two writers end one claimed attempt at once (a success and a failure, as
    a worker and a late duplicate would): one is recorded, on the row and in
    the log alike, and the other refused."""
    for round_ in range(5):
        job_id = f"r{round_}"
        enqueue(stores[0], job_id)
        claim(stores[0], job_id, worker="w1")
        start = threading.Barrier(2)
        ends = [
            JobSucceeded(job_id, 1, "w1", 0),
            JobAttemptFailed(job_id, 1, "w1", 0, "E", "m", None),
        ]

        def write(store: SqlStore, event: Any, job_id: str = job_id, start: Any = start) -> object:
            start.wait(WAIT_S)
            return store.log.append(job_stream(job_id), 2, [event])

        racers = [
            Background(lambda store=store, event=event: write(store, event))
            for store, event in zip(stores, ends, strict=True)
        ]
        outcomes = [racer.outcome() for racer in racers]
        assert sorted(kind for kind, _ in outcomes) == ["raised", "returned"], outcomes
        (recorded,) = [value for kind, value in outcomes if kind == "returned"]
        stream = stores[1].log.read_stream(job_stream(job_id))
        assert [e.version for e in stream] == [1, 2, 3]
        assert stream[-1].event == recorded[0].event
        row = stores[1].reads.job(job_id)
        expected_state = "completed" if isinstance(recorded[0].event, JobSucceeded) else "failed"
        assert row is not None and (row.state, row.version) == (expected_state, 3)


def test_a_tailing_reader_never_passes_a_position_still_in_flight(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    one, other = stores
    other.log.append("schedule-first", NO_STREAM, [defined("first")])
    held = HeldWrite(one, _define("a"))
    try:
        (earlier,) = held.value
        (later,) = other.log.append("schedule-b", NO_STREAM, [defined("b")])
        assert later.position > earlier.position
        tail = [event.position for event in other.log.read_all(earlier.position - 1)]
        assert tail == [], "the later event waits behind the one in flight"
        assert other.log.head() == earlier.position - 1
    finally:
        held.commit()
    tail = [event.position for event in other.log.read_all(earlier.position - 1)]
    assert tail == [earlier.position, later.position]
    assert other.log.head() == later.position


def test_a_write_that_rolls_back_holds_no_reader_back(stores: tuple[SqlStore, SqlStore]) -> None:
    one, other = stores
    kind, error = Background(lambda: _fail_in_a_write(one)).outcome()
    assert kind == "raised" and isinstance(error, RuntimeError), error
    (recorded,) = other.log.append("schedule-b", NO_STREAM, [defined("b")])
    assert other.log.read_all() == [recorded]
    assert other.log.head() == recorded.position


def _fail_in_a_write(store: SqlStore) -> None:
    with store.log.write() as transaction:
        _define("gone")(transaction)
        raise RuntimeError("the writer gave up")


def _headgate(store: SqlStore) -> Headgate:
    return Headgate(store)  # type: ignore[arg-type]


def test_one_unique_key_admits_one_job_across_processes(url: str, clock: FakeClock) -> None:
    one, other = _headgate(SqlStore(url, clock)), _headgate(SqlStore(url, clock))
    host: Engine = create_engine(url)
    try:
        with host.begin() as connection:
            job = one.enqueue("k", {"n": 1}, unique_key="only", connection=connection)
            racing = Background(lambda: other.enqueue("k", {"n": 2}, unique_key="only"))
            assert racing.still_running_after(BLOCKED_S), "it waits for the key's holder"
        kind, error = racing.outcome()
        assert kind == "raised" and isinstance(error, DuplicateJob), error
        assert [listed.id for listed in other.jobs.list().jobs] == [job.id]
    finally:
        host.dispose()
        one.close()
        other.close()


def test_racing_enqueues_of_one_unique_key_admit_one(url: str, clock: FakeClock) -> None:
    one, other = _headgate(SqlStore(url, clock)), _headgate(SqlStore(url, clock))
    try:
        for round_ in range(5):
            start = threading.Barrier(2)

            def enqueue(hg: Headgate, key: str = f"key-{round_}", start: Any = start) -> object:
                start.wait(WAIT_S)
                return hg.enqueue("k", {"by": id(hg)}, unique_key=key)

            racers = [Background(lambda hg=hg: enqueue(hg)) for hg in (one, other)]
            outcomes = [racer.outcome() for racer in racers]
            kinds = sorted(kind for kind, _ in outcomes)
            assert kinds == ["raised", "returned"], outcomes
            assert any(isinstance(v, DuplicateJob) for _, v in outcomes), outcomes
        assert len(one.jobs.list().jobs) == 5
    finally:
        one.close()
        other.close()


def test_a_limit_of_one_starts_one_job_across_concurrent_claims(
    stores: tuple[SqlStore, SqlStore], clock: FakeClock
) -> None:
    one, other = stores
    for n in range(3):
        enqueue(one, f"j{n}")
    one.log.append(
        limit_stream(scope_of(None, "k", None)),
        NO_STREAM,
        [ConcurrencyLimitSet(None, "k", None, 1)],
    )

    def claim(transaction: WriteTransaction) -> list[str]:
        rows = transaction.claim({"q": 5}, {"k": 60_000}, "w1", clock.now_ms())
        return [row.job_id for row in rows]

    held = HeldWrite(one, claim)
    second = Background(lambda: _claim(other, clock))
    try:
        assert second.still_running_after(BLOCKED_S), "it waits for the claim that counts"
    finally:
        held.commit()
    assert held.value == ["j0"]
    assert second.result() == []
    states = {f"j{n}": getattr(other.reads.job(f"j{n}"), "state", None) for n in range(3)}
    assert states == {"j0": "running", "j1": "pending", "j2": "pending"}


def _claim(store: SqlStore, clock: FakeClock) -> list[str]:
    with store.log.write() as transaction:
        rows = transaction.claim({"q": 5}, {"k": 60_000}, "w2", clock.now_ms())
    return [row.job_id for row in rows]


def _until_a_lock_is_waited_for(store: SqlStore) -> None:
    """Return once some session waits for this store's fence (what a rebuild takes
    alone: `postgresql.SequenceOrder`), not any other store's lock."""
    waiting = text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND objid = 0 AND objsubid = 2 AND classid::bigint ="
        " (('headgate_log_head'::regclass::oid::bigint & 1073741823) | 536870912)"
    )
    deadline = time.monotonic() + WAIT_S
    with store.engine.connect() as connection:
        while not connection.execute(waiting).scalar_one():
            assert time.monotonic() < deadline, f"nobody waits for a lock after {WAIT_S}s"
            time.sleep(0.01)


def test_a_rebuild_waits_for_writes_in_flight_and_holds_off_the_rest(
    stores: tuple[SqlStore, SqlStore], url: str, clock: FakeClock
) -> None:
    one, other = stores
    third = SqlStore(url, clock)  # a writer of its own process: it queues in the database
    for name in "xyz":
        one.log.append(f"schedule-{name}", NO_STREAM, [defined(name)])
    held = HeldWrite(one, _define("a"))
    rebuilding = Background(lambda: rebuild(other))
    try:
        assert rebuilding.still_running_after(BLOCKED_S), "it waits for the write in flight"
        _until_a_lock_is_waited_for(other)  # the rebuild's, asked for: later writers queue
        meanwhile = Background(lambda: third.log.append("schedule-b", NO_STREAM, [defined("b")]))
        assert meanwhile.still_running_after(BLOCKED_S), "a new writer waits behind the rebuild"
    finally:
        held.commit()
    report = rebuilding.result()
    kind, error = meanwhile.outcome()
    third.close()
    assert kind == "raised" and isinstance(error, ProjectionsRebuilding), error
    assert report.head >= held.value[0].position
    assert verify(other).ok
    assert other.reads.schedule("a") is not None


def test_a_cancel_beside_a_rescue_of_the_same_job_takes_turns(
    stores: tuple[SqlStore, SqlStore], clock: FakeClock
) -> None:
    """One writer finds running jobs by their worker (a rescue, a crash's record)
    and then ends them; another reads the job by id to cancel it. Each locks the
    job's stream before its row, so one waits for the other: no deadlock."""
    one, other = stores
    enqueue(one, "j")
    claim(one, "j", worker="w1")

    def running(transaction: WriteTransaction) -> list[JobRow]:
        return transaction.running_on(["w1"])

    def take_back(transaction: WriteTransaction, rows: list[JobRow]) -> None:
        for row in rows:
            transaction.append_units(
                [
                    [
                        StreamAppend(
                            job_stream(row.job_id), row.version, (JobReleased(row.job_id, "w1"),)
                        )
                    ]
                ]
            )

    held = HeldWrite(one, running, then=take_back)
    assert [row.job_id for row in held.value] == ["j"]

    def cancel() -> str | None:
        with other.log.write() as transaction:
            row = transaction.job("j")
            assert row is not None
            if row.state != "running":
                return row.state
            transaction.append_units(
                [[StreamAppend(job_stream("j"), row.version, (JobCancelled("j"),))]]
            )
            return None

    cancelling = Background(cancel)
    try:
        assert cancelling.still_running_after(BLOCKED_S), "it waits for the rescue"
    finally:
        held.commit()
    assert cancelling.result() == "pending"
