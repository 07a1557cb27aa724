"""The coroutines a request handler awaits, on every store: each does what its
synchronous counterpart does, keeps the event loop free, and joins an async
host's transaction."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, make_url, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from headgate import Headgate, NotFound
from headgate._facade.twins import Namespace
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY

HOST = MetaData()
orders = Table("orders", HOST, Column("id", Integer, primary_key=True))


def _coroutines() -> list[tuple[type[object], str]]:
    """Every coroutine twin: Headgate's own and each namespace's."""
    owners: list[type[object]] = [Headgate, *Namespace.__subclasses__()]
    return [
        (owner, name)
        for owner in owners
        for name, value in vars(owner).items()
        if name.startswith("a") and inspect.iscoroutinefunction(value)
    ]


def test_every_coroutine_takes_what_its_synchronous_call_takes() -> None:
    coroutines = _coroutines()
    assert len(coroutines) >= 30
    for owner, name in coroutines:
        synchronous = inspect.signature(getattr(owner, name.removeprefix("a")))
        asynchronous = inspect.signature(getattr(owner, name))
        assert list(asynchronous.parameters) == list(synchronous.parameters), name


def test_a_namespace_coroutine_runs_off_the_event_loop(hg: Headgate) -> None:
    """A twin awaits its synchronous call on the Headgate's pool: the loop's own
    thread never runs it."""
    seen: list[str] = []
    real = hg.schedules.list

    def listing(*args: object, **kwargs: object) -> object:
        seen.append(threading.current_thread().name)
        return real()

    hg.schedules.list = listing  # type: ignore[method-assign]
    asyncio.run(hg.schedules.alist())
    assert len(seen) == 1
    assert seen[0].startswith("headgate-async-read"), seen


@AND_MEMORY
def test_jobs_and_schedules_through_the_coroutines(hg: Headgate, clock: FakeClock) -> None:
    hg.handler("k")(lambda job: None)

    async def host() -> None:
        job = await hg.aenqueue("k", {"n": 1}, priority=2)
        assert (await hg.jobs.aget(job.id)).priority == 2
        many = await hg.aenqueue_many([{"kind": "k"}, {"kind": "k", "queue": "other"}])
        assert [j.queue for j in many] == ["default", "other"]
        assert len((await hg.jobs.alist(state="pending")).jobs) == 3
        assert (await hg.jobs.acancel(job.id)).state == "cancelled"
        assert (await hg.jobs.aretry(job.id)).state == "pending"
        schedule = await hg.schedules.aput("nightly", spec="0 3 * * *", kind="k")
        assert schedule.spec == "0 3 * * *"
        await hg.schedules.aput_many([{"schedule_id": "t1", "spec": "@every:1h", "kind": "k"}])
        assert (await hg.schedules.aupdate("t1", spec="@every:2h")).spec == "@every:7200000"
        assert (await hg.schedules.apause("t1")).paused
        assert not (await hg.schedules.aresume("t1")).paused
        assert {s.id for s in (await hg.schedules.alist()).schedules} == {"nightly", "t1"}
        run = await hg.schedules.aenqueue_now("nightly", "key-1")
        assert run.job_id
        assert (await hg.schedules.aenqueue_events("nightly")).events == []
        await hg.schedules.adelete("t1")
        with pytest.raises(NotFound):
            await hg.schedules.aget("t1")
        assert (await hg.schedules.aget("nightly")).kind == "k"

    asyncio.run(host())
    assert hg.drain().succeeded == 3


@AND_MEMORY
def test_the_loop_runs_on_while_the_store_is_written(hg: Headgate) -> None:
    async def host() -> tuple[int, float]:
        beats = 0
        stop = asyncio.Event()

        async def ping() -> None:
            nonlocal beats
            while not stop.is_set():
                beats += 1
                await asyncio.sleep(0.001)

        pinger = asyncio.create_task(ping())
        await asyncio.sleep(0)
        started = time.monotonic()
        await asyncio.gather(*(hg.aenqueue("k", {"n": n}) for n in range(200)))
        took = time.monotonic() - started
        stop.set()
        await pinger
        return beats, took

    beats, took = asyncio.run(host())
    assert len(hg.jobs.list(limit=200).jobs) == 200
    assert beats >= 2, f"the loop ran {beats} times in {took:.3f} s of enqueues"


@pytest.fixture
def async_host(store_url: str, hg: Headgate) -> Iterator[AsyncEngine]:
    """The host's async engine on the store's database (aiosqlite, psycopg async)."""
    sync = create_engine(store_url)
    HOST.create_all(sync)
    sync.dispose()
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        url = url.set(drivername="sqlite+aiosqlite")
    engine = create_async_engine(url)
    yield engine
    asyncio.run(engine.dispose())


def test_a_job_joins_an_async_hosts_transaction(hg: Headgate, async_host: AsyncEngine) -> None:
    async def host() -> None:
        with pytest.raises(RuntimeError):
            async with AsyncSession(async_host) as session, session.begin():
                await session.execute(orders.insert().values(id=1))
                await hg.aenqueue("ship", {"order": 1}, connection=session)
                raise RuntimeError("rolled back")
        async with async_host.begin() as connection:
            await connection.execute(orders.insert().values(id=2))
            await hg.aenqueue("ship", {"order": 2}, connection=connection)
            await hg.aenqueue_many(
                [{"kind": "ship", "payload": {"order": 3}}], connection=connection
            )
        async with async_host.connect() as connection:
            assert (await connection.execute(select(orders.c.id))).scalars().all() == [2]

    asyncio.run(host())
    assert sorted(str(job.payload) for job in hg.jobs.list().jobs) == [
        "{'order': 2}",
        "{'order': 3}",
    ]


def test_a_memory_store_refuses_an_async_host(tmp_path: Path) -> None:
    from headgate import ValidationError

    hg = Headgate("memory://")
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'host.db'}")

    async def host() -> None:
        async with engine.begin() as connection:
            with pytest.raises(ValidationError) as raised:
                await hg.aenqueue("ship", connection=connection)
            assert raised.value.field == "connection"
        await engine.dispose()

    try:
        asyncio.run(host())
    finally:
        hg.close()
