"""Fixtures for the runtime: a Headgate on each backend with a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine

from headgate import Headgate, RuntimeConfig
from headgate._store.opening import open_store
from headgate._store.port import JobFilter
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.faults import Faults, FaultyStore

START_MS = 1_704_067_200_000  # 2024-01-01T00:00Z
FaultyHeadgate = tuple[Headgate, Faults]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def make_headgate(store_url: str, clock: FakeClock) -> Iterator[Callable[..., Headgate]]:
    created: list[Headgate] = []

    def make(config: RuntimeConfig | None = None, **kwargs: object) -> Headgate:
        hg = Headgate(
            store_url, clock=clock, config=config or RuntimeConfig(lease_ttl_ms=60_000), **kwargs
        )  # type: ignore[arg-type]
        created.append(hg)
        return hg

    yield make
    for hg in created:
        hg.close()


@pytest.fixture
def hg(make_headgate: Callable[..., Headgate]) -> Headgate:
    return make_headgate()


@pytest.fixture
def make_faulty(store_url: str, clock: FakeClock) -> Iterator[Callable[..., FaultyHeadgate]]:
    """Makes a Headgate on a store wrapped for fault injection; returns it and its faults."""
    created: list[Headgate] = []

    def make(config: RuntimeConfig | None = None, **kwargs: object) -> FaultyHeadgate:
        store = FaultyStore(open_store(store_url, clock))
        hg = Headgate(store, config=config or RuntimeConfig(lease_ttl_ms=60_000), **kwargs)  # type: ignore[arg-type]
        created.append(hg)
        return hg, store.faults

    yield make
    for hg in created:
        hg.close()


@pytest.fixture
def faulty(make_faulty: Callable[..., FaultyHeadgate]) -> FaultyHeadgate:
    return make_faulty()


def engine_of(hg: Headgate) -> Engine:
    """The SQL engine under a Headgate's store, for reading tables directly."""
    store = hg._core.store
    while isinstance(store, FaultyStore):
        store = store.inner
    assert isinstance(store, SqlStore)
    return store.engine


def fire(hg: Headgate) -> None:
    """Start if needed, fire everything due at the fake clock's now, and wait."""
    if not hg.running:
        hg.start()
    assert hg.fire_due_ticks(timeout=30), "this runtime should hold the scheduler lease"


def jobs_for(hg: Headgate, schedule_id: str) -> list[int]:
    """Tick of every job the scheduler created for the schedule (oldest first), from the
    jobs themselves: an audit record saying `enqueued` is not proof of a job."""
    ticks: list[int] = []
    cursor = None
    while True:
        page = hg._core.store.reads.jobs_page(JobFilter(schedule_id=schedule_id), 200, cursor)
        ticks.extend(row.periodic_tick_ms for row in page.items if row.periodic_tick_ms is not None)
        if page.next_cursor is None:
            return sorted(ticks)
        cursor = page.next_cursor
