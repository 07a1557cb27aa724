"""Writers queued behind each other in one process share a transaction (group
commit): each still returns only once its work is committed, one that fails is
undone alone, and a failed commit fails every writer it carried."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from headgate._domain.streams import schedule_stream
from headgate._errors import StoreError
from headgate._store.port import NO_STREAM, StreamAppend
from headgate._store.sql import write_transactions
from headgate._store.sql.store import SqlStore
from headgate._store.sql.write_transactions import GroupTransaction
from headgate.testing import FakeClock
from tests.store.builders import defined

WRITERS = 24


def _append(
    store: SqlStore, schedule_id: str, *, then: Callable[[Any], None] | None = None
) -> None:
    """A schedule defined, `then` called with the write transaction before it ends."""
    with store.log.write() as transaction:
        stream = schedule_stream(schedule_id)
        transaction.append_units([[StreamAppend(stream, NO_STREAM, (defined(schedule_id),))]])
        if then is not None:
            then(transaction)


def _positions(store: SqlStore) -> dict[str, int]:
    """schedule id -> the log position of its definition, as committed."""
    with store.database.reading("test") as connection:
        rows = connection.execute(text("SELECT stream_id, position FROM headgate_events"))
        return {str(stream).removeprefix("schedule-"): int(p) for stream, p in rows}


def _gap_free(store: SqlStore) -> bool:
    """Whether a rolled-back write leaves no hole in the positions (not on
    PostgreSQL, whose positions come from a sequence: postgresql.SequenceOrder)."""
    return store.engine.dialect.name != "postgresql"


def _in_threads(*calls: Callable[[], None]) -> list[BaseException | None]:
    outcomes: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            calls[index]()
        except BaseException as error:  # each outcome is asserted
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
        time.sleep(0.005)  # queue them in order
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per write transaction committed in this process. A transaction
    is held open for queued writers as long as they keep coming (not the 10 ms
    a loaded machine can overrun between two writers)."""
    monkeypatch.setattr(write_transactions, "MAX_HELD_OPEN_S", 30.0)
    counted: list[int] = []
    commit = GroupTransaction.commit

    def counting(self: GroupTransaction) -> None:
        commit(self)
        counted.append(self.writers)

    monkeypatch.setattr(GroupTransaction, "commit", counting)
    return counted


@pytest.fixture
def second_handle(store: SqlStore, store_url: str, clock: FakeClock) -> Iterator[SqlStore]:
    """Another process's view of the same store."""
    other = SqlStore(store_url, clock)
    yield other
    other.close()


def test_concurrent_writers_each_return_once_their_work_is_committed(
    store: SqlStore, second_handle: SqlStore, commits: list[int]
) -> None:
    """The first holds the lock until the others queue behind it."""
    seen_by_another_process: dict[str, bool] = {}

    def writer(index: int) -> Callable[[], None]:
        def write() -> None:
            _append(store, f"s-{index}", then=lambda _: time.sleep(0.5 if index == 0 else 0))
            seen_by_another_process[f"s-{index}"] = f"s-{index}" in _positions(second_handle)

        return write

    outcomes = _in_threads(*(writer(index) for index in range(WRITERS)))

    assert outcomes == [None] * WRITERS
    assert seen_by_another_process == {f"s-{index}": True for index in range(WRITERS)}
    positions = _positions(store)
    assert sorted(positions.values()) == list(range(1, WRITERS + 1))
    assert store.log.head() == WRITERS
    assert sum(commits) == WRITERS
    assert len(commits) < WRITERS // 2  # they shared transactions


def test_a_writer_that_fails_in_a_shared_transaction_is_undone_alone(
    store: SqlStore, commits: list[int]
) -> None:
    """The first writer holds the lock until the others queue, so they share its
    transaction; the middle one fails after appending."""

    def first() -> None:
        _append(store, "first", then=lambda _: time.sleep(0.5))

    def failing() -> None:
        def refuse(_: object) -> None:
            raise RuntimeError("the handler's own failure")

        _append(store, "failing", then=refuse)

    def last() -> None:
        _append(store, "last")

    outcomes = _in_threads(first, failing, last)

    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], RuntimeError)
    assert commits == [2]  # one transaction carried all three
    positions = _positions(store)
    assert sorted(positions, key=positions.__getitem__) == ["first", "last"]
    assert store.log.head() == positions["last"]
    if _gap_free(store):
        assert positions == {"first": 1, "last": 2}  # no gap where the failure was
    _append(store, "after")
    assert _positions(store)["after"] == positions["last"] + 1


@pytest.mark.parametrize("found_by", ["the savepoint's release", "a statement through SQLAlchemy"])
def test_a_failed_commit_fails_every_writer_it_carried(
    store: SqlStore, store_url: str, postgres_server_url: str, found_by: str
) -> None:
    """The connection dies while the second writer's block runs: found when its
    savepoint is released, or by a statement of its own (SQLAlchemy then marks
    the connection invalid and refuses to hand out its driver)."""
    if not store_url.startswith("postgresql"):
        pytest.skip("a connection killed from outside: PostgreSQL's pg_terminate_backend")
    admin = create_engine(postgres_server_url, isolation_level="AUTOCOMMIT")
    writer_pid: list[Any] = []

    def first() -> None:
        def note_pid_and_wait(transaction: Any) -> None:
            driver = transaction.connection.connection.driver_connection
            writer_pid.append(driver.info.backend_pid)
            time.sleep(0.2)

        _append(store, "first", then=note_pid_and_wait)

    def second() -> None:
        def connection_lost(transaction: Any) -> None:
            with admin.connect() as connection:
                connection.execute(
                    text("SELECT pg_terminate_backend(:pid)"), {"pid": writer_pid[0]}
                )
            time.sleep(0.1)
            if found_by == "a statement through SQLAlchemy":
                transaction.connection.execute(text("SELECT 1"))

        _append(store, "second", then=connection_lost)

    outcomes = _in_threads(first, second)
    admin.dispose()

    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
    assert _positions(store) == {}
    _append(store, "after")  # a new connection next time
    assert list(_positions(store)) == ["after"]
    assert [event.stream_id for event in store.log.read_all()] == ["schedule-after"]
