"""Another process's write landing inside one of ours: PostgreSQL lets it in (row by
row), SQLite never does (one writer at a time), so these run on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from headgate._store.port import WorkerBeat
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import drop_postgres_schema, fresh_postgres_url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def two_processes(
    postgres_server_url: str, clock: FakeClock
) -> Iterator[tuple[SqlStore, SqlStore]]:
    """Two handles on one store, as two processes have."""
    url, schema = fresh_postgres_url(postgres_server_url)
    first, second = SqlStore(url, clock), SqlStore(url, clock)
    yield first, second
    first.close()
    second.close()
    drop_postgres_schema(postgres_server_url, schema)


def test_a_worker_beating_inside_the_rescuers_write_keeps_its_row(
    two_processes: tuple[SqlStore, SqlStore], clock: FakeClock
) -> None:
    """The rescuer read the worker as expired; the worker renews before the rescuer
    forgets it. Deleting the renewed row would leave a live worker without one, and
    a job it claims next unrescuable should it die."""
    rescuing, working = two_processes
    beat = WorkerBeat("w1", "host", 1, {"q": 4}, 1, 0, 0)
    working.workers.beat(beat, ttl_ms=1_000)
    clock.advance(1_200)
    with rescuing.log.write() as transaction:
        expired = transaction.expired_workers(transaction.now_ms)
        assert [w.worker_id for w in expired] == ["w1"]
        working.workers.beat(beat, ttl_ms=1_000)  # commits: no lock of the rescuer's holds it
        transaction.forget_workers(expired)
    assert [w.worker_id for w in rescuing.workers.live(clock.now_ms())] == ["w1"]
