"""Enqueue inside the host's own transaction, on SQLite and PostgreSQL: the job
commits or rolls back with the host's data, and a process killed before its
commit leaves neither."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.orm import Session

from headgate import DuplicateJob, Headgate, JobContext, ValidationError
from headgate.testing import FakeClock
from tests.conftest import MEMORY_URL
from tests.runtime.conftest import START_MS

HOST = MetaData()
orders = Table("orders", HOST, Column("id", Integer, primary_key=True), Column("item", String(50)))


@pytest.fixture
def host(store_url: str, hg: Headgate) -> Iterator[Engine]:
    """The host's own engine on the store's database, with a table of its own."""
    engine = create_engine(store_url)
    HOST.create_all(engine)
    yield engine
    engine.dispose()


def _events_after(hg: Headgate, position: int) -> list[object]:
    return list(hg._core.store.log.read_all(position))


def test_a_rolled_back_transaction_leaves_no_job_and_no_event(hg: Headgate, host: Engine) -> None:
    head = hg._core.store.log.head()
    with pytest.raises(RuntimeError), host.begin() as connection:
        connection.execute(orders.insert().values(id=1, item="book"))
        job = hg.enqueue("ship", {"order": 1}, connection=connection)
        assert job.state == "pending"
        raise RuntimeError("the host changes its mind")
    assert hg.jobs.list().jobs == []
    assert _events_after(hg, head) == [], "no event was kept"
    with host.connect() as connection:
        assert connection.execute(select(orders)).all() == []
    assert hg.enqueue("ship").state == "pending", "the store's own writes go on"


def test_a_committed_session_makes_its_jobs_run_once(hg: Headgate, host: Engine) -> None:
    ran: list[object] = []
    hg.handler("ship")(lambda job: ran.append(job.payload))
    with Session(host) as session, session.begin():
        session.execute(orders.insert().values(id=1, item="book"))
        hg.enqueue("ship", {"order": 1}, connection=session)
        many = hg.enqueue_many(
            [{"kind": "ship", "payload": {"order": n}} for n in (2, 3)], connection=session
        )
        assert len(many) == 2
        assert hg.jobs.list().jobs == [], "unseen outside the host's transaction"
    assert hg.drain().succeeded == 3
    assert sorted(str(payload) for payload in ran) == [
        "{'order': 1}",
        "{'order': 2}",
        "{'order': 3}",
    ]
    assert hg.drain().ran == 0


def test_a_failed_enqueue_undoes_only_itself(hg: Headgate, host: Engine) -> None:
    hg.enqueue("ship", unique_key="order-1")
    with host.begin() as connection:
        connection.execute(orders.insert().values(id=1, item="book"))
        with pytest.raises(Exception, match="order-1"):
            hg.enqueue("ship", unique_key="order-1", connection=connection)
        hg.enqueue("ship", unique_key="order-2", connection=connection)
    assert sorted(str(job.unique_key) for job in hg.jobs.list().jobs) == ["order-1", "order-2"]
    with host.connect() as connection:
        assert len(connection.execute(select(orders)).all()) == 1


def test_a_refused_job_undoes_the_whole_batch_even_when_the_host_commits(
    hg: Headgate, host: Engine
) -> None:
    hg.enqueue("ship", unique_key="taken")
    items: list[dict[str, object]] = [{"kind": "ship"} for _ in range(550)]  # two chunks
    items.append({"kind": "ship", "unique_key": "taken"})
    with host.begin() as connection:
        connection.execute(orders.insert().values(id=1, item="book"))
        with pytest.raises(DuplicateJob):
            hg.enqueue_many(items, connection=connection)
        hg.enqueue("ship", unique_key="after", connection=connection)
    # the host caught the refusal and committed: its row and its later job, no job of the batch
    assert sorted(str(job.unique_key) for job in hg.jobs.list().jobs) == ["after", "taken"]
    with host.connect() as connection:
        assert len(connection.execute(select(orders)).all()) == 1


def test_a_connection_elsewhere_or_outside_a_transaction_is_refused(
    hg: Headgate, host: Engine, tmp_path: Path
) -> None:
    other = create_engine(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    with other.begin() as connection, pytest.raises(ValidationError) as raised:
        hg.enqueue("ship", connection=connection)
    assert raised.value.field == "connection"
    other.dispose()
    with host.connect() as connection, pytest.raises(ValidationError) as raised:
        hg.enqueue("ship", connection=connection)
    assert "transaction" in raised.value.rule
    autocommit = host.connect().execution_options(isolation_level="AUTOCOMMIT")
    with autocommit, autocommit.begin(), pytest.raises(ValidationError) as raised:
        hg.enqueue("ship", connection=autocommit)
    assert "autocommit" in raised.value.rule
    with pytest.raises(ValidationError) as raised:
        hg.enqueue("ship", connection="postgresql://elsewhere")
    assert raised.value.field == "connection"
    assert hg.jobs.list().jobs == []


def test_a_store_in_memory_refuses_a_host_connection(tmp_path: Path) -> None:
    hg = Headgate(MEMORY_URL, clock=FakeClock(START_MS))
    engine = create_engine(f"sqlite:///{tmp_path / 'host.db'}")
    try:
        with engine.begin() as connection, pytest.raises(ValidationError) as raised:
            hg.enqueue("ship", connection=connection)
        assert raised.value.field == "connection"
    finally:
        engine.dispose()
        hg.close()


_HOST_PROCESS = textwrap.dedent(
    """
    import os, signal, sys
    from sqlalchemy import create_engine, text
    from headgate import Headgate

    url, when = sys.argv[1], sys.argv[2]
    hg = Headgate(url)
    engine = create_engine(url)
    connection = engine.connect()
    transaction = connection.begin()
    connection.execute(text("INSERT INTO orders (id, item) VALUES (1, 'book')"))
    hg.enqueue("ship", {"order": 1}, connection=connection)
    if when == "after-commit":
        transaction.commit()
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.processes
@pytest.mark.parametrize("when", ["before-commit", "after-commit"])
def test_a_host_killed_around_its_commit_keeps_the_job_and_its_data_together(
    store_url: str, hg: Headgate, host: Engine, clock: FakeClock, when: str
) -> None:
    ran: list[object] = []
    hg.handler("ship")(lambda job: ran.append(job.payload))
    child = subprocess.run(
        [sys.executable, "-c", _HOST_PROCESS, store_url, when],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "ready" in child.stdout
    with host.connect() as connection:
        stored_orders = len(connection.execute(select(orders)).all())
    committed = when == "after-commit"
    clock.set(time.time_ns() // 1_000_000 + 1_000)  # the child enqueued on the real clock
    assert stored_orders == (1 if committed else 0)
    assert len(hg.jobs.list().jobs) == (1 if committed else 0)
    assert hg.drain().succeeded == (1 if committed else 0)
    assert ran == ([{"order": 1}] if committed else [])
    assert hg.enqueue("after").state == "pending", "the killed host's lock is gone"


def test_workers_wake_when_the_host_commits(store_url: str, host: Engine) -> None:
    """Real clock and workers: the job is not claimed while the host's transaction
    is open, and starts promptly once it commits."""
    hg = Headgate(store_url)
    started: list[float] = []

    @hg.handler("ship")
    def ship(job: JobContext) -> None:
        started.append(time.monotonic())

    hg.start()
    try:
        with host.begin() as connection:
            hg.enqueue("ship", connection=connection)
            time.sleep(0.3)
            assert started == []
            committed = time.monotonic()
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started, "the job never started"
        assert started[0] - committed < 2.0
    finally:
        hg.close()
